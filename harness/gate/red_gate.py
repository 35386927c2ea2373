"""A red gate ends promptly, and a test that waits says what it waits for.

Under `pytest -n auto -x` (any --maxfail) xdist's controller tells its workers to shut down
once the failures reach the limit, but a worker reads that order only after every test
already queued on it: the multi-GPU tests go out in bins of up to ~100 s (one xdist unit
each, xdist_gpu.py), so a red gate went on for over 100 s after its first failure, on one GPU
and on two. Now the controller also writes a stop file the moment the limit is reached
(STOP_ENV, made at configure and inherited by the workers); each worker then stops after the
test it is running (session.shouldstop, which xdist's worker loop reads after every test),
and the long waits inside a test read it too (harness/base/stop.py: a law's Hypothesis
examples, every serving loop's Progress.step, the lifecycle machine, a subprocess waited on
through fork_server (run_bounded, communicate: the zoo's, the TP-exit scripts', a nested
pytest's), a GPU lock, a tensor-parallel engine's next call) and end that test as skipped:
"the gate stopped: <the failure>". A test that passes through none of them still runs to its
end: on 2 H200s the gate ended 12.1 s after its first failure, the last tests out a kernel
test and a TP-liveness test (bench/results/red-gate-h200x2-2026-11-28-4deb834.*; 27.6 s on
2 H100s before the subprocesses and TP calls listened).

`say` writes to the process's real stderr (duplicated at configure, before pytest captures a
test's output): a wait that passes WAIT_NOTE_S says there, at once, what it is waiting for."""
from __future__ import annotations

import os
import sys
import time

import pytest

from harness.base.stop import STOP_ENV, reason

WAIT_NOTE_S = 20.0   # a wait longer than this says what it waits for, then every WAIT_NOTE_S
_stderr = None


def say(line: str) -> None:
    """One line on the real stderr (the terminal under xdist), not the test's captured one."""
    out = _stderr or sys.__stderr__
    try:
        out.write(f"[{os.environ.get('PYTEST_XDIST_WORKER', 'pytest')}] {line}\n")
        out.flush()
    except (OSError, ValueError):
        pass


class WaitNotes:
    """Inside a polling wait: `tick()` says what the wait is for once it has lasted
    WAIT_NOTE_S, and again every WAIT_NOTE_S."""

    def __init__(self, what: str) -> None:
        self.what, self.start, self.next = what, time.monotonic(), WAIT_NOTE_S

    def tick(self) -> None:
        waited = time.monotonic() - self.start
        if waited >= self.next:
            say(f"still waiting after {waited:.0f} s for {self.what}")
            self.next += WAIT_NOTE_S


class Plugin:
    """The red gate's hooks (pytest_plugin.py registers them; a test's conftest may too)."""

    def __init__(self, config) -> None:
        global _stderr
        self.config, self.failures = config, 0
        self.worker = hasattr(config, "workerinput")  # an xdist worker (not a subprocess's
        #                                               pytest that inherited its environment)
        try:
            _stderr = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
        except (OSError, ValueError, AttributeError):
            _stderr = None
        self.stop_file = None
        if (not self.worker and config.getoption("maxfail", 0)
                and getattr(config.option, "dist", "no") != "no"):  # alone, pytest stops itself
            import shutil
            import tempfile
            folder = tempfile.mkdtemp(prefix="specdec-gate-stop-")
            config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
            self.stop_file = os.environ[STOP_ENV] = os.path.join(folder, "stop")

    def pytest_runtest_logreport(self, report) -> None:
        """The controller, per report: at --maxfail failures, the stop file."""
        if self.stop_file is None or not report.failed:
            return
        self.failures += 1
        if self.failures >= self.config.getoption("maxfail") and not os.path.exists(
                self.stop_file):
            with open(self.stop_file + ".tmp", "w") as f:
                f.write(f"{report.nodeid} failed ({report.when})")
            os.replace(self.stop_file + ".tmp", self.stop_file)
            say(f"the gate is red at {time.time():.3f} (unix s): {report.nodeid} failed; "
                "every worker stops after its current test")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """A worker: once the gate is red, stop after this test (xdist's loop reads it)."""
        yield
        why = reason()
        if why and self.worker:
            item.session.shouldstop = f"the gate stopped: {why}"
