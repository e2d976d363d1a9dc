"""The construction verifier's registry, its error, and valid programs that keep every rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import intent
import physical
from kir.cli import specialize_dtypes
from kir.core import Kernel
from kir.dtypes import DType
from kir.errors import DiagnosticError, VerifyError
from kir.text import parse_kernel, parse_module
from physical import ops as P
from physical.lowering import run_passes
from physical.ops._base import typed_elsewhere as typed_elsewhere_rule
from physical.verifier import RULE_DOCS, RULES, PhysicalVerifyError, Violation, check, run_rule, verify
from physical.verifier.structured import STRUCTURED
from physical.verify import PhysicalVerifyError as StructuralVerifyError
from tests import acceptance as acceptance_files
from tests import samples
from tests.mutations import swap, two_groups
from tests.test_physical_mutation import MUTATIONS

ROOT = Path(__file__).resolve().parents[1]

SECTION_9 = ["self-contained", "ssa-defined", "fragment-types", "launch-extent", "segments-partition", "ownership",
             "loop-invariant", "effect-coverage", "structured-complete", "region-op-complete", "buffer-complete",
             "buffer-init", "workspace-protocol", "split-effects", "lookback-protocol",
             "access-complete", "coordinate-provenance", "narrowing-explicit", "bounds-justified",
             "ordered-dependence", "unordered-conflict", "buffer-visibility", "atomic-preserved"]


def test_rules_have_stable_names_in_their_running_order():
    assert list(RULES) == SECTION_9


def test_every_rule_states_its_obligation():
    assert set(RULE_DOCS) == set(RULES)
    assert all(len(doc) > 40 for doc in RULE_DOCS.values())


def test_every_physical_op_class_has_a_typing_rule():
    assert [name for name, cls in P.OP_CLASSES.items() if not callable(getattr(cls, "type_problems", None))] == []
    typed_elsewhere = {c for c in P.OP_CLASSES.values() if c.type_problems is typed_elsewhere_rule}
    assert typed_elsewhere == set(STRUCTURED) | {P.Load, P.AtomicRMW, P.AtomicCAS, P.RegionFold, P.RegionScan}


def test_structured_ops_and_control_have_completeness_checks():
    assert set(STRUCTURED) == {P.Reduce, P.Scan, P.LaneFold, P.LaneScan, P.Contract, P.Histogram, P.For, P.While,
                               P.If}


# ---------------------------------------------------------------------------------------------- valid programs


def example_kernels() -> list[tuple[str, Kernel]]:
    """Every kernel of every examples/kir file, specialised for each choice of a dtype variable."""
    out = []
    for path in sorted((ROOT / "examples" / "kir").glob("*.kir")):
        for k in parse_module(path.read_text(encoding="utf-8"), str(path)):
            if not k.dtype_vars:
                out.append((f"{path.stem}:{k.name}", k))
                continue
            var = k.dtype_vars[0]
            for dt in var.choices:
                out.append((f"{path.stem}:{k.name}[{dt}]", specialize_dtypes(k, {var.name: dt})))
    return out


EXAMPLES = dict(example_kernels())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_constructs_verifies_and_prints(name):
    k = EXAMPLES[name]
    for program in (physical.construct(k), physical.lower(k)):
        assert check(program, k) == []
        assert physical.print_program(program).startswith(f"program {k.name}\n")


def acceptance_kernels() -> dict[str, Kernel]:
    """Every acceptance kernel, generic ones once per dtype choice (no case data: it may run Triton)."""
    out: dict[str, Kernel] = {}
    for path in acceptance_files.FILES:
        for name, kernel in intent.kernels_in_file(str(path)).items():
            generic = kernel.kir
            if not generic.dtype_vars:
                out[f"{path.stem}:{name}"] = generic
                continue
            var = generic.dtype_vars[0]
            for choice in var.choices:
                out[f"{path.stem}:{name}[{var.name}={choice}]"] = kernel.specialize_with({var.name: choice})
    return out


@pytest.fixture(scope="module")
def acceptance() -> dict[str, Kernel]:
    return acceptance_kernels()


def test_every_acceptance_kernel_constructs_verifies_and_prints(acceptance):
    assert len(acceptance) >= 13
    for name, k in acceptance.items():
        program = physical.lower(k)
        assert check(program, k) == [], name
        assert physical.print_program(program).startswith(f"program {k.name}\n")


FUZZ_CASES = sorted((ROOT / "tests" / "fuzz_cases").glob("*.kir"))


@pytest.mark.parametrize("path", FUZZ_CASES, ids=lambda p: p.stem)
def test_every_saved_fuzz_kernel_verifies_after_every_pass_or_is_refused(path):
    """What the fuzzers found keeps every rule too, or is refused with a diagnostic about the input."""
    k = parse_kernel(path.read_text(encoding="utf-8"), str(path))
    try:
        program = physical.construct(k)
    except DiagnosticError as exc:
        assert not isinstance(exc, PhysicalVerifyError) and not exc.message.startswith("internal"), exc.message
        return
    assert [str(v) for v in check(program, k)] == []
    run_passes(program, verify_with=k)


def test_a_region_scan_emit_takes_the_scanned_values_in_the_accumulator_dtype():
    """An f16 product scans in f32 (as the oracle does) and rounds each element once as emit stores it; an
    emit that takes the component dtype instead is refused."""
    path = ROOT / "tests" / "fuzz_cases" / "lower_region_scan_f16_prod_in_f32.kir"
    k = parse_kernel(path.read_text(encoding="utf-8"), path.name)
    p = physical.lower(k)
    scan = next(op for op in p.walk() if isinstance(op, P.RegionScan))
    start, scanned, member = scan.emit.args
    assert scan.acc_dtypes == (DType.f32,) and scanned.type.dtype is DType.f32
    assert check(p, k) == []
    narrow = dataclasses.replace(scanned, type=scanned.type.with_dtype(DType.f16))
    broken = swap(p, scan, dataclasses.replace(scan, emit=dataclasses.replace(scan.emit, args=(start, narrow, member))))
    found = [str(v) for v in check(broken, k) if v.rule == "region-op-complete"]
    assert found == ["[region-op-complete] region_scan (from region_scan at lower_region_scan_f16_prod_in_f32.kir:7): "
                     "region_scan emit takes (i64(index), f16[I, 256:BLOCK_C256], pred[I, 256:BLOCK_C256]); it "
                     "takes the chunk start, the scanned components in their accumulator dtypes "
                     "(f32[I, 256:BLOCK_C256]) and their membership"]


@pytest.mark.parametrize("make", samples.ALL, ids=lambda f: f.__name__)
def test_lowering_with_verification_runs_every_rule_after_every_pass(make):
    k = make()
    assert physical.lower(k, verify=True) == physical.lower(k)


# ---------------------------------------------------------------------------------------------- the error


def test_the_error_is_a_located_diagnostic_naming_the_rule():
    kernel, broken, message = MUTATIONS["buffer-visibility"]()
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    err = info.value
    assert isinstance(err, DiagnosticError) and isinstance(err, VerifyError)
    assert StructuralVerifyError is PhysicalVerifyError  # one error class, under both names
    assert (err.rule, err.file, err.line, err.col) == ("buffer-visibility", "mutation.py", 22, 5)
    assert str(err) == f"mutation.py:22:5: error: {message}"
    buf = next(b.id for b in broken.buffers if b.name == "buf")
    (read_back,) = [op for op in broken.walk() if isinstance(op, P.Load) and op.access.buffer == buf]
    assert err.origin == read_back.origin


def test_further_violations_of_the_same_rule_are_listed_in_the_context():
    k = two_groups()
    p = physical.lower(k)
    broken = p.replace(segments=tuple(dataclasses.replace(s, offset=s.length) for s in p.segments))
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, k)
    err = info.value
    assert err.message == f"[segments-partition] segment of group 0 starts at {p.segments[0].length}, but the " \
                          f"lengths before it sum to 0"
    assert err.context == (f"also: [segments-partition] segment of group 1 starts at {p.segments[1].length}, but the "
                           f"lengths before it sum to {p.segments[0].length}")
    assert str(err).endswith(err.context)


def test_a_rule_that_cannot_finish_reports_itself(monkeypatch):
    def broken_rule(program, kernel=None):
        raise KeyError("no such group")

    monkeypatch.setitem(RULES, "ownership", broken_rule)
    found = run_rule("ownership", physical.lower(samples.softmax()))
    assert found == [Violation("ownership", "the rule could not be checked on this program: KeyError: 'no such "
                                            "group'")]


def test_a_valid_program_checks_clean_and_verifies():
    k = samples.segment_sum()
    p = physical.lower(k)
    assert check(p) == [] and check(p, k) == []
    assert verify(p, k) is None
    assert physical.verify(p) is p
