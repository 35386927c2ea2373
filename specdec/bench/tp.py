"""`python -m specdec bench decode --tp N`: the plain target decode step (graphs on) sharded
over N ranks against one rank, and the all-reduce time inside it.

Every rank runs the same timed steps (their collectives keep them in step); rank 0's figures
are reported. One rank runs our graph step and the torch.compile peer (`--compile-mode`,
specdec/bench/decode.py); tensor parallel runs twice: with the engine's all-reduce paths
("auto": the peer-memory kernel fused with the norms up to the crossover,
specdec/tp/comm.py) and NCCL only ("nccl"). Each row: median ms per step against its floor
(per rank: its weight shard and its KV heads' share of the KV over the copy bandwidth
measured in the same run), and from the device timeline of the same steps
(specdec/bench/timeline.py) the collectives' time per step and its share, the kernels'
busy time, the gaps between kernels and the kernels that took most of it."""
from __future__ import annotations

from functools import partial

import torch

from specdec import Engine
from specdec.bench.common import (COPY_CONVENTION, copy_bandwidth, fast_weights, free,
                                  live_batch, median, step_floor, time_ms)
from specdec.bench.timeline import COLLECTIVE_KERNELS, step_timeline
from specdec.engine import DTYPES
from specdec.rounds import RoundRunner
from specdec.tp.group import TPGroup
from specdec.tp.replicate import on_every_rank

_KEEP = []  # the fast-weights patch stays on in a worker for the bench's lifetime


def _fast_weights_here(_engine, device: str, dtype: str) -> None:
    """On every rank: build models on the rank's device with device-drawn weights (the
    seeded CPU init of llama-8b takes minutes per rank); timings do not depend on values."""
    if torch.device(device).type == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"  # each rank's own GPU
    cm = fast_weights(device, DTYPES[dtype])
    cm.__enter__()
    _KEEP.append(cm)


def _decode_rows(engine, *, model: str, tp: int, batch_sizes, context: int, iters: int,
                 warmup: int, path: str, bytes_per_s: float) -> list[dict]:
    """On every rank: a graph decode runner, each batch size timed, then profiled."""
    runner = RoundRunner(engine, True, batch_sizes, False)
    runner.capture_all()  # every rank alike; none inside a timing
    engine.rounds, rows = runner, []
    for bs in batch_sizes:
        with live_batch(engine, bs, context) as reqs:
            def step(r=runner, q=reqs):
                r.decode_step(q)
            ms = median(time_ms(step, engine.device, iters, warmup))
            line = step_timeline(step, engine.device, iters)
        coll = line["collective_ms"]
        floor, _ = step_floor(engine, bs=bs, context=context, warmup=warmup, iters=iters,
                              bytes_per_s=bytes_per_s, ranks=tp)
        rows.append({"model": model, "bs": bs, "tp": tp, "all_reduce": path, "impl": "graph",
                     "step_ms": ms, "floor_ms": floor, "ratio": ms / floor,
                     "allreduce_ms_per_step": coll, "allreduce_share": coll / ms,
                     "timeline": line})
    return rows


def _compile_rows(eng, *, model, batch_sizes, context, iters, warmup, compile_mode,
                  bytes_per_s) -> list[dict]:
    """The torch.compile peer of the one-rank step (specdec/bench/decode.py), same floor."""
    from specdec.bench.decode import _peer_row, peer_seq
    rows = []
    for bs in batch_sizes:
        floor_ms, common = step_floor(eng, bs=bs, context=context, warmup=warmup, iters=iters,
                                      bytes_per_s=bytes_per_s)
        row = _peer_row(eng, model=model, bs=bs, seq=peer_seq(context, warmup, iters),
                        context=context, device=str(eng.device), iters=iters, warmup=warmup,
                        compile_mode=compile_mode, floor_ms=floor_ms, common=common)
        rows.append({**row, "tp": 1, "all_reduce": None})
    return rows


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int,
        iters: int, warmup: int, tp: int,
        compile_mode: str = "reduce-overhead") -> tuple[list[dict], dict]:
    rows = []
    steps = warmup + 2 * iters
    bw = copy_bandwidth(device)  # every rank's GPU is the same kind
    runs = [(1, "nccl")] + [(tp, path) for path in ("auto", "nccl")]
    for model in models:
        for size, path in runs:
            if size > 1:  # the workers build with device-drawn weights too
                group = TPGroup.leader(size, torch.device(device).type, _fast_weights_here)
                on_every_rank(group, None, _fast_weights_here, device, dtype)
                group.release()
            with fast_weights(device, DTYPES[dtype]):  # rank 0 stays on the current GPU
                eng = Engine(model=model, spec=None, device=device, dtype=dtype,
                             max_batch=max(batch_sizes), max_context=context + steps + 8,
                             tp_size=size, tp_check=False, tp_all_reduce=path)
            got = eng.tp_each(partial(_decode_rows, model=model, tp=size,
                                      batch_sizes=batch_sizes, context=context, iters=iters,
                                      warmup=warmup, path=path,
                                      bytes_per_s=bw["bytes_per_s"]))[0]
            for r in got:
                line = r["timeline"]
                print(f"{model:>9} bs={r['bs']:<3} tp={size} {path:<4} {r['step_ms']:8.3f} "
                      f"ms/step x{r['ratio']:.2f} floor  collectives {r['allreduce_ms_per_step']:7.3f} ms "
                      f"({100 * r['allreduce_share']:.0f}%)  busy {line['busy_ms']:.3f} ms, "
                      f"gaps {line['gap_ms']:.3f} ms, {line['kernels_per_step']:.0f} kernels",
                      flush=True)
            rows += got
            if size == 1:  # after this engine's graph replays, as in bench decode
                rows += _compile_rows(eng, model=model, batch_sizes=batch_sizes, context=context,
                                      iters=iters, warmup=warmup,
                                      compile_mode=compile_mode, bytes_per_s=bw["bytes_per_s"])
            eng.close()
            del eng
            free(device)
    for model in models:
        for bs in batch_sizes:
            one = next(r for r in rows if (r["model"], r["bs"], r["tp"], r["impl"])
                       == (model, bs, 1, "graph"))
            for path in ("auto", "nccl"):
                many = next(r for r in rows if (r["model"], r["bs"], r["tp"], r["all_reduce"])
                            == (model, bs, tp, path))
                many["speedup_vs_tp1"] = one["step_ms"] / many["step_ms"]
                print(f"{model:>9} bs={bs:<3} tp{tp} {path:<4} vs tp1: "
                      f"x{many['speedup_vs_tp1']:.2f}")
    return rows, {"context": context, "iters": iters, "warmup": warmup, "dtype": dtype,
                  "tp": tp, "statistic": "median of iters (rank 0)", "copy_bandwidth": bw,
                  "floor_convention": "per rank: its weight shard + its KV heads' share of "
                                      "the KV over copy_bw; " + COPY_CONVENTION,
                  "collectives": "device timeline: the union of the intervals of kernels "
                                 "named " + ", ".join(COLLECTIVE_KERNELS) + " (CPU: the "
                                 "functional collective ops), per step"}
