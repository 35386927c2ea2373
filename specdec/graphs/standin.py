"""A CPU stand-in for torch.cuda.CUDAGraph, used automatically when there is no CUDA.

What it models: capture runs the function once, eagerly, and records every aten op it
dispatches, with its tensor arguments by identity and its non-tensor arguments by value.
Replay re-executes that op list against the same tensors, writing each op's result into the
tensor object capture produced; allocations (empty, empty_like, ...) are not re-run, so
memory the graph allocated keeps whatever the previous replay left there. So, as on a GPU:
- Python control flow and host scalars are frozen at capture time;
- a static input must be updated in place: a rebound attribute is never read by replay;
- an output tensor kept across a replay is overwritten by the next replay;
- in-place updates of static buffers (an `add_` on one) happen again at every replay;
- a buffer allocated inside capture and only partly written holds the last replay's rows
  (state a larger batch left in its bucket is what a smaller batch then reads).
A host sync inside capture (.item(), bool(tensor), nonzero, repeat_interleave without
output_size) raises GraphCaptureError, as cudaStreamCaptureStatus would make it fail.

What it cannot model: kernels that run outside torch dispatch (Triton, also interpreted),
so engines refuse cuda_graph with Triton kernels on CPU; `Tensor.tolist()`, which bypasses
dispatch; a capture under torch.inference_mode (refused: its replay went wrong); timing,
streams, and memory-pool sharing (each op allocates afresh at replay before
copying into the captured output). A kernel reference that reads its inputs on the host
(`tolist()`) and writes its outputs in place goes through `kernel_node`: capture records
the call as one node, which replay runs again on the same tensors, as a CUDA graph reruns a
captured kernel.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# Allocations: a real replay does not run them, so memory a graph allocated keeps what the
# last replay of that graph left in it. Replay skips them too (re-running them would hand
# fresh memory to whatever reads it before writing, hiding state a GPU keeps).
_ALLOC_OPS = {
    torch.ops.aten.empty.memory_format,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.empty_strided.default,
    torch.ops.aten.new_empty.default,
    torch.ops.aten.new_empty_strided.default,
}
_SYNC_OPS = {
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.is_nonzero.default,
    torch.ops.aten.nonzero.default,
}


# Functional collectives (specdec/tp/comm.py) return before their result is ready: replay
# waits on each one's fresh result before copying it into the captured output, as a CUDA
# graph orders the captured NCCL kernel before its consumers.
_COLLECTIVE_OPS = {
    torch.ops._c10d_functional.all_reduce.default,
    torch.ops._c10d_functional.all_gather_into_tensor.default,
}


_capturing: list["_Recorder"] = []  # the CPU capture in progress, if any
_KERNEL_NODE = object()  # marks a kernel_node entry of a recorded op list


def kernel_node(fn, *args) -> None:
    """fn(*args), a kernel writing its outputs in place. Inside a CPU capture: one recorded
    node (its own torch ops are not recorded), rerun by replay. Anywhere else (CUDA, where the
    stream captures the kernel, or no capture): a plain call."""
    if not _capturing:
        fn(*args)
        return
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        fn(*args)
    _capturing[-1].ops.append((_KERNEL_NODE, (fn, args), {}, None, True))



class GraphCaptureError(RuntimeError):
    """Something that a real CUDA graph capture would reject."""


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SYNC_OPS or (func is torch.ops.aten.repeat_interleave.Tensor
                                 and kwargs.get("output_size") is None):
            raise GraphCaptureError(f"host synchronisation inside graph capture: {func}")
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out, _aliased(func)))
        return out


_ALIASED: dict = {}  # op -> whether it returns a view or its input (read once per op)


def _aliased(func) -> bool:
    aliased = _ALIASED.get(func)
    if aliased is None:
        aliased = _ALIASED[func] = any(r.alias_info is not None for r in func._schema.returns)
    return aliased


class CPUGraph:
    """Same surface as the CUDA wrapper: `capture(fn)` returns fn's outputs; `replay()`."""

    def __init__(self) -> None:
        self._ops: list[tuple] | None = None

    def capture(self, fn):
        if torch.is_inference_mode_enabled():
            raise GraphCaptureError("CPU capture under torch.inference_mode: its replay is not "
                                    "modelled (it replayed wrong); capture outside it")
        rec = _Recorder()
        _capturing.append(rec)
        try:
            with rec:
                out = fn()
        finally:
            _capturing.pop()
        self._ops = rec.ops
        return out

    def replay(self) -> None:
        if self._ops is None:
            raise GraphCaptureError("replay() before capture()")
        for func, args, kwargs, captured, aliased in self._ops:
            if func is _KERNEL_NODE:
                kernel, kernel_args = args
                kernel(*kernel_args)
                continue
            if func in _ALLOC_OPS:
                continue
            new = func(*args, **kwargs)
            if func in _COLLECTIVE_OPS:
                new = torch.ops._c10d_functional.wait_tensor(new)
            if aliased:  # in-place ops and views: the captured tensor already shares memory
                continue
            for dst, src in zip(tree_flatten(captured)[0], tree_flatten(new)[0]):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
