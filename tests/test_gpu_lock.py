"""The GPU locks of tensor-parallel engines (specdec/tp/gpu_lock.py): one holder per GPU
across processes, served earliest deadline first, with no stale waiter blocking the queue;
the deadlines the gate gives them (harness/gate/xdist_gpu.py, harness/runners/zoo.py);
and an engine that takes them at its first command on the GPUs, not while it builds.

flock conflicts between two open files of one process too, so threads of one process show
the order; each waiter's deadline is given to it (GPULocks(deadline_s=...))."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time

import pytest

from specdec.tp import gpu_lock
from specdec.tp.gpu_lock import DEADLINE_ENV, ENV, HOLDS_ENV, QUEUE, GPULocks


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    monkeypatch.delenv(HOLDS_ENV, raising=False)  # not a profiled gate's engine holds
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    return tmp_path


def test_gpu_locks_one_engine_per_gpu(lock_dir, monkeypatch):
    """A second holder of an overlapping GPU set waits, then times out naming the holder;
    disjoint sets do not wait; release frees them; without ENV, or without GPUs, a no-op."""
    first = GPULocks([1, 0])
    first.acquire(1.0)
    with pytest.raises(TimeoutError, match=rf"GPU 1 is held by another tensor-parallel engine "
                                           rf"\(pid {os.getpid()}\)"):
        GPULocks([1, 2]).acquire(0.3)
    other = GPULocks([2, 3])
    other.acquire(0.3)
    first.release()
    again = GPULocks([0, 1])
    again.acquire(0.3)
    again.release(), other.release()
    assert os.listdir(lock_dir / QUEUE) == []  # every waiter's file gone, timed out or not
    GPULocks([]).acquire(0.0)  # a CPU group: nothing to take
    monkeypatch.delenv(ENV)
    unset = GPULocks([0, 1])
    unset.acquire(0.0)
    assert unset.files == []


def _queue_behind(holder_gpus, waiters, lock_dir) -> list[str]:
    """`waiters` (name, gpus, deadline) ask in the order given while a holder has
    `holder_gpus`; each is queued before the next asks. The holder lets go once all are
    queued and those wanting other GPUs have theirs: the order they got the locks in."""
    holder = GPULocks(holder_gpus)
    holder.acquire(1.0)
    got, threads = [], []

    def wait(name, gpus, deadline):
        locks = GPULocks(gpus, deadline_s=deadline)
        locks.acquire(10.0)
        got.append(name)
        time.sleep(0.05)
        locks.release()

    for k, (name, gpus, deadline) in enumerate(waiters):
        threads.append(threading.Thread(target=wait, args=(name, gpus, deadline)))
        threads[-1].start()
        until = time.monotonic() + 5
        while len(os.listdir(lock_dir / QUEUE)) + len(got) < k + 1:
            assert time.monotonic() < until, f"{name} never queued"
            time.sleep(0.01)
    free = {name for name, gpus, _ in waiters if not set(gpus) & set(holder_gpus)}
    until = time.monotonic() + 5
    while not free <= set(got):  # those wanting other GPUs than the holder's get them now
        assert time.monotonic() < until, f"{free - set(got)} waited on the holder's GPUs"
        time.sleep(0.01)
    time.sleep(0.3)  # several polls: nobody takes a GPU the holder has
    before = list(got)
    assert set(before) == free, before
    holder.release()
    for t in threads:
        t.join(15)
    return before + [g for g in got if g not in before]


def test_waiters_are_served_earliest_deadline_first(lock_dir):
    """Asked in the order late, none, early: served early, late, none (no deadline goes
    after every deadline). A waiter for other GPUs does not queue behind them at all."""
    now = time.time()
    order = _queue_behind([0, 1], [("late", [0, 1], now + 200), ("none", [1], math.inf),
                                   ("early", [0, 1], now + 100), ("other", [2], now + 300)],
                          lock_dir)
    assert order == ["other", "early", "late", "none"], order


def test_without_deadlines_the_order_asked_control(lock_dir):
    """The control: the same waiters without deadlines are served in the order they asked,
    so the order above is the deadlines' doing."""
    order = _queue_behind([0, 1], [("late", [0, 1], math.inf), ("none", [1], math.inf),
                                   ("early", [0, 1], math.inf)], lock_dir)
    assert order == ["late", "none", "early"], order


def test_a_gone_waiter_does_not_block_the_queue(lock_dir):
    """A waiter's file left by a process that ended, or not refreshed for STALE_S (a stopped
    process, a zombie), is passed over and removed; a live, fresh one with an earlier deadline
    is waited for, and the time-out names it."""
    queue = lock_dir / QUEUE
    queue.mkdir()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    gone = queue / f"1.0_1.0_{int(ended.stdout)}_0.1"
    gone.touch()
    stale = queue / f"2.0_2.0_{os.getppid()}_0.1"
    stale.touch()
    old = time.time() - gpu_lock.STALE_S - 1
    os.utime(stale, (old, old))
    locks = GPULocks([0, 1], deadline_s=10.0)
    locks.acquire(1.0)
    locks.release()
    assert not gone.exists() and not stale.exists()
    live = queue / f"3.0_3.0_{os.getppid()}_1"
    live.touch()
    with pytest.raises(TimeoutError, match=rf"pid {os.getppid()}\) with an earlier deadline"):
        GPULocks([0, 1], deadline_s=10.0).acquire(0.5)
    assert locks.files == []


def test_bad_deadline_is_named(lock_dir, monkeypatch):
    monkeypatch.setenv(DEADLINE_ENV, "soon")
    with pytest.raises(ValueError, match=rf"{DEADLINE_ENV}='soon': expected epoch seconds"):
        GPULocks([0]).acquire(1.0)
    assert gpu_lock.deadline({}) == math.inf
    assert gpu_lock.deadline({DEADLINE_ENV: "12.5"}) == 12.5


def test_the_gate_gives_tests_and_zoo_runs_deadlines(lock_dir, monkeypatch):
    """Under pytest on a host with GPU locks, a test's deadline is its start plus the gate's
    bound on one test, restored after it; a zoo fault's process gets DETECTION_S from its
    start unless its caller's is sooner. Without GPU locks neither is set."""
    from harness.gate.xdist_gpu import TEST_BUDGET_S, test_deadline
    from harness.runners.zoo import DETECTION_S, detection_env
    t0 = time.time()
    with test_deadline():
        inner = gpu_lock.deadline()
        zoo = gpu_lock.deadline(detection_env(None))
    assert t0 + TEST_BUDGET_S <= inner <= time.time() + TEST_BUDGET_S
    assert t0 + DETECTION_S <= zoo <= time.time() + DETECTION_S
    assert DEADLINE_ENV not in os.environ
    sooner = detection_env({ENV: str(lock_dir), DEADLINE_ENV: repr(t0 + 1)})
    assert gpu_lock.deadline(sooner) == t0 + 1
    monkeypatch.delenv(ENV)
    with test_deadline():
        assert DEADLINE_ENV not in os.environ
    assert DEADLINE_ENV not in detection_env(None)


def test_an_engine_takes_the_locks_at_its_first_command(lock_dir):
    """A tensor-parallel engine holds no GPU while it builds (gloo here: its GPUs are named
    for the test), holds them from its first command that runs on the ranks, and frees them
    when closed. The probe seeing the held locks is the control of the first assertion."""
    from specdec import Engine
    from specdec.tp.group import TPGroup
    with Engine(max_batch=2, max_context=64, tp_size=2) as eng:
        group = eng.tp_group
        group.locks = GPULocks([0, 1])  # the GPUs a CUDA group names (group.py, _spawn)
        probe = GPULocks([0])
        probe.acquire(0.2)  # built, yet nothing held
        probe.release()
        eng.generate([[1, 2, 3]], max_new_tokens=2)
        with pytest.raises(TimeoutError, match=rf"pid {os.getpid()}"):
            GPULocks([0]).acquire(0.3)
        assert group.locks.files
    assert not group.locks.files
    probe.acquire(0.2)
    probe.release()
    assert TPGroup._current is None or not TPGroup._current.in_use
