"""Under `pytest -n N` on a host with several GPUs, the multi_gpu tests of one test function
run on one xdist worker, and they are handed out first (harness/gate/xdist_gpu.py).
Shown on CPU with a real xdist run of a small test directory whose conftest tells the same
hooks the plugin uses that the host has 2 GPUs."""
from __future__ import annotations

import os
import sys

import pytest

from harness.gate import xdist_gpu
from harness.gate.fork_server import run_bounded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFTEST = """
import pytest
from harness.gate import xdist_gpu

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

# The grouped tests are short and the others long: whichever worker takes a group is free
# again long before the other has run the single-GPU tests, so load scheduling must hand
# it some of them (under a loaded host too), and one worker taking a function's tests
# means they were not spread.
@pytest.mark.multi_gpu
@pytest.mark.parametrize("i", range(3))
def test_tp(i):
    _note(f"tp{i}", 0.01)

@pytest.mark.multi_gpu
@pytest.mark.parametrize("i", range(3))
def test_tq(i):
    _note(f"tq{i}", 0.01)

@pytest.mark.parametrize("i", range(10))
def test_single(i):
    _note(f"single{i}", 0.4)
"""


def _workers(tmp_path, gpus: int) -> tuple[set, set, set]:
    d = tmp_path / f"gpus{gpus}"
    notes = d / "notes"
    notes.mkdir(parents=True)
    (d / "conftest.py").write_text(CONFTEST.format(gpus=gpus))
    (d / "test_grouped.py").write_text(TESTS)
    (d / "pytest.ini").write_text("[pytest]\nmarkers =\n    multi_gpu: several GPUs\n")
    env = {**os.environ, "NOTES": str(notes),
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTEST_XDIST_WORKER", None)
    # Groups by function: the bins (the default) are drawn from measured seconds, which
    # these tests have none of (test_bins_* below); either way, xdist keeps a group on one
    # worker.
    env[xdist_gpu.SPREAD_ENV] = "function"
    # Without the specdec plugin (it would import torch in every process: seconds each);
    # the conftest calls the plugin's xdist hooks with the pretended GPU count.
    rc, out, err = run_bounded([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
                                "no:cacheprovider", "-p", "no:specdec", str(d)], 120,
                               "the small xdist run", env, cwd=str(d))
    assert rc == 0, out[-3000:] + err[-3000:]
    seen = {p.name: p.read_text() for p in notes.iterdir()}
    assert len(seen) == 16, seen
    return tuple({w for n, w in seen.items() if n.startswith(p)} for p in ("tp", "tq", "single"))


def test_multi_gpu_tests_of_a_function_share_one_worker(tmp_path):
    """The same run is its own control: the single-GPU tests, as many and as long, are
    spread over both workers by load scheduling; only the grouping keeps each multi-GPU
    function's tests on one. (A whole second run with one GPU, which spreads them too, costs
    20 s more on 2 cores.)"""
    tp, tq, single = _workers(tmp_path, gpus=2)
    assert len(tp) == 1, f"test_tp's multi_gpu tests ran on workers {tp}"
    assert len(tq) == 1, f"test_tq's multi_gpu tests ran on workers {tq}"
    assert len(single) == 2, f"the single-GPU tests all ran on {single}: nothing was spread"


class _Item:
    def __init__(self, name: str, multi: bool) -> None:
        self.nodeid, self.multi, self.groups = f"tests/t.py::{name}", multi, []
        self.originalname = name.split("[")[0]

    def get_closest_marker(self, name):
        return object() if self.multi and name == "multi_gpu" else None

    def add_marker(self, mark):
        self.groups.append(mark.args[0])


def _grouped(monkeypatch, mode: str | None, gpus: int = 2) -> list[tuple[str, list]]:
    if mode is None:
        monkeypatch.delenv(xdist_gpu.SPREAD_ENV, raising=False)
    else:
        monkeypatch.setenv(xdist_gpu.SPREAD_ENV, mode)
    items = [_Item("a", False), _Item("tp[1]", True), _Item("b", False), _Item("tq[1]", True),
             _Item("tp[2]", True)]
    xdist_gpu.group_multi_gpu(None, items, gpus=gpus)
    return [(i.nodeid.split("::")[1], i.groups) for i in items]


def test_groupings_put_multi_gpu_tests_first(monkeypatch):
    """Every grouping hands the multi_gpu tests out first and keeps the rest in order: by
    default bins (BINS_PER_GPU per GPU, here more than the tests: one each), "function" one
    xdist group per test function, "one" a single group, "spread" none; one GPU moves
    nothing; an unknown grouping is refused by name."""
    g = "multi_gpu-t-"
    b = "multi_gpu-bin"
    assert _grouped(monkeypatch, None) == [("tp[1]", [b + "0"]), ("tq[1]", [b + "1"]),
                                           ("tp[2]", [b + "2"]), ("a", []), ("b", [])]
    assert _grouped(monkeypatch, "function") == [("tp[1]", [g + "tp"]), ("tq[1]", [g + "tq"]),
                                                 ("tp[2]", [g + "tp"]), ("a", []), ("b", [])]
    assert _grouped(monkeypatch, "one") == [("tp[1]", ["multi_gpu"]), ("tq[1]", ["multi_gpu"]),
                                            ("tp[2]", ["multi_gpu"]), ("a", []), ("b", [])]
    assert _grouped(monkeypatch, "spread") == [("tp[1]", []), ("tq[1]", []), ("tp[2]", []),
                                               ("a", []), ("b", [])]
    assert [n for n, _ in _grouped(monkeypatch, None, gpus=1)] == ["a", "tp[1]", "b", "tq[1]",
                                                                   "tp[2]"]
    with pytest.raises(pytest.UsageError, match="'spreads'.*bins, function, one, spread"):
        _grouped(monkeypatch, "spreads")


def test_bins_balance_measured_seconds():
    """Bins are balanced longest-processing-time: longest first, each test into the bin with
    the fewest seconds so far; a test without a measurement counts UNKNOWN_S; never more
    bins than tests. The control: one bin takes them all."""
    items = [_Item(n, True) for n in ("a", "b", "c", "d", "e", "new")]
    seconds = {"tests/t.py::a": 30.0, "tests/t.py::b": 25.0, "tests/t.py::c": 15.0,
               "tests/t.py::d": 10.0, "tests/t.py::e": 50.0}
    got = {k.split("::")[1]: v.removeprefix("multi_gpu-") for k, v in
           xdist_gpu.bins(items, seconds, 3).items()}
    # e 50 -> bin0, new 45 -> bin1, a 30 -> bin2, b 25 -> bin2 (55), c 15 -> bin1 (60),
    # d 10 -> bin0 (60).
    assert got == {"e": "bin0", "new": "bin1", "a": "bin2", "b": "bin2", "c": "bin1",
                   "d": "bin0"}, got
    assert len(set(xdist_gpu.bins(items, seconds, 10).values())) == len(items)
    assert set(xdist_gpu.bins(items, seconds, 1).values()) == {"multi_gpu-bin0"}
