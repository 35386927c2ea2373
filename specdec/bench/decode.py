"""`python -m specdec bench decode`: one plain target decode step, against its memory floor.

Three implementations of the same step, measured in one run: the eager engine step, our CUDA
graph step (the spec=None decode runner) and torch.compile(mode="reduce-overhead") over a
dense-KV step (specdec/bench/dense.py). With graphs, the step through `Engine.step()` (the
scheduler's host work included) in steady state, synchronous ("engine-step") and with overlap
scheduling ("overlap"); and `generate()` of 256 tokens at bs 1 and 8 with and without overlap
(extra["e2e"]). The floor: the bytes a step must read (weights, and
the batch's KV) over the device copy bandwidth measured in the same run.
"""
from __future__ import annotations

import time

import torch

from specdec import Engine
from specdec.bench.common import (COPY_CONVENTION, copy_bandwidth, e2e_rows, engine_step_ms,
                                  fast_weights, free, live_batch, median, step_floor, sync,
                                  time_ms)
from specdec.bench.dense import compiled_step
from specdec.engine import DTYPES
from specdec.rounds import RoundRunner

FLOOR_CONVENTION = ("bytes = weights read per step (every parameter once; an untied input "
                    "embedding counts only its bs gathered rows) + K and V of every layer for "
                    "bs * kv_tokens positions (kv_tokens: the mean context over the timed "
                    "steps); " + COPY_CONVENTION)


def _row(model, bs, impl, ms, floor_ms, **kw) -> dict:
    row = {"model": model, "bs": bs, "impl": impl, "step_ms": ms, "floor_ms": floor_ms,
           "ratio": None if ms is None else ms / floor_ms, **kw}
    shown = "failed: " + kw["error"][:60] if ms is None else f"{ms:8.3f} ms  x{row['ratio']:.2f} floor"
    print(f"{model:>9} bs={bs:<3} {impl:<12} {shown}", flush=True)
    return row


def peer_seq(context: int, warmup: int, iters: int) -> int:
    """The dense peer's KV length: it runs 1 + max(warmup - 1, 2) + iters steps from
    position `context` (_compiled_ms)."""
    return context + max(warmup, 3) + iters + 1


def _compiled_ms(step, *, bs, context, device, iters, warmup) -> tuple[float, float]:
    """Median step ms and the first call's seconds (compile + cudagraph recording)."""
    ids = torch.ones(bs, dtype=torch.int64, device=device)
    pos = torch.tensor([context], dtype=torch.int64, device=device)

    def fn():
        step(ids, pos)
        pos.add_(1)  # the next position: the KV read grows by one per step, as the engine's

    t0 = time.perf_counter()
    with torch.no_grad():  # not inference_mode: as gpt-fast runs it, what compile is tested with
        fn()
        sync(device)
        first_s = time.perf_counter() - t0
        ms = time_ms(fn, device, iters, max(warmup - 1, 2))  # >= 3 calls before timing: cudagraph trees record on the third
    return median(ms), first_s


def _cudagraph_skips() -> int:
    """How often inductor fell back from CUDA graphs so far (non-zero: "reduce-overhead" ran
    without them for some shape, so its time includes launch overhead)."""
    from torch._dynamo.utils import counters
    return int(counters["inductor"].get("cudagraph_skips", 0))


def _replay_row(decode_runner, *, model, bs, device, iters, warmup, floor_ms, common) -> dict:
    """The captured step alone, replayed back to back on the inputs the last engine step
    loaded (it rewrites the same KV slot): the GPU side of "graph", without the host's part
    of a step (inputs to the device, sampling, the sync that returns the tokens). What the
    compile peer's figure, which runs with no host round trip, compares with."""
    graph = decode_runner.graphs[decode_runner.bucket(bs)]
    ms = median(time_ms(graph.replay, device, iters, warmup))
    return _row(model, bs, "graph-replay", ms, floor_ms, **common)


def _peer_row(eng, *, model, bs, seq, context, device, iters, warmup, compile_mode,
              floor_ms, common) -> dict:
    """The torch.compile peer (or the uncompiled dense step) at batch bs."""
    impl = "compile" if compile_mode != "none" else "dense"  # "dense": uncompiled
    try:
        _, step = compiled_step(eng.target, bs, seq, compile_mode)
        ms, first_s = _compiled_ms(step, bs=bs, context=context, device=device, iters=iters,
                                   warmup=warmup)
        row = _row(model, bs, impl, ms, floor_ms, compile_mode=compile_mode,
                   first_call_s=first_s, cudagraph_skips=_cudagraph_skips(), **common)
    except Exception as exc:  # a peer that fails to compile is a result, not a crash
        row = _row(model, bs, impl, None, floor_ms, compile_mode=compile_mode,
                   error=f"{type(exc).__name__}: {exc}"[:2000], **common)
    step = None
    torch._dynamo.reset()  # drops compiled code and the cudagraph pool holding its caches
    free(device)
    return row


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int,
        iters: int, warmup: int, compile_mode: str = "reduce-overhead",
        e2e_tokens: int = 256) -> tuple[list[dict], dict]:
    bw = copy_bandwidth(device)
    print(f"copy bandwidth {bw['bytes_per_s'] / 1e9:.0f} GB/s (read + written)", flush=True)
    steps = warmup + iters
    rows, e2e_all = [], []
    for model in models:
        with fast_weights(device, DTYPES[dtype]):
            eng = Engine(model=model, spec=None, device=device, dtype=dtype,
                         max_batch=max(batch_sizes), max_context=context + steps + 8)
        runners = {"eager": eng.rounds, "graph": RoundRunner(eng, True, batch_sizes, False)}
        runners["graph"].capture_all()  # none inside a timing
        floors = {}
        for bs in batch_sizes:
            floors[bs] = step_floor(eng, bs=bs, context=context, warmup=warmup, iters=iters,
                                    bytes_per_s=bw["bytes_per_s"])
            for impl, runner in runners.items():
                eng.rounds = runner
                floor_ms, common = floors[bs]
                with live_batch(eng, bs, context) as reqs:
                    ms = median(time_ms(lambda r=runner: r.decode_step(reqs), device, iters, warmup))
                    rows.append(_row(model, bs, impl, ms, floor_ms, **common))
                    if impl == "graph":
                        rows.append(_replay_row(runner.decode_runner, model=model, bs=bs,
                                                device=device, iters=iters,
                                                warmup=warmup, floor_ms=floor_ms, common=common))
                if impl == "graph":  # the whole Engine.step(), sync and overlapped
                    for name, ov in (("engine-step", False), ("overlap", True)):
                        ms = engine_step_ms(eng, bs=bs, prompt_len=context, iters=iters,
                                            warmup=warmup, overlap=ov)
                        rows.append(_row(model, bs, name, ms, floor_ms, **common))
        # The compile peers run after every graph replay of this engine: inductor's cudagraph
        # trees clear cuBLAS workspaces around their captures, and our graphs captured GEMMs
        # that use those workspaces (a replay after that reads freed memory).
        eng.rounds = runners["eager"]
        del runners
        for bs in batch_sizes:
            floor_ms, common = floors[bs]
            rows.append(_peer_row(eng, model=model, bs=bs, seq=peer_seq(context, warmup, iters),
                                  context=context, device=device, iters=iters, warmup=warmup,
                                  compile_mode=compile_mode, floor_ms=floor_ms, common=common))
        del eng
        free(device)
        if e2e_tokens:
            def build(overlap, model=model):
                with fast_weights(device, DTYPES[dtype]):
                    eng = Engine(model=model, spec=None, device=device, dtype=dtype, max_batch=8,
                                 max_context=e2e_tokens + 64, cuda_graph=True, cuda_graph_bs=[1, 8],
                                 overlap=overlap)
                    eng.capture_graphs()  # none inside a timing
                    return eng
            e2e_all.extend(dict(model=model, **r) for r in e2e_rows(build, new_tokens=e2e_tokens))
    extra = {"e2e": e2e_all, "copy_bandwidth": bw, "floor_convention": FLOOR_CONVENTION, "context": context,
             "iters": iters, "warmup": warmup, "dtype": dtype, "statistic": "median of iters"}
    return rows, extra
