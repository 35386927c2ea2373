"""One tensor-parallel engine at a time per GPU, across processes (opt-in), earliest deadline
first.

With SPECDEC_TP_GPU_LOCKS=<dir> (the pytest plugin sets it on a multi-GPU host, so zoo
subprocesses inherit it), rank 0 takes an exclusive flock on <dir>/gpu<i>.lock for each GPU
of its group while an engine runs work on the group, in ascending order (no two holders can
wait on each other). Another TP engine on any of those GPUs waits; single-GPU work never
does. NCCL kernels spin while they wait for their peers, so two groups time-slicing the same
GPUs against a crowd of other contexts slow each other without bound; one at a time they
don't. The group's start (worker processes, communicators, one probe all-reduce) and the
engine's build come before the locks: the locks are taken at the group's first command that
runs on the GPUs (specdec/tp/replicate.py), and no other engine waits through seconds of
process start-up and model building.

Who goes next. Waiters queue in <dir>/queue, a file each, and the one with the earliest
deadline (SPECDEC_TP_GPU_LOCK_DEADLINE, epoch seconds; none: after every deadline, in the
order asked) among those wanting an overlapping GPU takes the locks when they are free.
Under pytest the deadline is the test's start plus the gate's bound on one test, and a zoo
fault's detection run gets its own, shorter one (docs/contract.md, Tiers): a test that
started earlier, or must finish sooner, goes first. Polling the locks at random instead (as
before) let tests that take the locks once per example starve a one-shot run: on 2 H100s
a zoo fault's test took 62 s, most of it waiting for a hold of seconds
(bench/results/zoo-in-gate-h100x2-2026-11-26-b653b48.md). A waiter refreshes its file as it polls; a file not refreshed for STALE_S, or
of a process that has ended, is ignored (a crash leaves no stale queue), and a lock dies with
its process (no stale locks)."""
from __future__ import annotations

import fcntl
import json
import math
import os
import sys
import time

ENV = "SPECDEC_TP_GPU_LOCKS"
HOLDS_ENV = "SPECDEC_TP_GPU_LOCK_HOLDS"  # a file: one JSON line per hold (the gate profiler)
DEADLINE_ENV = "SPECDEC_TP_GPU_LOCK_DEADLINE"  # epoch seconds: when the asker should be done
QUEUE = "queue"
POLL_S = 0.1
STALE_S = 10.0  # a waiter's file older than this: the waiter is gone (stopped, a zombie)


WAIT_NOTE_S = 20.0  # a wait longer than this says what it waits for, then again as long
# Where those lines go (the pytest gate points it at the terminal: harness/gate/red_gate.py),
# and a check a long wait calls each poll (it may raise to end the wait); set by the caller.
check_stop = None


def say_waiting(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def deadline(environ=None) -> float:
    """The deadline (DEADLINE_ENV) of this process (or of the environment given), infinity
    without one."""
    raw = (os.environ if environ is None else environ).get(DEADLINE_ENV, "")
    if not raw:
        return math.inf
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise ValueError(f"{DEADLINE_ENV}={raw!r}: expected epoch seconds (a number)")
    return value


def _entry_name(key: tuple, gpus: list[int]) -> str:
    return "_".join([repr(key[0]), repr(key[1]), str(key[2]), ".".join(map(str, gpus))])


def _parse(name: str) -> tuple[tuple, set[int]] | None:
    try:
        d, asked, pid, gpus = name.split("_")
        return (float(d), float(asked), int(pid)), {int(g) for g in gpus.split(".")}
    except ValueError:  # a file of another kind: not a waiter
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class GPULocks:
    def __init__(self, gpus: list[int], deadline_s: float | None = None) -> None:
        self.dir = os.environ.get(ENV) or None
        self.gpus = sorted(set(gpus))
        self.deadline = deadline_s  # None: DEADLINE_ENV's when acquiring
        self.files: list = []
        self.since = 0.0  # time.time() the locks were taken

    def acquire(self, timeout: float) -> None:
        """Take every GPU's lock, waiting (in turn, earliest deadline first) up to `timeout` s
        in all; a no-op without ENV, without GPUs (a CPU group) or while held."""
        if self.dir is None or self.files or not self.gpus:
            return
        queue = os.path.join(self.dir, QUEUE)
        os.makedirs(queue, exist_ok=True)
        key = (deadline() if self.deadline is None else self.deadline, time.time(), os.getpid())
        mine = os.path.join(queue, _entry_name(key, self.gpus))
        open(mine, "w").close()
        start = time.monotonic()
        end, note = start + timeout, start + WAIT_NOTE_S
        try:
            while True:
                ahead = None if self.files else self._ahead(queue, key)
                if ahead is None and self._take_free():
                    break
                now = time.monotonic()
                if now > end:
                    raise TimeoutError(self._why_waiting(ahead, timeout)) from None
                if now > note:  # a long wait says what it waits for
                    note += WAIT_NOTE_S
                    say_waiting(f"pid {os.getpid()} still waiting after {now - start:.0f} s: "
                                + self._why_waiting(ahead, now - start))
                if check_stop is not None:
                    check_stop()  # the caller's way out (a red gate ends the test)
                time.sleep(POLL_S)
                _refresh(mine)
            self.since = time.time()
        except BaseException:
            self.release()
            raise
        finally:
            _unlink(mine)

    def _ahead(self, queue: str, key: tuple) -> int | None:
        """The pid of a live waiter before this one (earlier deadline, or as early and asked
        sooner) wanting a GPU of ours; None: our turn. Once a GPU is taken the rest are taken
        regardless (a waiter that came since waits on that GPU, not we on it)."""
        now = time.time()
        want = set(self.gpus)
        first = None
        for e in os.scandir(queue):
            parsed = _parse(e.name)
            if parsed is None or parsed[0] >= key or not parsed[1] & want:
                continue
            try:
                fresh = now - e.stat().st_mtime < STALE_S
            except FileNotFoundError:  # it took its locks meanwhile
                continue
            if not fresh or not pid_alive(parsed[0][2]):
                _unlink(e.path)
                continue
            if first is None or parsed[0] < first:
                first = parsed[0]
        return None if first is None else first[2]

    def _take_free(self) -> bool:
        """Take the GPUs' locks in ascending order, keeping those taken; whether all are."""
        for gpu in self.gpus[len(self.files):]:
            f = open(os.path.join(self.dir, f"gpu{gpu}.lock"), "a+")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                return False
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            self.files.append(f)
        return True

    def _why_waiting(self, ahead: int | None, timeout: float) -> str:
        if ahead is not None:
            return (f"GPUs {self.gpus}: another tensor-parallel engine (pid {ahead}) with an "
                    f"earlier deadline was still waiting for them after {timeout:.0f} s "
                    f"({ENV}={self.dir})")
        gpu = self.gpus[len(self.files)]
        try:
            holder = open(os.path.join(self.dir, f"gpu{gpu}.lock")).read().strip() or "?"
        except OSError:
            holder = "?"
        return (f"GPU {gpu} is held by another tensor-parallel engine (pid {holder}) for over "
                f"{timeout:.0f} s ({ENV}={self.dir})")

    def release(self) -> None:
        held = bool(self.files) and self.since > 0
        for f in reversed(self.files):
            f.close()  # closing the file drops its flock
        self.files = []
        if held and os.environ.get(HOLDS_ENV):
            _record_hold(os.environ[HOLDS_ENV], self.gpus, self.since, time.time())
        self.since = 0.0


def _refresh(path: str) -> None:
    """Touch a waiter's file; recreate it if another waiter took it for stale."""
    try:
        os.utime(path)
    except FileNotFoundError:
        open(path, "w").close()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _record_hold(path: str, gpus: list[int], start: float, end: float) -> None:
    """One line per hold, appended in one write (whole lines from many processes)."""
    line = json.dumps({"pid": os.getpid(), "gpus": gpus, "start": start, "end": end}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:  # a profile that cannot be written does not fail the engine
        pass
