"""Every construction-verifier rule has a program broken on purpose that shows the rule's message.

The mutations live with their rule family in `tests/test_physical_mutation_*.py`; what they share (kernels,
program editing, the registry) is `tests/mutations.py`.
"""

from __future__ import annotations

import pytest

import physical
from physical.verifier import RULES, check
from tests import (
    test_physical_mutation_access,
    test_physical_mutation_order,
    test_physical_mutation_ownership,
    test_physical_mutation_structure,
    test_physical_mutation_workspace,
)
from tests.mutations import KERNELS, Mutation

FAMILIES = (test_physical_mutation_structure, test_physical_mutation_ownership, test_physical_mutation_access,
            test_physical_mutation_order, test_physical_mutation_workspace)
MUTATIONS: dict[str, Mutation] = {rule: make for f in FAMILIES for rule, make in f.FAMILY.first.items()}


def test_every_rule_has_a_mutation():
    rules = [rule for f in FAMILIES for rule in f.FAMILY.first]
    assert len(rules) == len(set(rules)), "a rule's first mutation is in two families"
    assert sorted(rules) == sorted(RULES)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_unmutated_programs_verify(name):
    k = KERNELS[name]()
    assert check(physical.construct(k), k) == []
    assert check(physical.lower(k), k) == []
