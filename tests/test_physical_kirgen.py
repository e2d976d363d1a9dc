"""Property: for random valid KIR, construction succeeds and the program keeps every verifier rule, or
construction refuses the kernel with a located diagnostic about the input. Never another exception,
never an internal diagnostic, never a program the verifier rejects."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import physical
from kir.core import Kernel
from kir.errors import DiagnosticError
from physical.verifier import check
from tests.kirgen import kernels


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(generic=False))
def test_random_kernels_construct_and_verify_or_are_refused(kernel: Kernel):
    try:
        program = physical.lower(kernel)
    except DiagnosticError as exc:
        assert not exc.message.startswith("internal"), exc.message
        return
    violations = [str(v) for v in check(program, kernel)]
    assert violations == [], "\n".join(violations) + "\n" + str(kernel)
