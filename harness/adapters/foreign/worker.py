"""The subprocess a foreign kernel adapter runs in: `python -m harness.adapters.foreign.worker
module:Class device`, with the engine's install folder first on PYTHONPATH (remote.py starts
it). It builds the adapter (which imports the engine), then answers calls read from stdin:
pickled `(method, args, kwargs)` in, pickled `("ok", result)` or `("error", type, message,
traceback)` out. The engine's own prints and logs go to stderr, never into the reply pipe.

On a failed import it answers `("import-error", module, message, traceback)` once and exits:
the installer resolves missing side packages from that (install.py)."""
from __future__ import annotations

import importlib
import os
import pickle
import sys
import traceback


def _reply_pipe():
    """The real stdout, kept for replies; fd 1 then points at stderr for everyone else."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _send(out, msg) -> None:
    pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def loaded_files(root: str) -> dict:
    """"inside": every file of a loaded module under `root` (the install folder), relative
    to it; "outside": the top-level names of loaded modules from other site-packages."""
    root = os.path.realpath(root)
    inside, outside = set(), set()
    for name, mod in list(sys.modules.items()):
        path = os.path.realpath(getattr(mod, "__file__", None) or "/")
        if path.startswith(root + os.sep):
            inside.add(os.path.relpath(path, root))
        elif "-packages" + os.sep in path:
            outside.add(name.split(".")[0])
    return {"inside": sorted(inside), "outside": sorted(outside)}


def engine_sources(adapter, package: str) -> dict:
    """module name -> source text of each `package` file the adapter holds a function,
    kernel, class, instance or module of (a kernel compiled from a file's source without
    importing it is found by its code's file): what a sweep diffs between two releases to
    explain a law's flip (harness/runners/sweep_report.py)."""
    import types
    root = os.path.dirname(os.path.dirname(os.path.realpath(
        importlib.import_module(package).__file__)))
    files = set()
    for value in vars(adapter).values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            v = getattr(v, "func", v)  # functools.partial
            v = getattr(v, "fn", v)    # a Triton JITFunction's Python function
            code = getattr(v, "__code__", None)
            mod = v.__name__ if isinstance(v, types.ModuleType) else getattr(
                v, "__module__", None)
            if not isinstance(mod, str) or mod not in sys.modules:
                mod = type(v).__module__
            files.add(code.co_filename if code else getattr(sys.modules.get(mod), "__file__", ""))
    out = {}
    for path in sorted(filter(None, files)):
        path = os.path.realpath(path)
        if path.endswith(".py") and path.startswith(os.path.join(root, package) + os.sep):
            name = os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__")
            with open(path, encoding="utf-8", errors="replace") as f:
                out[name] = f.read()
    return out


def main(argv: list[str]) -> int:
    target, device = argv[0], argv[1]
    out = _reply_pipe()
    module, _, name = target.partition(":")
    try:
        adapter = getattr(importlib.import_module(module), name)(device)
    except ImportError as exc:
        _send(out, ("import-error", getattr(exc, "name", None), str(exc),
                    traceback.format_exc()))
        return 3
    except Exception as exc:  # noqa: BLE001 - reported to the harness, which names it
        _send(out, ("import-error", None, f"{type(exc).__name__}: {exc}",
                    traceback.format_exc()))
        return 3
    _send(out, ("ready", {"version": adapter.version(), "components": adapter.components,
                          "why_not": adapter.why_not, "accepts": adapter.accepts}))
    inp = sys.stdin.buffer
    while True:
        try:
            method, args, kwargs = pickle.load(inp)
        except EOFError:
            return 0
        if method == "loaded_files":  # what `harness foreign pack` carries to a GPU
            _send(out, ("ok", loaded_files(*args)))
            continue
        if method == "engine_sources":  # what a sweep diffs across releases
            _send(out, ("ok", engine_sources(adapter, *args)))
            continue
        try:
            _send(out, ("ok", getattr(adapter, method)(*args, **kwargs)))
        except Exception as exc:  # noqa: BLE001 - the kernel's failure is the law's to judge
            _send(out, ("error", type(exc).__name__, str(exc), traceback.format_exc()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
