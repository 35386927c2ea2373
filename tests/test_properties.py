"""The harness's properties under pytest: Hypothesis draws configurations, oracles judge.
The entries (coarse axes fixed per entry so xdist spreads them, regression examples from
cases/) are defined once in harness/suite.py, which the bug zoo runs too. Each failure
carries the one-line replay command (`python -m harness repro ...`)."""
from __future__ import annotations

import pytest

from harness.check import repro_command
from harness.runs import default_device
from harness.suite import ALL_PROPERTIES, suite

DEVICE = default_device()


def _check(name: str, cfg) -> None:
    try:
        ALL_PROPERTIES[name](cfg, DEVICE)
    except Exception as exc:
        if hasattr(cfg, "to_dict"):
            exc.add_note(f"replay: {repro_command(name, cfg, DEVICE)}")
        raise


@pytest.mark.parametrize("entry", suite(), ids=lambda e: e.id)
def test_property(entry):
    entry.law(DEVICE, _check)()
