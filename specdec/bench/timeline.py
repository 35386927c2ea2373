"""Time per step from the device timeline: the kernels that ran, the collectives among them,
and the gaps between them, each an interval union so nothing is counted twice.

Summing torch.profiler's key averages over names that look like collectives counted one
all-reduce several times (the CPU op, its `record_param_comms` and the NCCL kernel all match,
and a CPU op's device time is its kernels'): at bs 1 the collectives came to 306% of the
step. Here only device (kernel) events count, a collective is a kernel whose name says so
(NCCL's, the peer all-reduce's), and the figures are checked: collectives <= busy <= span.
On CPU there is no device timeline: the "kernels" are the calling thread's top-level ops,
the collectives the functional collective ops among them (gloo runs inside them)."""
from __future__ import annotations

import torch
from torch.autograd import DeviceType

from specdec.bench.profile import profiled

COLLECTIVE_KERNELS = ("nccl", "peer_all_reduce")  # kernel names (CUDA)
COLLECTIVE_OPS = ("_c10d_functional::all_reduce", "_c10d_functional::all_gather_into_tensor",
                  "_c10d_functional::wait_tensor")  # CPU op names (gloo runs in these)


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _interval(e) -> tuple[float, float]:
    return float(e.time_range.start), float(e.time_range.end)


TOP = 12  # kernels listed per step, by time


def _after_lead_in(kernels: list, steps: int) -> list:
    """The kernels of the last steps - 1 of `steps` calls that each ran the same kernels."""
    kernels = sorted(kernels, key=lambda e: e.time_range.start)
    if len(kernels) % steps:
        raise RuntimeError(f"{len(kernels)} kernels over {steps} steps: the steps did not "
                           "all run the same kernels")
    return kernels[len(kernels) // steps:]


def step_timeline(fn, device, iters: int) -> dict:
    """Per step (ms), over `iters` calls of fn under the profiler: the span from the first
    kernel's start to the last one's end, the time some kernel ran ("busy"), the time a
    collective ran, the gaps (span - busy), and the kernels that took most of it (name,
    ms and launches per step; on CPU the ops). One more call runs first and is left out:
    under tensor parallelism the ranks start their profilers at different times, and a
    collective's kernel counts its wait for the late rank (the first bs-1 peer row read
    97 ms of collectives per 2.2 ms step with it in)."""
    prof = profiled(fn, device, iters, lead_in=1)
    events = list(prof.events())
    if torch.device(device).type == "cuda":
        # (names starting "cuda" are runtime API rows: CPU-side)
        kernels = _after_lead_in([e for e in events if e.device_type == DeviceType.CUDA
                                  and not e.name.startswith("cuda")], iters + 1)
        coll = [e for e in kernels if any(m in e.name.lower() for m in COLLECTIVE_KERNELS)]
    else:
        # Top-level ops of the calling thread: nested ones (gloo's own, an op's callees)
        # lie inside them.
        thread = next((e.thread for e in events if e.name in COLLECTIVE_OPS), None)
        kernels = _after_lead_in([e for e in events if e.device_type == DeviceType.CPU
                                  and e.cpu_parent is None
                                  and (thread is None or e.thread == thread)], iters + 1)
        coll = [e for e in kernels if e.name in COLLECTIVE_OPS]
    spans = [_interval(e) for e in kernels]
    if not spans:
        raise RuntimeError("the profiler saw no kernels: nothing to attribute")
    span = max(b for _, b in spans) - min(a for a, _ in spans)
    busy = union_us(spans) if torch.device(device).type == "cuda" else span
    coll_us = union_us([_interval(e) for e in coll])
    if not coll_us <= busy + 1e-6 <= span + 2e-6:
        raise RuntimeError(f"timeline does not add up: collectives {coll_us:.1f} us, busy "
                           f"{busy:.1f} us, span {span:.1f} us")
    per = 1e3 * iters
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        a, b = _interval(e)
        by_name.setdefault(e.name[:80], []).append(b - a)
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:TOP]
    return {"span_ms": span / per, "busy_ms": busy / per, "collective_ms": coll_us / per,
            "gap_ms": (span - busy) / per, "kernels_per_step": len(kernels) / iters,
            "collectives_per_step": len(coll) / iters,
            "top_kernels": [{"name": n, "ms_per_step": sum(d) / per,
                             "per_step": len(d) / iters} for n, d in top]}
