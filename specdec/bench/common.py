"""What the benches share: timing, copy bandwidth, fast random weights, a live batch."""
from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time

import torch

from specdec.request import Req


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def free(device) -> None:
    """Give back a dropped engine's memory before the next one is built (8B: 16 GB)."""
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def time_ms(fn, device, iters: int, warmup: int) -> list[float]:
    """Milliseconds of each of `iters` calls of fn, after `warmup` untimed calls. CUDA events
    bracket each call (GPU timeline, host launch gaps included); perf_counter on CPU."""
    for _ in range(warmup):
        fn()
    sync(device)
    if torch.device(device).type != "cuda":
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
           for _ in range(iters)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in evs]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


COPY_CONVENTION = ("copy_bw = (bytes read + bytes written) / time of dst.copy_(src), i.e. "
                   "2 * nbytes / t (the STREAM 'copy' convention); floor_ms = bytes one step "
                   "must read / copy_bw")


def copy_bandwidth(device, nbytes: int | None = None, iters: int = 10) -> dict:
    """Device-to-device copy bandwidth in bytes/s, measured now (median of iters)."""
    cuda = torch.device(device).type == "cuda"
    nbytes = nbytes or (2 << 30 if cuda else 64 << 20)  # well past any cache
    ms = _copy_ms(device, nbytes, iters)
    free(device)  # the 2 x nbytes buffers died with _copy_ms
    return {"bytes": nbytes, "ms": ms, "bytes_per_s": 2 * nbytes / (ms * 1e-3),
            "convention": COPY_CONVENTION}


def _copy_ms(device, nbytes: int, iters: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    return median(time_ms(lambda: dst.copy_(src), device, iters, warmup=2))


@contextlib.contextmanager
def fast_weights(device, dtype: torch.dtype):
    """Build models directly on `device` in `dtype`, with random weights drawn there.

    The engine's seeded init draws every weight on the CPU in fp32 (llama-8b: 32 GB and
    minutes on one core). Timings do not depend on the values, so the bench swaps in the same
    scales drawn on the device (a different seeded stream: tokens differ from an engine built
    without this). Patches specdec.build's names for the duration only."""
    import specdec.build as build_mod
    from specdec.model.llama import LlamaModel

    def build(cfg):
        prev = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                return LlamaModel(cfg)
        finally:
            torch.set_default_dtype(prev)

    @torch.no_grad()
    def init(module, seed: int, head_scale: float = 4.0) -> None:
        gen = None
        for name, p in sorted(module.named_parameters()):
            if gen is None:
                gen = torch.Generator(device=p.device).manual_seed(seed)
            if name.endswith("norm.weight") or "layernorm" in name:
                p.normal_(1.0, 0.1, generator=gen)
            elif name.endswith("embed_tokens.weight"):
                p.normal_(0.0, 1.0, generator=gen)
            else:
                scale = (head_scale if name.endswith("lm_head.weight") else 1.0) / math.sqrt(p.shape[-1])
                p.normal_(0.0, scale, generator=gen)

    saved = build_mod.LlamaModel, build_mod.init_weights
    build_mod.LlamaModel, build_mod.init_weights = build, init
    try:
        yield
    finally:
        build_mod.LlamaModel, build_mod.init_weights = saved


def prompts(bs: int, length: int, vocab: int) -> list[list[int]]:
    return [[(7 * b + 13 * i) % (vocab - 1) + 1 for i in range(length)] for b in range(bs)]


@contextlib.contextmanager
def live_batch(engine, bs: int, prompt_len: int):
    """bs admitted and prefilled requests, to drive `engine.rounds` step by step (what
    generate() does, minus its loop); released on exit."""
    reqs = [Req(i, p, 1 << 30) for i, p in enumerate(prompts(bs, prompt_len, engine.cfg.vocab_size))]
    try:
        with torch.inference_mode():
            for r in reqs:
                engine.memory.admit(r)
            engine.rounds.prefill(reqs)
            yield reqs
    finally:
        for r in reqs:
            if r.row > 0 or r.pages:
                engine.memory.release(r)


def weight_bytes(model, bs: int) -> int:
    """Bytes of weights one decode step reads: every parameter once, except an untied input
    embedding table, of which only the bs gathered rows are read (a tied one is the LM head,
    read whole)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if model.lm_head is not None:
        w = model.embed_tokens.weight
        total -= (w.shape[0] - bs) * w.shape[1] * w.element_size()
    return total


def kv_bytes(cfg, tokens: float, dtype: torch.dtype) -> float:
    """K and V of every layer for `tokens` positions."""
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * tokens * torch.finfo(dtype).bits / 8


def step_floor(engine, *, bs: int, context: int, warmup: int, iters: int, bytes_per_s: float,
               ranks: int = 1) -> tuple[float, dict]:
    """One decode step's floor in ms on a rank of `ranks`, and its bytes: the weights the
    rank holds (engine.target: its shard) and its KV heads' share of the KV of bs * the mean
    context over `warmup` then `iters` timed steps from `context`, over the copy bandwidth."""
    kv_tokens = context + warmup + (iters + 1) / 2
    wb = weight_bytes(engine.target, bs)
    kb = kv_bytes(engine.cfg, bs * kv_tokens, engine.dtype) / ranks
    return (wb + kb) / bytes_per_s * 1e3, {"weight_bytes": wb, "kv_bytes": kb,
                                           "context": context}


def engine_step_ms(engine, *, bs: int, prompt_len: int, iters: int, warmup: int,
                   overlap: bool) -> float:
    """Median-free steady state of `Engine.step()`: bs requests admitted and prefilled, then
    `warmup` steps, then the mean wall ms of `iters` back-to-back steps (one sync at each end:
    with overlap, the host's step i+1 runs while the GPU runs step i). The engine's scheduler
    is swapped for a fresh one in the asked mode; the requests are aborted afterwards."""
    from specdec.scheduler import Scheduler
    engine.overlap, engine.scheduler = overlap, Scheduler(engine)
    from specdec.validate import reserve_margin
    new = engine.max_context - prompt_len - reserve_margin(engine.spec, engine.page_size, True)
    if new < warmup + iters + 2:
        raise ValueError(f"max_context {engine.max_context} leaves {new} new tokens: need "
                         f"{warmup + iters + 2} for {warmup} + {iters} steps")
    rids = [engine.add_request(p, new) for p in prompts(bs, prompt_len, engine.cfg.vocab_size)]
    with torch.inference_mode():
        for _ in range(1 + warmup):  # the first step admits and prefills
            engine.step()
        sync(engine.device)
        t0 = time.perf_counter()
        for _ in range(iters):
            engine.step()
        sync(engine.device)
        ms = (time.perf_counter() - t0) * 1e3 / iters
        for rid in rids:
            if rid in engine.scheduler.live:
                engine.abort(rid)
        engine.scheduler.drain()
    engine.overlap, engine.scheduler = False, Scheduler(engine)
    return ms


def e2e_rows(build, batch_sizes=(1, 8), new_tokens: int = 256, prompt_len: int = 32) -> list:
    """`generate()` of `new_tokens` tokens per request at each batch size, with and without
    overlap, on engines from `build(overlap)`: tokens per second (wall, one warm-up call)."""
    rows = []
    for overlap in (False, True):
        eng = build(overlap)
        for bs in batch_sizes:
            ps = prompts(bs, prompt_len, eng.cfg.vocab_size)
            eng.generate(ps, max_new_tokens=8)  # warm-up: allocator, kernels, caches
            sync(eng.device)
            t0 = time.perf_counter()
            outs = eng.generate(ps, max_new_tokens=new_tokens)
            sync(eng.device)
            s = time.perf_counter() - t0
            toks = sum(map(len, outs))
            rows.append({"bs": bs, "overlap": overlap, "new_tokens": new_tokens,
                         "seconds": s, "tokens_per_s": toks / s})
            print(f"  e2e generate bs={bs:<2} overlap={overlap!s:<5} {toks / s:9.1f} tok/s",
                  flush=True)
        del eng
        free("cuda" if torch.cuda.is_available() else "cpu")
    return rows
