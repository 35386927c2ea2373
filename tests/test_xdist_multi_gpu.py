"""Under `pytest -n N` on a host with several GPUs, every multi_gpu test runs on one xdist
worker (harness/runners/xdist_gpu.py). Shown on CPU with a real xdist run of a small test
directory whose conftest tells the same hooks the plugin uses that the host has 2 GPUs."""
from __future__ import annotations

import os
import subprocess
import sys

from harness.runners import xdist_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFTEST = """
import pytest
from harness.runners import xdist_gpu

GPUS = {gpus}  # what this run pretends the host has

def pytest_configure(config):
    xdist_gpu.configure_multi_gpu(config, GPUS)

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    xdist_gpu.group_multi_gpu(config, items, GPUS)

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return xdist_gpu.make_scheduler(config, log, GPUS)
"""

TESTS = """
import os, time
import pytest

def _note(name, seconds):
    with open(os.path.join(os.environ["NOTES"], name), "w") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "none"))
    time.sleep(seconds)

# The grouped tests are short and the others long: whichever worker takes the group is free
# again long before the other has run the single-GPU tests, so load scheduling must hand
# it some of them (under a loaded host too), and one worker taking them all means none
# were spread.
@pytest.mark.multi_gpu
@pytest.mark.parametrize("i", range(6))
def test_tp(i):
    _note(f"tp{i}", 0.01)

@pytest.mark.parametrize("i", range(10))
def test_single(i):
    _note(f"single{i}", 0.4)
"""


def _workers(tmp_path, gpus: int) -> tuple[set, set]:
    d = tmp_path / f"gpus{gpus}"
    notes = d / "notes"
    notes.mkdir(parents=True)
    (d / "conftest.py").write_text(CONFTEST.format(gpus=gpus))
    (d / "test_grouped.py").write_text(TESTS)
    (d / "pytest.ini").write_text("[pytest]\nmarkers =\n    multi_gpu: several GPUs\n")
    env = {**os.environ, "NOTES": str(notes),
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop(xdist_gpu.SPREAD_ENV, None)  # the default: grouped
    # Without the specdec plugin (it would import torch in every process: seconds each);
    # the conftest calls the plugin's xdist hooks with the pretended GPU count.
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
                           "no:cacheprovider", "-p", "no:specdec", str(d)], cwd=d, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen = {p.name: p.read_text() for p in notes.iterdir()}
    assert len(seen) == 16, seen
    return ({w for n, w in seen.items() if n.startswith("tp")},
            {w for n, w in seen.items() if n.startswith("single")})


def test_multi_gpu_tests_share_one_worker(tmp_path):
    """The same run is its own control: the single-GPU tests, as many and as long, are
    spread over both workers by load scheduling; only the grouping keeps the others on one.
    (A whole second run with one GPU, which spreads them too, costs 20 s more on 2 cores.)"""
    tp, single = _workers(tmp_path, gpus=2)
    assert len(tp) == 1, f"multi_gpu tests ran on workers {tp}"
    assert len(single) == 2, f"the single-GPU tests all ran on {single}: nothing was spread"


class _Item:
    def __init__(self, name: str, multi: bool) -> None:
        self.nodeid, self.multi = f"t.py::{name}", multi

    def get_closest_marker(self, name):
        return object() if self.multi and name == "multi_gpu" else None

    def add_marker(self, mark):
        raise AssertionError(f"{self.nodeid} was grouped: {mark}")


def test_spread_puts_multi_gpu_tests_first_and_ungrouped(monkeypatch):
    """SPECDEC_XDIST_MULTI_GPU=spread: no xdist group, the multi_gpu tests first in the
    collection (LoadGroupScheduling hands the first units to distinct workers); the rest keep
    their order. Without the variable they are grouped (the test above)."""
    monkeypatch.setenv(xdist_gpu.SPREAD_ENV, "spread")
    items = [_Item("a", False), _Item("tp1", True), _Item("b", False), _Item("tp2", True)]
    assert xdist_gpu.group_multi_gpu(None, items, gpus=2) == 2
    assert [i.nodeid[6:] for i in items] == ["tp1", "tp2", "a", "b"]
    assert xdist_gpu.group_multi_gpu(None, items, gpus=1) == 0  # one GPU: nothing moves
