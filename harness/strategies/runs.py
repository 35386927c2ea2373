"""Running the engine for a drawn configuration: prompts from a seed, the greedy baseline."""
from __future__ import annotations

import random
from functools import lru_cache

import torch

from harness.base.liveness import Progress
from harness.references.dense import top2_margins
from specdec import Engine
from specdec.defaults import PAGE_SIZE


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def make_prompts(seed: int, batch_size: int, vocab_size: int, max_len: int = 24,
                 min_len: int = 1) -> list[list[int]]:
    """Ragged prompts of min_len..max_len tokens, all drawn from `seed`."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in range(rng.randint(min_len, max_len))]
            for _ in range(batch_size)]


def new_token_counts(seed: int, batch_size: int, max_new_tokens: int, ragged: bool) -> list[int]:
    """max_new_tokens per request: all equal, or (ragged) drawn in 1..max_new_tokens from the
    seed, so requests finish at different rounds and the batch shrinks."""
    if not ragged:
        return [max_new_tokens] * batch_size
    rng = random.Random(seed ^ 0x5EED)
    return [rng.randint(1, max_new_tokens) for _ in range(batch_size)]


def serve(engine: Engine, prompts: list[list[int]], max_new: list[int], params) -> list:
    """Every request through add_request / step (continuous batching), all queued at once;
    returns their RequestOutputs (tokens and finish reason) in prompt order."""
    progress = Progress(engine)  # law liveness: a stall fails, named, instead of hanging
    rids = [progress.add(engine.add_request(p, n, sp))
            for p, n, sp in zip(prompts, max_new, params)]
    progress.run_to_end()
    return [engine.output(r) for r in rids]


@lru_cache(maxsize=64)
def _baseline(model: str, *, device: str, dtype: str, seed: int, page_size: int,
              prompts: tuple, max_new_tokens: int):
    context = max(512, max(map(len, prompts)) + max_new_tokens + 1)
    eng = Engine(model=model, spec=None, device=device, dtype=dtype, seed=seed, page_size=page_size,
                 max_batch=max(len(prompts), 1), max_context=context)
    outs = eng.generate([list(p) for p in prompts], max_new_tokens=max_new_tokens)
    margins = [top2_margins(eng.target, list(p), o, eng.device) for p, o in zip(prompts, outs)]
    return outs, margins


def greedy_baseline(model: str, *, prompts: list[list[int]], max_new_tokens: int, device: str,
                    dtype: str = "float32", seed: int = 0, page_size: int = PAGE_SIZE):
    """(outputs, reference top-2 margins) of plain greedy decoding with spec=None."""
    return _baseline(model, device=device, dtype=dtype, seed=seed, page_size=page_size,
                     prompts=tuple(map(tuple, prompts)), max_new_tokens=max_new_tokens)
