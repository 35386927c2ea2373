"""Rank 0 names how a worker ended (specdec/tp/workers.py) while its watchdog also watches.

What must hold: a worker killed by a signal is named "killed by signal N", whichever of rank 0's
threads asks first. Rank 0's watchdog polls the workers while the main thread, whose
collective failed, joins the dead one. If both reap the exit status at once, one of them
gets it, and the other can read no code and say "still running". That happened once in a
loaded CPU gate.

An engine test of the TP group's process supervision, as tests/test_tp_exit.py is (not a
harness law: `harness check` drives configurations of the engine, not its worker processes).
It is checked on real spawned processes and a real watchdog thread. The only
difference from the engine is the worker: it sleeps, so a trial costs a process start
without torch. This module imports nothing heavy at the top, because every worker imports
it to find its target.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time

TRIALS = 20            # every one named right
CONTROL_TRIALS = 300   # the negative control: stops at the first misnamed one (a trial ~10 ms)


def _sleeping_worker(rank, *, errors, heartbeat):
    time.sleep(600)


def _misnamed(workers_cls, trials: int, stop_at_first: bool) -> list[str]:
    """Per trial: a worker SIGKILLed under a watchdog-like thread that keeps polling, then
    the main thread's failure(). Returns the names that do not say the signal."""
    bad = []
    for _ in range(trials):
        workers = workers_cls(mp.get_context("spawn"), 2, _sleeping_worker, {})
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                workers.wait_any_end(0.25)

        watcher = threading.Thread(target=watch, daemon=True)
        try:
            watcher.start()
            os.kill(workers.procs[1].pid, signal.SIGKILL)
            workers.wait_any_end(5.0)
            said = str(workers.failure())
        finally:
            stop.set()
            watcher.join(5.0)
            workers.end(0)
        if "killed by signal 9 (SIGKILL)" not in said:
            bad.append(said)
            if stop_at_first:
                break
    return bad


def test_a_killed_worker_is_named_by_its_signal_under_a_watchdog():
    from specdec.tp.workers import Workers
    assert _misnamed(Workers, TRIALS, stop_at_first=False) == []


class _UnlockedWorkers:
    """Workers whose lock locks nothing: every thread reaps when it likes (the old code)."""

    def __new__(cls, *args):
        from specdec.tp.workers import Workers
        workers = Workers(*args)
        workers.lock = _NoLock()
        return workers


class _NoLock(contextlib.nullcontext):
    def acquire(self, *a, **k):
        return True

    def release(self):
        pass


def test_negative_control_reaping_from_two_threads_misnames_a_killed_worker():
    """Without the lock, the same trials name a killed worker wrongly: the law can fail."""
    bad = _misnamed(_UnlockedWorkers, CONTROL_TRIALS, stop_at_first=True)
    assert bad and "still running" in bad[0], bad
