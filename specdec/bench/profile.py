"""`python -m specdec bench profile`: where the time of a decode step and a spec round goes.

For each model and batch size: a graph decode step of the plain target, and a speculative
round (graphs on; `--spec-configs`, its first entry) are run under torch.profiler, and a
round also under cProfile. Each row gives the median wall time, the GPU kernels per step
and the GPU busy time (the sum of kernel times: wall minus busy is launch gaps and host
work), the kernels by total time, the CPU ops by self time and, for the round, the Python
functions by own time. It measures; it judges nothing.
"""
from __future__ import annotations

import cProfile
import io
import pstats

import torch
from torch.profiler import ProfilerActivity, profile

from specdec import Engine, SpecConfig
from specdec.bench.common import fast_weights, free, live_batch, median, sync, time_ms
from specdec.engine import DTYPES
from specdec.rounds import RoundRunner
from specdec.validate import reserve_margin

TOP = 15


def _device_us(e) -> float:
    return float(getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0))


def profiled(fn, device, iters: int, lead_in: int = 0):
    """torch.profiler over `lead_in` calls of fn, a sync, then `iters` calls (CPU, and CUDA
    kernels on a GPU). The caller leaves the lead-in's events out (step_timeline)."""
    cuda = torch.device(device).type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(lead_in):
            fn()
        sync(device)
        for _ in range(iters):
            fn()
        sync(device)
    return prof


def _profile(fn, device, iters: int) -> dict:
    avg = profiled(fn, device, iters).key_averages()
    kernels = sorted((e for e in avg if _device_us(e) > 0 and e.key != "cudaGraphLaunch"),
                     key=_device_us, reverse=True)
    kernels = [e for e in kernels if not e.key.startswith("cuda")]  # runtime API rows
    cpu = sorted(avg, key=lambda e: e.self_cpu_time_total, reverse=True)
    return {
        "kernels_per_step": sum(e.count for e in kernels) / iters,
        "gpu_busy_ms_per_step": sum(_device_us(e) for e in kernels) / iters / 1e3,
        "top_kernels": [{"name": e.key[:90], "per_step": e.count / iters,
                         "us_per_step": _device_us(e) / iters} for e in kernels[:TOP]],
        "top_cpu_ops": [{"name": e.key[:90], "per_step": e.count / iters,
                         "self_us_per_step": e.self_cpu_time_total / iters} for e in cpu[:TOP]],
    }


def _python_hotspots(fn, iters: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(iters):
        fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(TOP)
    return out.getvalue()


def _report(row: dict) -> None:
    print(f"\n== {row['model']} bs={row['bs']} {row['what']}: {row['step_ms']:.3f} ms/step, "
          f"{row['kernels_per_step']:.0f} kernels, GPU busy {row['gpu_busy_ms_per_step']:.3f} ms")
    for k in row["top_kernels"]:
        print(f"  {k['us_per_step']:9.1f} us  x{k['per_step']:<6.1f} {k['name']}")
    print("  -- CPU ops by self time")
    for k in row["top_cpu_ops"][:8]:
        print(f"  {k['self_us_per_step']:9.1f} us  x{k['per_step']:<6.1f} {k['name']}")
    if "python" in row:
        print(row["python"])


def _measure(what, *, model, bs, fn, device, iters, warmup, python=False) -> dict:
    step = median(time_ms(fn, device, iters, warmup))
    row = {"model": model, "bs": bs, "what": what, "step_ms": step, **_profile(fn, device, iters)}
    if python:
        row["python"] = _python_hotspots(fn, iters)
    _report(row)
    return row


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int,
        iters: int, warmup: int, configs) -> tuple[list[dict], dict]:
    topk, steps, ndt = configs[0]
    spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
    rows = []
    for model in models:
        # warmup + 3 * iters rounds (timed, profiled, cProfiled), each up to steps + 1 tokens.
        ctx = context + (warmup + 3 * iters) * (steps + 1) + reserve_margin(spec, 1) + 8
        with fast_weights(device, DTYPES[dtype]):
            plain = Engine(model=model, spec=None, device=device, dtype=dtype,
                           max_batch=max(batch_sizes), max_context=ctx)
        plain.rounds = RoundRunner(plain, True, batch_sizes, False)
        plain.rounds.capture_all()  # none inside a timing
        for bs in batch_sizes:
            with live_batch(plain, bs, context) as reqs:
                rows.append(_measure("decode_graph", model=model, bs=bs,
                                     fn=lambda: plain.rounds.decode_step(reqs),
                                     device=device, iters=iters, warmup=warmup))
        del plain
        free(device)
        for graph in (True, False):
            with fast_weights(device, DTYPES[dtype]):
                eng = Engine(model=model, spec=spec, draft="eagle", device=device, dtype=dtype,
                             max_batch=max(batch_sizes), max_context=ctx, cuda_graph=graph,
                             cuda_graph_bs=batch_sizes)
                eng.capture_graphs()  # none inside a timing
            for bs in batch_sizes:
                with live_batch(eng, bs, context) as reqs:
                    rows.append(_measure(f"spec_round_{'graph' if graph else 'eager'}",
                                         model=model, bs=bs,
                                         fn=lambda: eng.rounds.spec_round(reqs), device=device,
                                         iters=iters,
                                         warmup=warmup, python=True))
            del eng
            free(device)
    return rows, {"context": context, "iters": iters, "warmup": warmup, "dtype": dtype,
                  "spec": [topk, steps, ndt]}
