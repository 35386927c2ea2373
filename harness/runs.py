"""Running the engine for a drawn configuration: prompts from a seed, the greedy baseline."""
from __future__ import annotations

import random
from functools import lru_cache

import torch

from harness.reference import top2_margins
from specdec import Engine


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def make_prompts(seed: int, batch_size: int, vocab_size: int, max_len: int = 24) -> list[list[int]]:
    """Ragged prompts of 1..max_len tokens, all drawn from `seed`."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in range(rng.randint(1, max_len))]
            for _ in range(batch_size)]


@lru_cache(maxsize=64)
def _baseline(model: str, device: str, dtype: str, seed: int, page_size: int,
              prompts: tuple, max_new_tokens: int):
    eng = Engine(model=model, spec=None, device=device, dtype=dtype, seed=seed, page_size=page_size,
                 max_batch=max(len(prompts), 1))
    outs = eng.generate([list(p) for p in prompts], max_new_tokens=max_new_tokens)
    margins = [top2_margins(eng.target, list(p), o, eng.device) for p, o in zip(prompts, outs)]
    return outs, margins


def greedy_baseline(model: str, prompts: list[list[int]], max_new_tokens: int, device: str,
                    dtype: str = "float32", seed: int = 0, page_size: int = 1):
    """(outputs, reference top-2 margins) of plain greedy decoding with spec=None."""
    return _baseline(model, device, dtype, seed, page_size, tuple(map(tuple, prompts)), max_new_tokens)
