"""A process that built a tensor-parallel engine exits within seconds, however it ends
(specdec/tp/group.py): each ending runs in a subprocess of its own, timed from the outside.
Every bound is measured from the event it bounds: from the moment the script starts building
its first engine (it prints "building" with its monotonic clock, which is system-wide), not
from process start; starting Python and importing torch under a loaded host is bounded only
against a hang (STARTUP_BOUND_S).

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STARTUP_BOUND_S = 120.0  # process start to "building": imports only, a hang guard
EXIT_BOUND_S = 30.0   # from "building" to the process's exit
NAMED_BOUND_S = 10.0  # a worker's failure named on rank 0
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
    return Engine(spec=SpecConfig(1, 3, 4), max_batch=4, max_context=64, tp_size=2,
                  device=DEVICE, **kw)

def worker_pid(engine):
    return os.getpid()

def say(*words):
    print(*words, flush=True)

def building():
    faulthandler.dump_traceback_later(25)  # before EXIT_BOUND_S: a hang prints its stacks
    say("building", time.monotonic())
"""

# Each ending: the script's main() body. Prints are read by the test as they come.
ENDINGS = {
    # One process, four endings of an engine on the same workers: dropped without close()
    # (garbage), a context manager, close(), and one left open at interpreter exit (the
    # atexit teardown). The process must then exit. The last two captured graphs, which
    # hold NCCL collectives: they must go before the communicators (specdec/tp/captured.py).
    "dropped_with_close_open_at_exit": """
    dropped = build()
    dropped.generate([[1, 2, 3]], 4)
    del dropped
    with build() as again:
        again.generate([[1, 2, 3]], 4)
    closed = build(cuda_graph=True, cuda_graph_bs=[1, 2])
    closed.generate([[1, 2, 3]], 4)
    closed.close()
    left_open = build(cuda_graph=True, cuda_graph_bs=[1, 2])
    say("tokens", left_open.generate([[1, 2, 3]], 4))
    """,
    # A fault makes the ranks diverge (one pads and replays, the other runs eager).
    "ranks_diverge": """
    with faults.active("tp_rank_divergent_padding"):
        eng = build(cuda_graph=True, cuda_graph_bs=[2, 4])
        try:
            eng.generate([[1, 2, 3], [4, 5], [6]], 6)
        except TPDivergence as exc:
            say("diverged", str(exc).splitlines()[0])
    """,
    # The test kills (SIGKILL) or stops (SIGSTOP) the worker while rank 0 generates.
    "worker_signalled": """
    eng = build()
    say("worker", eng.tp_each(worker_pid)[1])
    t0 = time.monotonic()
    try:
        while True:
            eng.generate([[1, 2, 3], [4, 5]], 8)
            t0 = time.monotonic()
    except TPWorkerError as exc:
        say("named after", round(time.monotonic() - t0, 2), "s:", repr(str(exc)))
    """,
    # The test stops (SIGSTOP) the worker, then lets the script end: the exit handshake
    # cannot finish, so the teardown must time out, kill and abort.
    "worker_stopped_at_exit": """
    eng = build()
    eng.generate([[1, 2, 3]], 4)
    say("worker", eng.tp_each(worker_pid)[1])
    sys.stdin.readline()
    say("leaving", time.monotonic())
    """,
}


def _script(tmp_path, body: str, guarded: bool = True) -> str:
    path = tmp_path / "tp_script.py"
    body = "building()\n" + textwrap.dedent(body)  # the bounds' clock starts here
    if guarded:
        main = "def main():\n" + textwrap.indent(body, "    ")
        path.write_text(PRELUDE + "\n" + main + "\nif __name__ == '__main__':\n    main()\n")
    else:  # what a new user writes: no main guard
        path.write_text(PRELUDE + "\n" + body)
    return str(path)


def _start(script: str, device: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "SPECDEC_TP_HANG_S": str(HANG_S), "SPECDEC_TP_END_WAIT": str(END_WAIT_S),
           "PYTHONUNBUFFERED": "1",
           # One intra-op thread per rank, as the plugin gives each xdist worker: under
           # `pytest -n auto` on a 16-core GPU host, ranks with a thread per core each were
           # starved past the bounds (a host-load effect, not a teardown one).
           "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, script, device], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _readline(proc: subprocess.Popen, t0: float, bound: float = EXIT_BOUND_S) -> str | None:
    """The script's next stdout line, or None once `bound` seconds since t0 have passed (a
    script that hangs before printing must fail the test, not hold it)."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(max(0.0, bound - (time.monotonic() - t0)))
    return box[0] if box else None


def _building(proc: subprocess.Popen) -> float:
    """When the script started building its engine (its monotonic clock): the bounds' t0.
    Start-up before it is bounded by STARTUP_BOUND_S alone."""
    started = time.monotonic()
    line = _readline(proc, started, STARTUP_BOUND_S)
    if not line or not line.startswith("building"):
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the script did not start building within {STARTUP_BOUND_S} s: "
                    f"{line!r}\n{out[-2000:]}\n{err[-3000:]}")
    return float(line.split()[1])


def _worker_pid(proc: subprocess.Popen, t0: float) -> int:
    """The pid the script prints ("worker PID") once its engine runs."""
    line = ""
    while not line.startswith("worker"):
        line = _readline(proc, t0)
        if line is None:
            proc.kill()
            pytest.fail(f"no worker pid from the script within {EXIT_BOUND_S} s of building")
        if not line:
            _, err, _ = _finish(proc, t0)
            pytest.fail(f"no worker pid from the script:\n{err[-3000:]}")
    return int(line.split()[1])


def _finish(proc: subprocess.Popen, t0: float) -> tuple[str, str, float]:
    """Wait for the exit within EXIT_BOUND_S of t0 (else kill it and fail); output, seconds."""
    try:
        out, err = proc.communicate(timeout=max(1.0, EXIT_BOUND_S - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {EXIT_BOUND_S} s after building:\n{out[-2000:]}\n"
                    f"{err[-12000:]}")
    return out, err, time.monotonic() - t0


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
    proc = _start(_script(tmp_path, ENDINGS[ending]), device)
    out, err, took = _finish(proc, _building(proc))
    print(f"{ending} ({device}): exited in {took:.1f} s")
    assert "Traceback" not in err and "terminate called" not in err, err[-3000:]
    want = "diverged" if ending == "ranks_diverge" else "tokens"
    assert want in out, f"stdout: {out[-2000:]}\nstderr: {err[-3000:]}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sig,named", [
    (signal.SIGKILL, r"tp rank 1 \(pid {pid}\) was killed by signal 9 \(SIGKILL\)"),
    (signal.SIGSTOP, r"tp rank 1 \(pid {pid}\) stopped responding: no heartbeat for [\d.]+ s"),
], ids=["killed", "hung"])
def test_worker_killed_or_hung_mid_run(tmp_path, device, sig, named):
    """Rank 0 is told which rank ended and how, within seconds, not a transport error."""
    import re
    proc = _start(_script(tmp_path, ENDINGS["worker_signalled"]), device)
    t0 = _building(proc)
    pid = _worker_pid(proc, t0)
    time.sleep(0.5)  # mid-run: generate() loops
    os.kill(pid, sig)
    signalled = time.monotonic()
    out, err, took = _finish(proc, t0)
    _no_worker_left(pid)
    print(f"{sig.name} ({device}): rank 0 exited {time.monotonic() - signalled:.1f} s after "
          f"the signal, {took:.1f} s in all; {out.strip()[-300:]}")
    assert "named after" in out, f"stdout: {out[-2000:]}\nstderr: {err[-3000:]}"
    assert re.search(named.format(pid=pid), out), out
    assert "Connection reset" not in out.split("named after", 1)[1]
    after = float(out.split("named after", 1)[1].split()[0])
    assert after < NAMED_BOUND_S, out


@pytest.mark.parametrize("device", DEVICES)
def test_missing_main_guard_named(tmp_path, device):
    """The spawned worker re-imports an unguarded script and dies in multiprocessing's
    bootstrapping check: rank 0 names that, and the fix, within seconds."""
    proc = _start(_script(tmp_path, "eng = build()\n", guarded=False), device)
    t0 = _building(proc)  # rank 0 says it first; the worker, re-importing the script, later
    out, err, took = _finish(proc, t0)
    named = took
    print(f"missing guard ({device}): named and exited {named:.1f} s after Engine(), "
          f"{took:.1f} s in all")
    assert proc.returncode != 0
    assert "TPWorkerError: tp rank 1" in err and "before joining the group" in err, err[-3000:]
    assert 'if __name__ == "__main__":' in err, err[-3000:]
    assert "DistStoreError" not in err and "Timed out" not in err
    assert named < NAMED_BOUND_S, f"named {named:.1f} s after Engine()"


@pytest.mark.parametrize("device", DEVICES)
def test_worker_stopped_at_exit(tmp_path, device):
    """A worker stopped just before the script ends: rank 0's exit handshake cannot finish;
    the teardown gives up after its bound, kills the worker, aborts the groups and exits."""
    proc = _start(_script(tmp_path, ENDINGS["worker_stopped_at_exit"]), device)
    t0 = _building(proc)
    pid = _worker_pid(proc, t0)
    os.kill(pid, signal.SIGSTOP)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    out, err, took = _finish(proc, t0)
    _no_worker_left(pid)
    left = float(out.split("leaving", 1)[1].split()[0])
    after = time.monotonic() - left
    print(f"worker stopped at exit ({device}): exited {after:.1f} s after main() ended, "
          f"{took:.1f} s in all")
    assert "Traceback" not in err, err[-3000:]
    assert after < END_WAIT_S + NAMED_BOUND_S, f"{after:.1f} s"
