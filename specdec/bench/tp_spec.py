"""`python -m specdec bench spec --tp N`: one speculative round (EAGLE, graphs on) sharded over
N ranks against one rank, and the collectives' time inside it; the shape of
`bench decode --tp N` (specdec/bench/tp.py), whose fast-weights setup it shares.

Every rank runs the same timed rounds (their collectives keep them in step); rank 0's
figures are reported. Tensor parallel runs with the engine's all-reduce paths ("auto") and
NCCL only ("nccl"). Each row: median ms per round, the collectives' ms per round from the
device timeline of the same rounds (specdec/bench/timeline.py) and their share, and the
speedup against tp 1."""
from __future__ import annotations

from functools import partial

import torch

from specdec import Engine, SpecConfig
from specdec.bench.common import fast_weights, free, live_batch, median, time_ms
from specdec.bench.timeline import COLLECTIVE_KERNELS, step_timeline
from specdec.bench.tp import _fast_weights_here
from specdec.engine import DTYPES
from specdec.tp.group import TPGroup
from specdec.tp.replicate import on_every_rank
from specdec.validate import reserve_margin


def _round_rows(engine, *, model: str, tp: int, batch_sizes, context: int, iters: int,
                warmup: int, path: str) -> list[dict]:
    """On every rank: each batch size's spec round timed, then profiled."""
    s = engine.spec
    rows, (topk, steps, ndt) = [], (s.topk, s.num_steps, s.num_draft_tokens)
    for bs in batch_sizes:
        with live_batch(engine, bs, context) as reqs:
            def one_round(r=engine.rounds, q=reqs):
                r.spec_round(q)
            ms = median(time_ms(one_round, engine.device, iters, warmup))
            line = step_timeline(one_round, engine.device, iters)
        coll = line["collective_ms"]
        rows.append({"model": model, "bs": bs, "tp": tp, "all_reduce": path, "topk": topk,
                     "num_steps": steps, "ndt": ndt, "round_ms": ms,
                     "allreduce_ms_per_round": coll, "allreduce_share": coll / ms,
                     "timeline": line})
    return rows


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int,
        iters: int, warmup: int, tp: int, configs) -> tuple[list[dict], dict]:
    rows = []
    for model in models:
        for topk, steps, ndt in configs:
            spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
            # every round may commit num_steps + 1 tokens; timed and profiled rounds both
            ctx = context + (warmup + 2 * iters) * (steps + 1) + reserve_margin(spec, 1) + 8
            for size, path in [(1, "nccl")] + [(tp, p) for p in ("auto", "nccl")]:
                if size > 1:  # the workers build with device-drawn weights too
                    group = TPGroup.leader(size, torch.device(device).type, _fast_weights_here)
                    on_every_rank(group, None, _fast_weights_here, device, dtype)
                    group.release()
                with fast_weights(device, DTYPES[dtype]):
                    eng = Engine(model=model, spec=spec, draft="eagle", device=device,
                                 dtype=dtype, max_batch=max(batch_sizes), max_context=ctx,
                                 cuda_graph=True, cuda_graph_bs=batch_sizes, tp_size=size,
                                 tp_check=False, tp_all_reduce=path)
                    eng.capture_graphs()  # none inside a timing
                got = eng.tp_each(partial(_round_rows, model=model, tp=size,
                                          batch_sizes=batch_sizes, context=context,
                                          iters=iters, warmup=warmup, path=path))[0]
                for r in got:
                    print(f"{model:>9} bs={r['bs']:<3} topk={topk} steps={steps} ndt={ndt} "
                          f"tp={size} {path:<4} {r['round_ms']:8.3f} ms/round  collectives "
                          f"{r['allreduce_ms_per_round']:7.3f} ms "
                          f"({100 * r['allreduce_share']:.0f}%)", flush=True)
                rows += got
                eng.close()
                del eng
                free(device)
    for r in rows:
        if r["tp"] == tp and tp > 1:
            one = next(o for o in rows if o["tp"] == 1 and all(
                o[k] == r[k] for k in ("model", "bs", "topk", "num_steps", "ndt")))
            r["speedup_vs_tp1"] = one["round_ms"] / r["round_ms"]
            print(f"{r['model']:>9} bs={r['bs']:<3} topk={r['topk']} steps={r['num_steps']} "
                  f"ndt={r['ndt']} tp{tp} {r['all_reduce']:<4} vs tp1: "
                  f"x{r['speedup_vs_tp1']:.2f}")
    return rows, {"context": context, "iters": iters, "warmup": warmup, "dtype": dtype,
                  "tp": tp, "draft": "eagle", "cuda_graph": True,
                  "statistic": "median of iters rounds (rank 0)",
                  "collectives": "device timeline: the union of the intervals of kernels "
                                 "named " + ", ".join(COLLECTIVE_KERNELS) + " (CPU: the "
                                 "functional collective ops), per round"}
