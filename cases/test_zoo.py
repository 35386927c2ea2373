"""The meta-test: the ordinary property suite (ci profile) fails with each historical fault
switched on, and its regression examples pass with none. The suite is run as `pytest -n
auto` runs it, entries side by side: the entry holding the case's regression example first
(harness/runners/zoo.py, scope "entry"; `python -m harness zoo` walks the whole suite).
Detection comes only from the generic oracles of harness/runners/suite.py; nothing here
names what a fault breaks."""
from __future__ import annotations

import pytest

from cases import CASES
from harness.strategies.runs import default_device
from harness.runners.suite import (ALL_PROPERTIES, case_skip_reason, gpus_needed, runnable,
                                   suite)
from harness.runners.zoo import detect_isolated
from specdec import faults
from specdec.faults import REGISTRY

DEVICE = default_device()


def _faults():
    """Faults whose case needs several GPUs (tensor parallel) are marked multi_gpu: under
    `pytest -n auto` they go first, in the multi-GPU bins (harness/gate/xdist_gpu.py)."""
    return [pytest.param(f, marks=pytest.mark.multi_gpu)
            if gpus_needed(CASES[f].example, DEVICE) > 1 else f for f in REGISTRY]


def test_every_fault_has_a_case_and_an_entry():
    assert list(CASES) == list(REGISTRY)
    entries = suite()
    for case in CASES.values():
        assert any(e.prop == case.prop and case.example in e.examples() for e in entries), \
            case.fault


def test_faults_are_off_by_default():
    assert not faults.enabled() or faults.enabled() == faults._validated(
        __import__("os").environ.get("SPECDEC_FAULTS", "").split(","))


@pytest.mark.parametrize("fault", _faults())
def test_suite_catches(fault):
    why = case_skip_reason(CASES[fault], DEVICE)
    if why is not None:
        pytest.skip(f"{fault}: {why}")
    row = detect_isolated(fault, device=DEVICE, profile_name="ci", scope="entry")
    assert row.caught, f"{fault}: the suite passed {row.examples} examples with the fault on"
    case = CASES[fault]
    assert row.declared_caught, (f"{fault}: declared to fail {case.prop}:{case.check}, caught "
                                 f"only by {row.checks}")


@pytest.mark.parametrize("fault", _faults())
def test_example_passes_without_fault(fault):
    case = CASES[fault]
    if not runnable(case.example, DEVICE):
        pytest.skip(f"{fault}: tp_size={case.example.tp_size} needs more GPUs than are visible")
    ALL_PROPERTIES[case.prop](case.example, DEVICE)
