"""A process that built a tensor-parallel engine exits within seconds, however it ends
(specdec/tp/group.py): each ending runs in a subprocess of its own, timed from the outside.
Every bound is measured from the event it bounds, on the monotonic clock the script prints
(system-wide, so the test and the script share it): an exit from the moment the script's
work is done, a worker's failure named from the moment the worker ended (the signal sent to
it, or its own last line). Starting Python, importing torch and building the engines (which
waits for the GPU locks and the group's rendezvous) are bounded only against a hang
(STARTUP_BOUND_S, BUILD_BOUND_S): under load they take what they take.

CPU: gloo, two processes. CUDA (marked multi_gpu, skipped with fewer than 2 GPUs): the same
endings over NCCL. A worker that crashes or hangs is done to it from here (SIGKILL,
SIGSTOP), with no hook in the engine."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from harness.gate import fork_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STARTUP_BOUND_S = 120.0  # process start to "building": imports only, a hang guard
BUILD_BOUND_S = 120.0    # "building" to the engines running: builds, locks, rendezvous; a hang guard
EXIT_BOUND_S = 30.0      # from the script's work done (or the signal) to the process's exit
NAMED_BOUND_S = 10.0     # from a worker's end to rank 0 naming it
HANG_S = 3            # heartbeat silence after which rank 0 calls a worker hung (this test)
END_WAIT_S = 3        # a bounded teardown step (this test; default 10)

DEVICES = [pytest.param("cpu", id="gloo"),
           pytest.param("cuda", id="nccl", marks=[pytest.mark.multi_gpu, pytest.mark.skipif(
               torch.cuda.device_count() < 2, reason="NCCL endings need 2 GPUs")])]

PRELUDE = """
import faulthandler, os, sys, time
faulthandler.dump_traceback_later(110)  # before STARTUP_BOUND_S: a hang prints its stacks
from specdec import Engine, SpecConfig, faults
from specdec.tp.group import TPWorkerError
from specdec.tp.replicate import TPDivergence

DEVICE = sys.argv[1]

def build(**kw):
    return Engine(spec=SpecConfig(topk=1, num_steps=3, num_draft_tokens=4), max_batch=4,
                  max_context=64, tp_size=2,
                  device=DEVICE, **kw)

def worker_pid(engine):
    return os.getpid()

def say(*words):
    print(*words, flush=True)

def building():
    faulthandler.dump_traceback_later(110)  # before BUILD_BOUND_S: a hang prints its stacks
    say("building", time.monotonic())

def done():
    faulthandler.dump_traceback_later(25)  # before EXIT_BOUND_S: a hang prints its stacks
    say("done", time.monotonic())
"""

# Each ending: the script's main() body. Prints are read by the test as they come.
ENDINGS = {
    # One process, four endings of an engine on the same workers: dropped without close()
    # (garbage), a context manager, close(), and one left open at interpreter exit (the
    # atexit teardown). The process must then exit. The last two captured graphs, which
    # hold NCCL collectives: they must go before the communicators (specdec/tp/captured.py).
    "dropped_with_close_open_at_exit": """
    dropped = build()
    dropped.generate([[1, 2, 3]], max_new_tokens=4)
    del dropped
    with build() as again:
        again.generate([[1, 2, 3]], max_new_tokens=4)
    closed = build(cuda_graph=True, cuda_graph_bs=[1, 2])
    closed.generate([[1, 2, 3]], max_new_tokens=4)
    closed.close()
    left_open = build(cuda_graph=True, cuda_graph_bs=[1, 2])
    say("tokens", left_open.generate([[1, 2, 3]], max_new_tokens=4))
    """,
    # A fault makes the ranks diverge (one pads and replays, the other runs eager).
    "ranks_diverge": """
    with faults.active("tp_rank_divergent_padding"):
        eng = build(cuda_graph=True, cuda_graph_bs=[2, 4])
        try:
            eng.generate([[1, 2, 3], [4, 5], [6]], max_new_tokens=6)
        except TPDivergence as exc:
            say("diverged", str(exc).splitlines()[0])
    """,
    # The test kills (SIGKILL) or stops (SIGSTOP) the worker while rank 0 generates.
    "worker_signalled": """
    eng = build()
    say("worker", eng.tp_each(worker_pid)[1])
    faulthandler.dump_traceback_later(25)  # before EXIT_BOUND_S from the signal: the stacks
    try:
        while True:
            eng.generate([[1, 2, 3], [4, 5]], max_new_tokens=8)
    except TPWorkerError as exc:
        say("named", time.monotonic(), ":", repr(str(exc)))
    """,
    # The test stops (SIGSTOP) the worker, then lets the script end: the exit handshake
    # cannot finish, so the teardown must time out, kill and abort.
    "worker_stopped_at_exit": """
    eng = build()
    eng.generate([[1, 2, 3]], max_new_tokens=4)
    say("worker", eng.tp_each(worker_pid)[1])
    sys.stdin.readline()
    """,
}


def _script(tmp_path, body: str, guarded: bool = True) -> str:
    path = tmp_path / "tp_script.py"
    # The build's clock starts at "building", the exit's at "done" (the body's work ended).
    body = "building()\n" + textwrap.dedent(body) + "done()\n"
    if guarded:
        main = "def main():\n" + textwrap.indent(body, "    ")
        path.write_text(PRELUDE + "\n" + main + "\nif __name__ == '__main__':\n    main()\n")
    else:  # what a new user writes: no main guard
        path.write_text(PRELUDE + "\n" + body)
    return str(path)


class Script:
    """The script's process and its stdout as read so far, line by line."""

    def __init__(self, script: str, device: str) -> None:
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               "SPECDEC_TP_HANG_S": str(HANG_S), "SPECDEC_TP_END_WAIT": str(END_WAIT_S),
               "PYTHONUNBUFFERED": "1",
               # One intra-op thread per rank, as the plugin gives each xdist worker: under
               # `pytest -n auto` on a 16-core GPU host, ranks with a thread per core each
               # were starved past the bounds (a host-load effect, not a teardown one).
               "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, script, device], cwd=ROOT, env=env,
                                     text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines: list[str] = []

    def _readline(self, since: float, bound: float) -> str | None:
        """The next stdout line ("" at its end), or None once `bound` s since `since` have
        passed (a script that hangs before printing must fail the test, not hold it)."""
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        while reader.is_alive() and time.monotonic() - since < bound:
            reader.join(min(0.5, max(0.0, bound - (time.monotonic() - since))))
            fork_server.end_if_red(self.proc)  # a red gate: the script killed, a skip
        if box and box[0]:
            self.lines.append(box[0])
        return box[0] if box else None

    def wait_for(self, word: str, since: float, bound: float, what: str) -> list[str]:
        """The words of the first line starting with `word`, within `bound` s of `since`."""
        while True:
            line = self._readline(since, bound)
            if line is None or line == "":
                self.proc.kill()
                out, err = self.proc.communicate()
                late = "" if line == "" else f" within {bound} s of {what}"
                pytest.fail(f"no {word!r} line from the script{late}:\n"
                            f"{''.join(self.lines)[-2000:]}{out[-2000:]}\n{err[-6000:]}")
            if line.startswith(word):
                return line.split()

    def building(self) -> float:
        """When the script started building its engine (its monotonic clock). Start-up
        before it is bounded by STARTUP_BOUND_S alone."""
        return float(self.wait_for("building", time.monotonic(), STARTUP_BOUND_S,
                                   "process start")[1])

    def finish(self, since: float, what: str,
               bound: float = EXIT_BOUND_S) -> tuple[str, str, float]:
        """Wait for the exit within `bound` s of `since` (else kill it and fail): the whole
        stdout, stderr, and the monotonic time of the exit."""
        try:
            out, err = fork_server.communicate(
                self.proc, max(1.0, bound - (time.monotonic() - since)),
                f"the script's exit after {what}")
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            pytest.fail(f"still running {bound} s after {what}:\n"
                        f"{''.join(self.lines)[-2000:]}{out[-2000:]}\n{err[-12000:]}")
        return "".join(self.lines) + out, err, time.monotonic()


def _no_worker_left(pid: int) -> None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"worker pid {pid} outlived rank 0")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ending", ["dropped_with_close_open_at_exit", "ranks_diverge"])
def test_exits(tmp_path, device, ending):
    script = Script(_script(tmp_path, ENDINGS[ending]), device)
    t0 = script.building()
    finished = float(script.wait_for("done", t0, BUILD_BOUND_S, "building")[1])
    out, err, exited = script.finish(finished, "main() ended")
    print(f"{ending} ({device}): exited {exited - finished:.1f} s after main() ended, "
          f"{exited - t0:.1f} s after building")
    assert "Traceback" not in err and "terminate called" not in err, err[-3000:]
    want = "diverged" if ending == "ranks_diverge" else "tokens"
    assert want in out, f"stdout: {out[-2000:]}\nstderr: {err[-3000:]}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sig,named", [
    (signal.SIGKILL, r"tp rank 1 \(pid {pid}\) was killed by signal 9 \(SIGKILL\)"),
    (signal.SIGSTOP, r"tp rank 1 \(pid {pid}\) stopped responding: no heartbeat for [\d.]+ s"),
], ids=["killed", "hung"])
def test_worker_killed_or_hung_mid_run(tmp_path, device, sig, named):
    """Rank 0 is told which rank ended and how, within seconds of the signal, not a
    transport error."""
    import re
    script = Script(_script(tmp_path, ENDINGS["worker_signalled"]), device)
    pid = int(script.wait_for("worker", script.building(), BUILD_BOUND_S, "building")[1])
    time.sleep(0.5)  # mid-run: generate() loops
    os.kill(pid, sig)
    signalled = time.monotonic()
    out, err, exited = script.finish(signalled, "the signal")
    _no_worker_left(pid)
    said = [line for line in out.splitlines() if line.startswith("named ")]
    assert said, f"stdout: {out[-2000:]}\nstderr: {err[-3000:]}"
    said = said[0]
    after = float(said.split()[1]) - signalled
    print(f"{sig.name} ({device}): named {after:.1f} s after the signal, exited "
          f"{exited - signalled:.1f} s after it; {out.strip()[-300:]}")
    assert re.search(named.format(pid=pid), said), out
    assert "Connection reset" not in said
    assert after < NAMED_BOUND_S, out


@pytest.mark.parametrize("device", DEVICES)
def test_missing_main_guard_named(tmp_path, device):
    """The spawned worker re-imports an unguarded script and dies in multiprocessing's
    bootstrapping check: rank 0 names that, and the fix, within seconds of the worker's
    end. The worker's clock is its own "building" line (it shares our stdout): the line it
    prints just before its Engine() fails."""
    script = Script(_script(tmp_path, "eng = build()\n", guarded=False), device)
    t0 = script.building()  # rank 0's; the worker, re-importing the script, says it later
    out, err, exited = script.finish(t0, "building", BUILD_BOUND_S)  # a hang guard
    stamps = [float(line.split()[1]) for line in out.splitlines() if line.startswith("building")]
    assert len(stamps) == 2, f"want rank 0's and the worker's 'building' lines: {out[-2000:]}"
    named = exited - stamps[1]
    print(f"missing guard ({device}): named and exited {named:.1f} s after the worker's "
          f"Engine(), {exited - t0:.1f} s after rank 0's")
    assert script.proc.returncode != 0
    assert "TPWorkerError: tp rank 1" in err and "before joining the group" in err, err[-3000:]
    assert 'if __name__ == "__main__":' in err, err[-3000:]
    assert "DistStoreError" not in err and "Timed out" not in err
    assert named < NAMED_BOUND_S, f"named {named:.1f} s after the worker's Engine()"


@pytest.mark.parametrize("device", DEVICES)
def test_worker_stopped_at_exit(tmp_path, device):
    """A worker stopped just before the script ends: rank 0's exit handshake cannot finish;
    the teardown gives up after its bound, kills the worker, aborts the groups and exits."""
    ending = ENDINGS["worker_stopped_at_exit"]
    script = Script(_script(tmp_path, ending), device)
    pid = int(script.wait_for("worker", script.building(), BUILD_BOUND_S, "building")[1])
    os.kill(pid, signal.SIGSTOP)
    script.proc.stdin.write("go\n")
    script.proc.stdin.flush()
    left = float(script.wait_for("done", time.monotonic(), EXIT_BOUND_S, "go")[1])
    out, err, exited = script.finish(left, "main() ended")
    _no_worker_left(pid)
    after = exited - left
    print(f"worker stopped at exit ({device}): exited {after:.1f} s after main() ended")
    assert "Traceback" not in err, err[-3000:]
    assert after < END_WAIT_S + NAMED_BOUND_S, f"{after:.1f} s"
