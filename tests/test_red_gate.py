"""A red gate ends promptly (harness/gate/red_gate.py): under `pytest -n 2 -x`, once a test
fails, each worker stops after the test it is running, and a test that checks between its
examples (as the laws' Hypothesis tests do) ends as skipped. The control is the same run
without the red gate's hooks: xdist's workers run out every test already queued on them.
Shown on CPU with a real xdist run of a small test directory (the specdec plugin left out:
it would import torch in every process; the conftest registers the red gate's hooks alone)."""
from __future__ import annotations

import os
import sys
import time

from harness.gate.fork_server import run_bounded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFTEST = """
from harness.gate import red_gate

def pytest_configure(config):
    if {on}:
        config.pluginmanager.register(red_gate.Plugin(config), "specdec-red-gate")
"""

TESTS = """
import time
import pytest
from harness.base import stop

def test_a_fails():
    time.sleep(0.5)
    assert False, "the planted failure"

@pytest.mark.parametrize("i", range(8))
def test_slow(i):
    for _ in range(28):  # a law's examples, 0.25 s each
        stop.check()
        time.sleep(0.25)
"""


def _run(tmp_path, on: bool) -> tuple[float, str]:
    d = tmp_path / ("on" if on else "off")
    d.mkdir()
    (d / "conftest.py").write_text(CONFTEST.format(on=on))
    (d / "test_red.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("SPECDEC_GATE_STOP", None)
    t0 = time.monotonic()
    rc, out, err = run_bounded([sys.executable, "-m", "pytest", "-q", "-n", "2", "-x", "-p",
                                "no:cacheprovider", "-p", "no:specdec", str(d)], 120,
                               "the small red run", env, cwd=str(d))
    took = time.monotonic() - t0
    # xdist ends a run stopped by -x as interrupted (2); pytest alone as failed (1)
    assert rc in (1, 2), out[-3000:] + err[-3000:]
    assert "the planted failure" in out, out[-3000:]
    return took, out + err


def test_a_red_gate_ends_within_seconds(tmp_path):
    """With the red gate: the run ends about a second after the failure (a worker start is
    seconds on a loaded 2-core machine). Without it (control): each worker runs out the
    7 s test it is in, and those queued on it, first."""
    with_gate, out = _run(tmp_path, on=True)
    without, _ = _run(tmp_path, on=False)
    assert "the gate is red at" in out, out[-3000:]
    assert without - with_gate > 6.0, (with_gate, without)


def test_a_law_failure_reads_as_the_engine_breaking_the_law(tmp_path):
    """A negative control whose unbroken baseline fails its law is reported as the engine
    breaking that law, in the summary line, not as a control that failed to reject; the
    control: a failure that is no law's keeps its own message."""
    (tmp_path / "test_control.py").write_text(
        "from harness.base.failure import OracleFailure\n\n"
        "def test_overlap_law_rejects_a_planted_mistake():\n"
        "    raise OracleFailure('overlap_equals_sync', 'overlap_equals_sync', 'request 1: "
        "sync [1, 2] != overlap [1, 3]')\n\n"
        "def test_plain_assertion():\n"
        "    assert 1 == 2, 'not a law'\n")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "COLUMNS": "400"}  # summary lines whole
    env.pop("SPECDEC_GATE_STOP", None)  # this test's own run, even inside a red gate
    _, out, _ = run_bounded([sys.executable, "-m", "pytest", "-q", "-rf", "-p",
                             "no:cacheprovider", str(tmp_path)], 120, "the small run", env,
                            cwd=str(tmp_path))
    lines = [x for x in out.splitlines() if x.startswith("FAILED")]
    assert any("rejects_a_planted_mistake - the engine breaks law overlap_equals_sync: "
               "[overlap_equals_sync] request 1" in x for x in lines), out[-3000:]
    assert any("test_plain_assertion - AssertionError: not a law" in x for x in lines), lines


def test_a_waited_subprocess_ends_with_a_red_gate(tmp_path, monkeypatch):
    """A test waiting on a subprocess (run_bounded, as the zoo, TP-exit and nested-pytest
    tests do) kills it within a second of the gate going red and ends as skipped; the
    control: with the gate green the same wait runs the process to its end."""
    import pytest

    from harness.base import stop
    monkeypatch.setenv(stop.STOP_ENV, str(tmp_path / "stop"))
    sleeper = [sys.executable, "-c", "import time; time.sleep(3); print('slept')"]
    rc, out, _ = run_bounded(sleeper, 30, "the green sleeper")
    assert (rc, out.strip()) == (0, "slept")
    (tmp_path / "stop").write_text("tests/x.py::test_y failed (call)")
    t0 = time.monotonic()
    with pytest.raises(pytest.skip.Exception, match="the gate stopped: tests/x.py::test_y"):
        run_bounded(sleeper, 30, "the red sleeper")
    assert time.monotonic() - t0 < 2.5
