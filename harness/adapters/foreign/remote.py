"""A foreign kernel adapter seen from the harness: the worker subprocess (worker.py) started
with the engine's install folder first on the path and the engine's settings in its
environment only, and every component call forwarded to it. Built once per (engine,
version, device) and reused across examples."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading


class ForeignImportError(RuntimeError):
    """The release's import graph could not be served: names the module that failed."""

    def __init__(self, message: str, module: str | None = None) -> None:
        super().__init__(message)
        self.module = module


class ForeignCallError(RuntimeError):
    """The engine's kernel raised: its type, message and traceback (from the worker)."""

    def __init__(self, kind: str, message: str, tb: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.tb = kind, tb


def worker_env(paths: list[str], device: str, extra: dict, user_site: bool = False) -> dict:
    """`paths` first on the worker's path (the checkout, the install folder), then this
    harness; the user's site-packages left out unless `user_site` (`@installed` serves the
    package as this environment has it)."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if user_site:  # this environment as it is: its PYTHONPATH, its user site
        env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
        env.pop("PYTHONNOUSERSITE", None)
    else:
        env["PYTHONPATH"] = os.pathsep.join([*paths, here])
        env["PYTHONNOUSERSITE"] = "1"
    if device == "cpu":
        # Triton's interpreter on CPU; an empty device list keeps vLLM from swapping Triton
        # for its no-GPU placeholder (docs/adapters.md, "Kernel adapters").
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    else:
        env.pop("TRITON_INTERPRET", None)
    env.update(extra)
    return env


class RemoteKernels:
    in_process = False

    def __init__(self, name: str, *, target: str, paths: list[str], device: str, env: dict,
                 release: str, user_site: bool = False) -> None:
        self.name, self.device, self.release = name, device, release
        self.engine = f"{name}@{release}"  # what --engine and a replayed case name
        self._stderr: list[str] = []
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "harness.adapters.foreign.worker", target, device],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=worker_env(paths, device, env, user_site))
        threading.Thread(target=self._drain, daemon=True).start()
        self._lock = threading.Lock()
        msg = self._read()
        if msg[0] == "import-error":
            _, module, message, tb = msg
            raise ForeignImportError(
                f"{name}@{release}: "
                + (f"its import graph cannot be served here: module {module!r} is missing "
                   f"({message})" if module else f"the adapter cannot serve it: {message}")
                + f"\n  its path: {os.pathsep.join(paths) or '(this environment)'}\n"
                + "  worker traceback (last lines):\n"
                + "\n".join("    " + line for line in tb.strip().splitlines()[-6:]), module)
        info = msg[1]
        self._version, self.components = info["version"], info["components"]
        self.why_not, self.accepts = info["why_not"], info["accepts"]

    def _drain(self) -> None:
        for line in self._proc.stderr:
            self._stderr = (self._stderr + [line.decode(errors="replace")])[-40:]

    def _read(self):
        try:
            return pickle.load(self._proc.stdout)
        except EOFError:
            raise ForeignImportError(
                f"{self.name}@{self.release}: the worker exited (code {self._proc.wait()}); "
                "its last output:\n" + "".join(self._stderr[-15:])) from None

    def version(self) -> str:
        return self._version

    def call(self, method: str, *args, **kwargs):
        with self._lock:
            pickle.dump((method, args, kwargs), self._proc.stdin,
                        protocol=pickle.HIGHEST_PROTOCOL)
            self._proc.stdin.flush()
            msg = self._read()
        if msg[0] == "error":
            raise ForeignCallError(msg[1], msg[2], msg[3])
        return msg[1]

    def __getattr__(self, method: str):
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *a, **k: self.call(method, *a, **k)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
