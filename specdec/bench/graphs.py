"""`python -m specdec bench graphs`: a speculative round, eager vs CUDA graphs."""
from __future__ import annotations

import time

import torch

from specdec import Engine, SpecConfig


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def round_time(model: str, *, bs: int, cuda_graph: bool, device: str, dtype: str, spec: SpecConfig,
               new_tokens: int = 64, repeats: int = 3, prompt_len: int = 128) -> dict:
    """Seconds per speculative round: (generate(n) - generate(1)) / rounds, best of repeats."""
    eng = Engine(model=model, spec=spec, draft="eagle", device=device, dtype=dtype, max_batch=bs,
                 max_context=max(1024, prompt_len + new_tokens + 64), cuda_graph=cuda_graph,
                 cuda_graph_bs=list(range(1, bs + 1)))
    eng.capture_graphs()  # none inside a timing
    prompts = [[(7 * b + i) % 1000 + 1 for i in range(prompt_len)] for b in range(bs)]
    best = float("inf")
    for _ in range(repeats + 1):  # the first repeat warms up (Triton compiles, caches)
        _sync(device)
        t0 = time.perf_counter()
        eng.generate(prompts, max_new_tokens=1)
        _sync(device)
        t1 = time.perf_counter()
        r0 = eng.stats.rounds
        eng.generate(prompts, max_new_tokens=new_tokens)
        _sync(device)
        t2 = time.perf_counter()
        rounds = eng.stats.rounds - r0
        best = min(best, ((t2 - t1) - (t1 - t0)) / max(rounds, 1))
    return {"model": model, "bs": bs, "cuda_graph": cuda_graph, "round_ms": best * 1e3,
            "topk": spec.topk, "num_steps": spec.num_steps, "ndt": spec.ndt}


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int = 128,
        iters: int = 3, new_tokens: int = 64) -> list[dict]:
    """context: the prompt length; iters: repeats (best of); new_tokens: per generate."""
    spec = SpecConfig(topk=1, num_steps=3, num_draft_tokens=4)
    rows = []
    for model in models:
        for bs in batch_sizes:
            eager = round_time(model, bs=bs, cuda_graph=False, device=device, dtype=dtype,
                               spec=spec, new_tokens=new_tokens, repeats=iters, prompt_len=context)
            graph = round_time(model, bs=bs, cuda_graph=True, device=device, dtype=dtype,
                               spec=spec, new_tokens=new_tokens, repeats=iters, prompt_len=context)
            graph["speedup"] = eager["round_ms"] / graph["round_ms"]
            rows += [eager, graph]
            print(f"{model:>9} bs={bs:<3} eager {eager['round_ms']:8.2f} ms/round   graph "
                  f"{graph['round_ms']:8.2f} ms/round   speedup {graph['speedup']:.2f}x", flush=True)
    return rows
