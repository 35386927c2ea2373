"""The zoo's two scopes (harness/runners/zoo.py): "entry" runs the suite entry holding the
case's regression example first, as that entry's pytest test runs (its explicit examples in
order), so it stops within them; "suite" walks every case's example in registry order, so a
fault whose case comes late runs the earlier cases' examples first. Both catch, with the
case's declared check among the checks seen; an unknown scope is refused by name."""
from __future__ import annotations

import pytest
from hypothesis import settings

from harness.runners.cases import load_cases
from harness.runners.zoo import detect, entry_of

# The last single-GPU case of the registry: the suite walk reaches it after every other.
FAULT = "prefix_evict_referenced"


def test_every_case_has_an_entry_of_its_own_law():
    """Another law's entry may hold an equal configuration among its own examples (the
    structure law holds verify_metadata_before_padding's): the entry run is the case's law's."""
    for case in load_cases().values():
        entry = entry_of(case)
        assert entry.prop == case.prop and case.example in entry.examples(), case.fault


def test_entry_scope_stops_within_the_entrys_explicit_examples():
    case = load_cases()[FAULT]
    entry = entry_of(case)
    assert case.example in entry.examples() and entry.prop == case.prop
    profile = settings.get_profile("ci")
    by_entry = detect(FAULT, "cpu", profile, scope="entry")
    assert by_entry.caught and by_entry.declared_caught and by_entry.phase == "example"
    assert by_entry.examples <= entry.examples().index(case.example) + 1
    by_suite = detect(FAULT, "cpu", profile, scope="suite")
    assert by_suite.caught and by_suite.declared_caught
    assert by_suite.examples > by_entry.examples  # the control: the walk from the registry's start


def test_unknown_scope_refused():
    with pytest.raises(ValueError, match="'entries'.*suite, entry"):
        detect(FAULT, "cpu", settings.get_profile("ci"), scope="entries")
