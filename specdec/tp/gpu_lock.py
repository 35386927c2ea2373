"""One tensor-parallel engine at a time per GPU, across processes (opt-in).

With SPECDEC_TP_GPU_LOCKS=<dir> (the pytest plugin sets it on a multi-GPU host, so zoo
subprocesses inherit it), rank 0 takes an exclusive flock on <dir>/gpu<i>.lock for each GPU
of its group while an engine uses the group, in ascending order (no two holders can wait on
each other). Another TP engine on any of those GPUs waits; single-GPU work never does. NCCL
kernels spin while they wait for their peers, so two groups time-slicing the same GPUs
against a crowd of other contexts slow each other without bound; one at a time they don't.
A group's start (its worker processes, their communicators and one probe all-reduce) comes
before the locks: seconds of process start-up that no other engine waits through. A lock
dies with its process: no stale locks after a crash."""
from __future__ import annotations

import fcntl
import json
import os
import time

ENV = "SPECDEC_TP_GPU_LOCKS"
HOLDS_ENV = "SPECDEC_TP_GPU_LOCK_HOLDS"  # a file: one JSON line per hold (the gate profiler)


class GPULocks:
    def __init__(self, gpus: list[int]) -> None:
        self.dir = os.environ.get(ENV) or None
        self.gpus = sorted(set(gpus))
        self.files: list = []
        self.since = 0.0  # time.time() the locks were taken

    def acquire(self, timeout: float) -> None:
        """Take every GPU's lock, waiting up to `timeout` s in all; a no-op without ENV."""
        if self.dir is None or self.files:
            return
        os.makedirs(self.dir, exist_ok=True)
        deadline = time.monotonic() + timeout
        try:
            for gpu in self.gpus:
                f = open(os.path.join(self.dir, f"gpu{gpu}.lock"), "a+")
                self.files.append(f)
                while True:
                    try:
                        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            f.seek(0)
                            holder = f.read().strip() or "?"
                            raise TimeoutError(
                                f"GPU {gpu} is held by another tensor-parallel engine (pid "
                                f"{holder}) for over {timeout:.0f} s ({ENV}={self.dir})") from None
                        time.sleep(0.1)
                f.seek(0)
                f.truncate()
                f.write(str(os.getpid()))
                f.flush()
            self.since = time.time()
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        held = bool(self.files) and self.since > 0
        for f in reversed(self.files):
            f.close()  # closing the file drops its flock
        self.files = []
        if held and os.environ.get(HOLDS_ENV):
            _record_hold(os.environ[HOLDS_ENV], self.gpus, self.since, time.time())
        self.since = 0.0


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
