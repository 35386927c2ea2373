"""`SPECDEC_AOT=90 pytest tests/kernels`: every Triton kernel variant these tests launch under
the interpreter is also compiled for that GPU architecture (sm_90: H100/H200), on any machine.

The interpreter runs code that a GPU compile may reject (types, layouts, constexpr misuse), and
GPU time is scarce: this finds such a kernel on the CPU machine first. Each launch's argument
types and constexprs are recorded; when the session ends, each distinct variant goes through
`triton.compile` for `GPUTarget("cuda", ARCH, 32)` (Triton ships its own ptxas), and a variant
that fails fails the run. Off unless SPECDEC_AOT is set; nothing runs on a GPU either way.
"""
from __future__ import annotations

import inspect
import os

import pytest
import torch

ARCH = os.environ.get("SPECDEC_AOT")
_SEEN: set = set()  # (module, kernel name, signature, constexprs, launch options)

_PTR = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
        torch.float64: "*fp64", torch.int64: "*i64", torch.int32: "*i32", torch.int16: "*i16",
        torch.int8: "*i8", torch.uint8: "*u8", torch.bool: "*i1"}
_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def _arg_type(value) -> str:
    if isinstance(value, torch.Tensor):
        return _PTR[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2**31 <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"SPECDEC_AOT: no Triton type for an argument of type {type(value)}")


def _record(interpreted, args, kwargs) -> None:
    fn = interpreted.fn
    params = inspect.signature(fn).parameters
    bound = dict(zip(params, args), **{k: v for k, v in kwargs.items() if k in params})
    sig, consts = {}, {}
    for name, p in params.items():
        if "constexpr" in str(p.annotation):
            consts[name] = bound[name]
            sig[name] = "constexpr"
        else:
            sig[name] = _arg_type(bound[name])
    options = tuple((k, kwargs[k]) for k in _OPTIONS if k in kwargs)
    _SEEN.add((fn.__module__, fn.__name__, tuple(sig.items()), tuple(consts.items()), options))


@pytest.fixture(autouse=True, scope="session")
def _aot_recorder():
    if not ARCH:
        yield
        return
    from triton.runtime.interpreter import InterpretedFunction
    run = InterpretedFunction.run

    def recording_run(self, *args, grid, warmup, **kwargs):
        _record(self, args, kwargs)
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording_run
    yield
    InterpretedFunction.run = run


_COMPILE = """
import importlib, json, os, sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile as triton_compile
arch, failed = int(sys.argv[1]), []
variants = json.load(sys.stdin)
for module, name, sig, consts, options in variants:
    try:
        fn = getattr(importlib.import_module(module), name)
        triton_compile(ASTSource(fn=fn, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", arch, 32), options=options)
    except Exception as exc:  # a compile error of any kind is the finding
        failed.append(f"{module}.{name} {consts}: {type(exc).__name__}: {str(exc)[:800]}")
print(f"SPECDEC_AOT={arch}: {len(variants)} kernel variants compiled, {len(failed)} failed")
for line in failed:
    print("  " + line)
sys.exit(1 if failed else 0)
"""


def pytest_sessionfinish(session, exitstatus):
    """Compile in a process of its own: the interpreter (TRITON_INTERPRET=1, set before triton
    loaded here) makes this process's kernels interpreted functions."""
    if not ARCH or not _SEEN:
        return
    import json
    import subprocess
    import sys
    variants = [(mod, name, dict(sig), dict(consts), dict(options))
                for (mod, name, sig, consts, options) in sorted(_SEEN)]
    env = dict(os.environ, TRITON_INTERPRET="0")
    done = subprocess.run([sys.executable, "-c", _COMPILE, ARCH], input=json.dumps(variants),
                          text=True, capture_output=True, env=env)
    print("\n" + done.stdout + done.stderr[-3000:])
    if done.returncode:
        session.exitstatus = 1
