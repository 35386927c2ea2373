"""`python -m specdec bench prefix`: a shared system prompt served with and without the radix
prefix cache, through the public API (add_request / step). One request computes the shared
prefix first (a cache is only filled by finished requests); then the others arrive at once.
Reported per setting: tokens run through the target prefill, prefix hits, and the time to
first token of the requests that arrive after the first one."""
from __future__ import annotations

import random
import statistics
import time

import torch

from specdec import Engine, SpecConfig
from specdec.bench.common import fast_weights
from specdec.config import model_config
from specdec.engine import DTYPES


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _ttft(eng: Engine, prompts: list[list[int]], new_tokens: int, device: str) -> list[float]:
    """Seconds from submission to the step that returned each request's first token."""
    _sync(device)
    t0 = time.perf_counter()
    rids = [eng.add_request(p, new_tokens) for p in prompts]
    first: dict[int, float] = {}
    while eng.has_unfinished():
        eng.step()
        _sync(device)
        now = time.perf_counter() - t0
        for r in rids:
            if r not in first and eng.output(r).tokens:
                first[r] = now
    return [first[r] for r in rids]


def serve(model: str, *, device: str, dtype: str, cache: bool, prefix: list[int],
          suffixes: list[list[int]], new_tokens: int, seed: int) -> dict:
    spec = SpecConfig(topk=1, num_steps=3, num_draft_tokens=4)
    context = len(prefix) + max(map(len, suffixes)) + new_tokens + 16
    with fast_weights(device, DTYPES[dtype]):  # seeded random weights drawn on the device
        eng = Engine(model=model, spec=spec, draft="eagle", device=device, dtype=dtype,
                     seed=seed, max_batch=len(suffixes), max_context=context,
                     prefix_cache=cache)
        eng.capture_graphs()  # none inside a timing
    for _ in range(2):  # the first pass warms up (kernels compiled for these shapes)
        eng.flush_prefix_cache()  # an empty tree: the pass starts cold
        base_prefill, base_hits = eng.stats.prefill_tokens, eng.stats.prefix_hit_tokens
        first = _ttft(eng, [prefix + suffixes[0]], new_tokens, device)
        rest = _ttft(eng, [prefix + s for s in suffixes[1:]], new_tokens, device)
    eng.flush_prefix_cache()
    eng.check_accounting([])  # nothing leaked
    row = {"model": model, "prefix_cache": cache, "requests": len(suffixes),
           "prefix_tokens": len(prefix), "suffix_tokens": len(suffixes[0]),
           "prefill_tokens": eng.stats.prefill_tokens - base_prefill,
           "prefix_hit_tokens": eng.stats.prefix_hit_tokens - base_hits,
           "first_ttft_ms": first[0] * 1e3,
           "ttft_ms_mean": statistics.mean(rest) * 1e3, "ttft_ms_max": max(rest) * 1e3}
    del eng
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int = 1024,
        iters: int = 1, new_tokens: int = 8, suffix: int = 32, seed: int = 0) -> list[dict]:
    """batch_sizes: requests sharing the prefix; context: the shared prefix's tokens."""
    rows = []
    for model in models:
        for n in batch_sizes:
            rng, vocab = random.Random(seed), min(1000, model_config(model).vocab_size)
            prefix = [rng.randrange(1, vocab) for _ in range(context)]
            suffixes = [[rng.randrange(1, vocab) for _ in range(suffix)] for _ in range(n)]
            pair = [serve(model, device=device, dtype=dtype, cache=c, prefix=prefix,
                          suffixes=suffixes, new_tokens=new_tokens, seed=seed)
                    for c in (False, True)]
            off, on = pair
            on["prefill_saved"] = 1 - on["prefill_tokens"] / off["prefill_tokens"]
            on["ttft_speedup"] = off["ttft_ms_mean"] / on["ttft_ms_mean"]
            rows += pair
            print(f"{model:>9} {n} requests, {context}-token prefix: prefill tokens "
                  f"{off['prefill_tokens']} -> {on['prefill_tokens']} "
                  f"({on['prefill_saved']:.1%} saved), mean TTFT {off['ttft_ms_mean']:.1f} -> "
                  f"{on['ttft_ms_mean']:.1f} ms ({on['ttft_speedup']:.2f}x)", flush=True)
    return rows
