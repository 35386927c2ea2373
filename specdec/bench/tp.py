"""`python -m specdec bench decode --tp N`: the plain target decode step (graphs on) sharded
over N ranks against one rank, and the all-reduce time inside it.

Every rank runs the same timed steps (their collectives keep them in step); rank 0's figures
are reported. Each row: median ms per step, and from torch.profiler over the same steps the
time per step in the tensor-parallel collectives (CUDA: the NCCL kernels; CPU: the
`_c10d_functional` all_reduce / all_gather ops and their waits) and its share of the step."""
from __future__ import annotations

import torch

from specdec import Engine
from specdec.bench.common import fast_weights, free, live_batch, median, time_ms
from specdec.bench.profile import profiled
from specdec.engine import DTYPES
from specdec.rounds import RoundRunner
from specdec.tp.group import TPGroup
from specdec.tp.replicate import on_every_rank

_COLLECTIVE_MARKS = ("nccl", "allreduce", "all_reduce", "allgather", "all_gather", "wait_tensor")
_KEEP = []  # the fast-weights patch stays on in a worker for the bench's lifetime


def _fast_weights_here(_engine, device: str, dtype: str) -> None:
    """On every rank: build models on the rank's device with device-drawn weights (the
    seeded CPU init of llama-8b takes minutes per rank); timings do not depend on values."""
    if torch.device(device).type == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"  # each rank's own GPU
    cm = fast_weights(device, DTYPES[dtype])
    cm.__enter__()
    _KEEP.append(cm)


def _collective_ms(fn, device, iters: int) -> float:
    cuda = torch.device(device).type == "cuda"
    total = 0.0
    for e in profiled(fn, device, iters).key_averages():
        if any(m in e.key.lower() for m in _COLLECTIVE_MARKS):
            us = (getattr(e, "self_device_time_total", 0) or 0) if cuda else e.self_cpu_time_total
            total += float(us)
    return total / iters / 1e3


def _decode_rows(engine, model: str, tp: int, batch_sizes, context: int, iters: int,
                 warmup: int) -> list[dict]:
    """On every rank: a graph decode runner, each batch size timed, then profiled."""
    runner = RoundRunner(engine, True, batch_sizes, False)
    runner.capture_all()  # every rank alike; none inside a timing
    engine.rounds, rows = runner, []
    for bs in batch_sizes:
        with live_batch(engine, bs, context) as reqs:
            def step(r=runner, q=reqs):
                r.decode_step(q)
            ms = median(time_ms(step, engine.device, iters, warmup))
            coll = _collective_ms(step, engine.device, iters) if tp > 1 else 0.0
        rows.append({"model": model, "bs": bs, "tp": tp, "impl": "graph", "step_ms": ms,
                     "allreduce_ms_per_step": coll, "allreduce_share": coll / ms})
    return rows


def run(device: str, dtype: str, models: list[str], batch_sizes: list[int], context: int,
        iters: int, warmup: int, tp: int) -> tuple[list[dict], dict]:
    rows = []
    steps = warmup + 2 * iters
    for model in models:
        for size in (1, tp):
            if size > 1:  # the workers build with device-drawn weights too
                group = TPGroup.leader(size, torch.device(device).type, _fast_weights_here)
                on_every_rank(group, None, _fast_weights_here, device, dtype)
                group.release()
            with fast_weights(device, DTYPES[dtype]):  # rank 0 stays on the current GPU
                eng = Engine(model=model, spec=None, device=device, dtype=dtype,
                             max_batch=max(batch_sizes), max_context=context + steps + 8,
                             tp_size=size, tp_check=False)
            got = eng.tp_each(_decode_rows, model, size, batch_sizes, context, iters, warmup)[0]
            for r in got:
                print(f"{model:>9} bs={r['bs']:<3} tp={size} {r['step_ms']:8.3f} ms/step  "
                      f"collectives {r['allreduce_ms_per_step']:7.3f} ms "
                      f"({100 * r['allreduce_share']:.0f}%)", flush=True)
            rows += got
            eng.close()
            del eng
            free(device)
    for model in models:
        for bs in batch_sizes:
            one = next(r for r in rows if (r["model"], r["bs"], r["tp"]) == (model, bs, 1))
            many = next(r for r in rows if (r["model"], r["bs"], r["tp"]) == (model, bs, tp))
            many["speedup_vs_tp1"] = one["step_ms"] / many["step_ms"]
            print(f"{model:>9} bs={bs:<3} tp{tp} vs tp1: x{many['speedup_vs_tp1']:.2f}")
    return rows, {"context": context, "iters": iters, "warmup": warmup, "dtype": dtype,
                  "tp": tp, "statistic": "median of iters (rank 0)",
                  "collectives": "profiler time per step of " + ", ".join(_COLLECTIVE_MARKS)}
