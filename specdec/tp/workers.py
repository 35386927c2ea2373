"""Rank 0's spawned workers, watched: how each one ended, and its last words.

Rank 0 holds each worker's process handle, a shared heartbeat it stamps (specdec/tp/
worker.py) and a tap on its stderr (forwarded to ours as it comes, the tail kept). From
these it names a failure within seconds, in place of a collective's transport error or the
store's time-out: a worker that exited (its code, or the signal that killed it), one that
stopped responding (no heartbeat for HANG_S: stopped, frozen; longer if it is still running,
silence_is_hang), and what it said last (its traceback from the error queue, else its
stderr)."""
from __future__ import annotations

import multiprocessing.connection
import os
import signal
import threading
import time
from multiprocessing import resource_tracker

HANG_S = float(os.environ.get("SPECDEC_TP_HANG_S", "10"))  # heartbeat silence = hung
# A silent worker whose process is running or in I/O (state R or D) is starved, not stopped:
# its heartbeat thread waits for the GIL while its main thread holds it (an import, a CUDA or
# NCCL init, a compile), which on a loaded host took over 3 s. It is called hung only after
# BUSY_FACTOR times HANG_S of silence (two live workers were killed as hung 3 s into their
# start in a loaded 2-GPU gate run).
BUSY_FACTOR = 10
TAIL_BYTES = 4000
GUARD_HINT = (
    "The spawned worker re-imported the main script, and the script builds the "
    "tensor-parallel Engine when imported (multiprocessing's 'bootstrapping phase' error). "
    "Fix: put the code that builds the Engine under `if __name__ == \"__main__\":` (workers "
    "are started with the 'spawn' method, which re-imports the main module).")


class TPWorkerError(RuntimeError):
    """A worker rank failed, exited or hung: which rank, how it ended, its last words."""


class _StderrTap:
    """A pipe the worker gets as its stderr: forwarded to rank 0's stderr, the tail kept."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.tail = bytearray()
        self.eof = threading.Event()

    def pump(self) -> None:
        while True:
            try:
                data = os.read(self.read_fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            try:
                os.write(2, data)
            except OSError:
                pass
            self.tail += data
            del self.tail[:-TAIL_BYTES]
        os.close(self.read_fd)
        self.eof.set()

    def text(self, wait_s: float) -> str:
        self.eof.wait(wait_s)  # a dead worker's pipe ends once its last writer has gone
        return bytes(self.tail).decode(errors="replace").strip()


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "?"
        return f"was killed by signal {-code} ({name})"
    return f"exited with code {code}"


def silence_is_hang(silent_s: float, state: str) -> bool:
    """Whether `silent_s` seconds without a heartbeat make a worker in process `state`
    (_proc_state) hung: HANG_S if it is stopped, sleeping or of unknown state, BUSY_FACTOR
    times that if it is running or in I/O (starved of the GIL, still making progress)."""
    busy = state == "R" or state.startswith("D ")
    return silent_s > HANG_S * (BUSY_FACTOR if busy else 1)


def _proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "unknown"
    return {"T": "T (stopped)", "t": "t (traced)", "D": "D (in uninterruptible I/O)",
            "Z": "Z (zombie)"}.get(state, state)


class Workers:
    """Ranks 1..world-1, spawned with `target(rank, *args, heartbeat)`."""

    def __init__(self, ctx, world: int, target, kwargs: dict, env: dict | None = None) -> None:
        """Worker r runs target(r, **kwargs, errors=, heartbeat=). env: variables the workers
        start with instead of this process's (set around each start only: a spawned child
        takes the environment as it is when it starts)."""
        self.errors = ctx.Queue()
        self.said: dict[int, str] = {}  # rank -> the traceback it put on the queue
        self.procs, self.taps, self.beats = {}, {}, {}
        # Exit codes are read (reaped: waitpid) under this lock only. Two threads reaping at
        # once (the watchdog's poll and a join) lose the status to one of them while the
        # other reads no code: a SIGKILLed worker was named "still running".
        self.lock, self.first = threading.RLock(), None
        resource_tracker.ensure_running()  # started now: it must not inherit a tap
        for rank in range(1, world):
            beat = ctx.Value("d", 0.0, lock=False)
            p = ctx.Process(target=target, args=(rank,),
                            kwargs={**kwargs, "errors": self.errors, "heartbeat": beat}, daemon=True,
                            name=f"specdec-tp{rank}")
            tap = _StderrTap()
            try:
                saved = os.dup(2)
            except OSError:  # no stderr to tap (a daemon): the worker starts without one
                saved = None
            before = {k: os.environ.get(k) for k in env or {}}
            try:  # the child inherits fd 2 as it is at start: point it at the tap meanwhile
                if saved is not None:
                    os.dup2(tap.write_fd, 2)
                os.environ.update(env or {})
                p.start()
            finally:
                for k, v in before.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                if saved is not None:
                    os.dup2(saved, 2)
                    os.close(saved)
                os.close(tap.write_fd)
            threading.Thread(target=tap.pump, daemon=True, name=f"specdec-tp{rank}-stderr").start()
            self.procs[rank], self.taps[rank], self.beats[rank] = p, tap, beat

    # -- what happened -----------------------------------------------------------------------
    def ended(self) -> list[int]:
        """Workers that exited, or are exiting: a closed sentinel comes before the exit code
        can be reaped, and a peer's closed socket may fail a collective in between."""
        with self.lock:
            return [r for r, p in self.procs.items()
                    if p.exitcode is not None or multiprocessing.connection.wait([p.sentinel], 0)]

    def hung(self) -> list[int]:
        now = time.monotonic()
        with self.lock:
            return [r for r, b in self.beats.items()
                    if b.value > 0 and now - b.value > HANG_S and self.procs[r].is_alive()
                    and silence_is_hang(now - b.value, _proc_state(self.procs[r].pid))]

    def wait_any_end(self, timeout: float) -> None:
        with self.lock:
            live = [p.sentinel for p in self.procs.values() if p.exitcode is None]
        if live:
            multiprocessing.connection.wait(live, timeout)

    def _words(self, rank: int, wait_s: float) -> str:
        deadline = time.monotonic() + wait_s
        while rank not in self.said:
            try:
                r, text = self.errors.get(timeout=max(0.0, deadline - time.monotonic()))
                self.said.setdefault(r, text)
            except Exception:  # noqa: BLE001  queue.Empty, or a queue broken by the death
                break
        return self.said.get(rank, "")

    def describe(self, rank: int, when: str = "", wait_s: float = 1.0) -> TPWorkerError:
        """The error naming `rank`, how it ended and its last words."""
        p = self.procs[rank]
        with self.lock:
            p.join(wait_s)  # reap it: its exit code
            code = p.exitcode
        how = f"tp rank {rank} (pid {p.pid}) {_how_it_ended(code)}{when}"
        killed = code is not None and code < 0  # by a signal: it put nothing
        words = self._words(rank, 0.0 if killed else wait_s)
        if words:  # its own traceback: "tp rank r: Type: message ..."
            return TPWorkerError(f"{words.rstrip()}\n[{how}]")
        tail = self.taps[rank].text(wait_s)
        msg = how + (f"; its last words (stderr):\n{tail[-2000:]}" if tail
                     else "; it said nothing on stderr")
        if "bootstrapping phase" in tail:
            msg += "\n" + GUARD_HINT
        return TPWorkerError(msg)

    def failure(self, when: str = "", wait_s: float = 1.0) -> TPWorkerError | None:
        """The first worker that ended, or hung (then killed here, so that collectives
        waiting on it fail at once), as an error; None if all are well. The first answer
        is kept: rank 0's watchdog and its main thread may both ask."""
        with self.lock:
            if self.first is None:
                self.first = self._failure(when, wait_s)
            return self.first

    def _failure(self, when: str, wait_s: float) -> TPWorkerError | None:
        ended = self.ended()
        if ended:
            return self.describe(ended[0], when, wait_s)
        hung = self.hung()
        if hung:
            r = hung[0]
            p = self.procs[r]
            silent = time.monotonic() - self.beats[r].value
            state = _proc_state(p.pid)
            p.kill()
            p.join(wait_s)
            return TPWorkerError(f"tp rank {r} (pid {p.pid}) stopped responding{when}: no "
                                 f"heartbeat for {silent:.1f} s (process state {state}); rank "
                                 "0 killed it (SIGKILL)")
        return None

    # -- waiting and ending ----------------------------------------------------------------
    def while_starting(self, fn, timeout: float):
        """fn() (rank 0 joining the groups) in a thread, while watching the workers: one
        that dies before joining is named at once, not after the store's time-out."""
        out: dict = {}

        def run() -> None:
            try:
                out["value"] = fn()
            except BaseException as exc:  # noqa: BLE001  re-raised on the caller's thread
                out["error"] = exc
        t = threading.Thread(target=run, daemon=True, name="specdec-tp-init")
        t.start()
        deadline = time.monotonic() + timeout
        while t.is_alive():
            self.wait_any_end(0.1)
            t.join(0.05)
            if not t.is_alive():
                break
            err = self.failure(" before joining the group")
            if err is None and time.monotonic() > deadline:
                err = TPWorkerError(f"the tp workers did not join rank 0 within {timeout:.0f} s "
                                    "(SPECDEC_TP_TIMEOUT)")
            if err is not None:
                self.end(0)  # the init thread stays blocked in the store; it holds nothing
                raise err
        if "error" in out:
            self.end(0)
            raise out["error"]
        return out.get("value")

    def end(self, wait_s: float) -> None:
        """Join each worker for up to `wait_s` (all together), then terminate, then kill;
        with wait_s 0 (a failed group), kill at once."""
        with self.lock:
            self._end(wait_s)

    def _end(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        for p in self.procs.values():
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs.values():
            if p.is_alive() and wait_s > 0:
                p.terminate()  # SIGTERM: also ends one blocked in a collective
                p.join(2.0)
            if p.is_alive():
                p.kill()  # SIGKILL: also ends a stopped process
                p.join(2.0)
