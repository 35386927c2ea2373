"""The harness's properties under pytest: Hypothesis draws configurations, oracles judge.
The entries (coarse axes fixed per entry so xdist spreads them, regression examples from
cases/) are defined once in harness/runners/suite.py, which the bug zoo runs too. Each failure
carries the one-line replay command (`python -m harness repro ...`)."""
from __future__ import annotations

import pytest
import torch

from harness.runners.check import repro_command
from harness.strategies.runs import default_device
from harness.runners.suite import ALL_PROPERTIES, gpus_needed, runnable, suite

DEVICE = default_device()
# specdec's white-box suite: what `pytest --engine specdec` runs besides the black-box laws.
pytestmark = pytest.mark.engine_law("specdec")


def _check(name: str, cfg) -> None:
    try:
        ALL_PROPERTIES[name](cfg, DEVICE)
    except Exception as exc:
        if hasattr(cfg, "to_dict"):
            exc.add_note(f"replay: {repro_command(name, cfg, DEVICE)}")
        raise


def _param(entry):
    """Tensor-parallel entries need tp_size GPUs on CUDA: marked multi_gpu (select them with
    `-m multi_gpu`, or leave them out with `-m "not multi_gpu"`), skipped with fewer GPUs."""
    if gpus_needed(entry.axes, DEVICE) > 1:
        return pytest.param(entry, marks=pytest.mark.multi_gpu)
    return entry


@pytest.mark.parametrize("entry", [_param(e) for e in suite()], ids=lambda e: e.id)
def test_property(entry):
    if not runnable(entry.axes, DEVICE):
        pytest.skip(f"{entry.id} needs {gpus_needed(entry.axes, DEVICE)} GPUs, "
                    f"{torch.cuda.device_count()} visible")
    entry.law(DEVICE, _check)()
