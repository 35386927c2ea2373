"""`python -m MODULE ARGS` in a fresh process without paying for Python and torch again.

On a GPU every zoo fault is detected in a process of its own (harness/runners/zoo.py,
detect_isolated: a fault can leave the CUDA context unusable). Started with `python -m
harness`, such a process spent a median 5 s of a 2-H100 gate's zoo test on start-up
(interpreter, torch, the laws, the cases) before its first example: 211 process-seconds over
the 39 detections of a profiled run of 3 651, while a detection itself often took 3 s
(bench/results/gate-profile-h100x2-2026-11-27-zoo-waits.txt).

A fork server imports all that once and forks a process per command. The server never
touches CUDA (torch.cuda.is_available() asks NVML there, PYTORCH_NVML_BASED_CUDA_CHECK), so
each forked process initializes CUDA itself, on the GPU and with the environment of its
request, as a process started from scratch does (were CUDA ever started in the server, its
processes would refuse, and `run` would start them from scratch with a warning). Each
forked process:
- takes the requester's environment (PYTHONPATH's entries joining sys.path), working
  directory and arguments (sys.argv);
- writes its stdout and stderr to the requester's files (inherited by the processes it
  starts: TP ranks), with faulthandler on them (`python -X faulthandler`);
- draws fresh seeds (the `random` module is reseeded from the OS: Hypothesis seeds from it);
- takes OMP_NUM_THREADS as torch's thread count (torch read it when the server imported it);
- runs MODULE as __main__ (runpy), and returns its exit status.

One server serves every process that has SERVER_ENV (the pytest controller starts it before
xdist starts its workers; `harness zoo --jobs` before its jobs). `run` keeps
run_bounded's contract (a time limit, SIGABRT for the stacks, then SIGKILL); without a
server, or with one that is gone, it starts the process from scratch instead."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from harness.base import stop
from harness.gate import red_gate

SERVER_ENV = "SPECDEC_FORK_SERVER"  # the server's socket
PRELOAD = ("harness.__main__", "harness.runners.cli", "harness.runners.zoo",
           "harness.runners.suite", "hypothesis", "torch", "specdec.engine")


class ForkServer:
    """A started server (`start`); `stop()` ends it and removes its socket."""

    def __init__(self, proc: subprocess.Popen, path: str) -> None:
        self.proc, self.path = proc, path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for leftover in (self.path, os.path.dirname(self.path)):
            try:
                os.unlink(leftover) if leftover == self.path else os.rmdir(leftover)
            except OSError:
                pass
        if os.environ.get(SERVER_ENV) == self.path:
            del os.environ[SERVER_ENV]


def start(preload=PRELOAD) -> ForkServer:
    """Start a server for this process and those it starts later (SERVER_ENV). Its imports
    go on in the background; a command sent before they end waits for them."""
    path = os.path.join(tempfile.mkdtemp(prefix="specdec-fork-"), "server.sock")
    env = {**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    env.pop(SERVER_ENV, None)
    proc = subprocess.Popen([sys.executable, "-m", "harness.gate.fork_server", path,
                             str(os.getpid()), *preload], env=env, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(path):  # bound before its imports: connecting then just waits
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the fork server did not start (exit status {proc.poll()})")
        time.sleep(0.01)
    os.environ[SERVER_ENV] = path
    return ForkServer(proc, path)


def run(module: str, args: list[str], limit: float, what: str,
        env: dict | None = None) -> tuple[int, str, str]:
    """`python -X faulthandler -m module *args` to its end, or for `limit` seconds (then
    SIGABRT, then SIGKILL, and an error with the stacks): (returncode, stdout, stderr). In a
    process forked by the server when there is one, else started from scratch."""
    env = dict(os.environ if env is None else env)
    path = env.get(SERVER_ENV) or os.environ.get(SERVER_ENV)
    ended = None
    if path and os.path.exists(path):
        try:
            ended = _run_forked(path, module=module, args=args, limit=limit, what=what, env=env)
        except _ServerGone as gone:
            if not getattr(run, "warned", False):
                run.warned = True
                import warnings
                warnings.warn(f"fork server {path}: {gone or 'gone'}; starting processes "
                              "from scratch", RuntimeWarning, stacklevel=2)
    if ended is None:
        ended = run_bounded([sys.executable, "-X", "faulthandler", "-m", module, *args], limit,
                            what, env)
    # A process that ended while the gate was red may have been ended by it (its own stop
    # checks skip, and it exits 1 with no result): the test ends as skipped, not as a
    # failure of what the process was for.
    stop.check()
    return ended


def run_bounded(args: list[str], limit: float, what: str, env: dict | None = None, *,
                cwd: str | None = None) -> tuple[int, str, str]:
    """Run a subprocess to its end, or for `limit` seconds: past that it is sent SIGABRT (a
    Python started with faulthandler prints every thread's stack), then killed, and the
    error says where it hung. (returncode, stdout, stderr). A red gate kills it and ends
    the test (communicate)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd)
    try:
        out, err = communicate(proc, limit, what)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise RuntimeError(f"{what} still running after {limit:g} s; its stacks:\n"
                           f"{err[-6000:]}") from None
    return proc.returncode, out, err


def communicate(proc, limit: float, what: str) -> tuple[str, str]:
    """proc.communicate(timeout=limit), a second at a time: past WAIT_NOTE_S the wait says
    what it waits for; a red gate kills the process and ends the test (red_gate.py)."""
    notes, end = red_gate.WaitNotes(f"{what} (pid {proc.pid})"), time.monotonic() + limit
    while True:
        try:
            return proc.communicate(timeout=max(0.0, min(1.0, end - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= end:
                raise
            notes.tick()
            end_if_red(proc)


def end_if_red(proc) -> None:
    """Once the gate is red: the process killed and reaped, the test ended as skipped."""
    if stop.reason():
        proc.kill()
        proc.wait()
        stop.check()


def _await_line(sock, stream, pid: int, limit: float, what: str) -> bytes:
    """The forked process's last line (its exit status), waited for a second at a time, as
    communicate waits; TimeoutError past `limit`."""
    import select
    notes, end = red_gate.WaitNotes(f"{what} (pid {pid})"), time.monotonic() + limit
    while not select.select([sock], [], [], max(0.0, min(1.0, end - time.monotonic())))[0]:
        if time.monotonic() >= end:
            raise TimeoutError
        notes.tick()
        if stop.reason():
            _abort(pid)
            stop.check()
    return stream.readline()


class _ServerGone(Exception):
    """The server did not take the command (it ended, or a process forked from it could not
    start CUDA): start the process from scratch."""


def _run_forked(path, *, module, args, limit, what, env) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory(prefix="specdec-forked-") as tmp:
        out_path, err_path = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.connect(path)
                sock.sendall(json.dumps({"module": module, "args": list(args), "env": env,
                                         "cwd": os.getcwd(), "out": out_path,
                                         "err": err_path}).encode() + b"\n")
                stream = sock.makefile("rb")
                first = stream.readline()  # the forked process's pid, once it runs
            except OSError as exc:
                raise _ServerGone from exc
            if not first.strip().isdigit():  # ended, or refused (it cannot give CUDA)
                raise _ServerGone(first.decode(errors="replace").strip())
            pid = int(first)
            try:
                last = _await_line(sock, stream, pid, limit, what)
            except TimeoutError:
                _abort(pid)
                raise RuntimeError(f"{what} still running after {limit:g} s; its stacks:\n"
                                   f"{_read(err_path)[-6000:]}") from None
        finally:
            sock.close()
        # No status: the process died on a signal before it could answer (-1: which one is
        # not known here; its stderr says what faulthandler saw).
        rc = int(last) if last.strip() else -1
        return rc, _read(out_path), _read(err_path)


def _abort(pid: int) -> None:
    """SIGABRT (faulthandler prints every thread's stack), then SIGKILL if it is still there
    10 s later. The server reaps its processes at once, so a pid that is gone has ended."""
    try:
        os.kill(pid, signal.SIGABRT)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


# The server (`python -m harness.gate.fork_server SOCKET PARENT_PID MODULE...`).


def serve(path: str, parent: int, preload: list[str]) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(256)
    import importlib
    for name in preload:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forked processes reap themselves
    import threading
    import warnings
    if threading.active_count() == 1:
        # Python warns on fork() whenever the process has other OS threads. Here those are
        # native pools started at import (numpy's import starts OpenBLAS's, whose own atfork
        # handler restarts it in the child); no Python thread runs that could hold a lock.
        warnings.filterwarnings("ignore", r"This process .* is multi-threaded",
                                DeprecationWarning)
    listener.settimeout(1.0)
    while os.getppid() == parent:  # ends with the process that started it
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        if os.fork() == 0:
            listener.close()
            _child(conn)  # never returns
        conn.close()


def _child(conn: socket.socket) -> None:
    rc = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its own subprocesses are waited for
        conn.settimeout(None)
        request = json.loads(conn.makefile("rb").readline())
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[1:1] = [p for p in extra if p not in sys.path]  # where python would put them
        for fd, name in ((1, "out"), (2, "err")):
            f = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda._is_in_bad_fork():  # CUDA was started in the
            conn.sendall(b"cuda started in the fork server\n")  # server: start afresh
            return
        import faulthandler
        import random
        import runpy
        faulthandler.enable()
        random.seed()
        if "OMP_NUM_THREADS" in os.environ and "torch" in sys.modules:  # read at torch's start
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        conn.sendall(f"{os.getpid()}\n".encode())
        sys.argv = [request["module"], *request["args"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
        conn.sendall(f"{rc}\n".encode())
    finally:
        os._exit(rc)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
