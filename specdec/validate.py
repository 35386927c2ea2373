"""Input validation: every bad value gets an error that names it and what is allowed."""
from __future__ import annotations

import operator

import torch

from specdec.config import SpecConfig


def reserve_margin(spec: SpecConfig | None, page_size: int, overlap: bool = False) -> int:
    """Positions past the committed length that one step may reserve (contract section 4).
    Overlap (section 10): a request that finished in a round still runs the next one, whose
    reservation assumes every draft of the finishing round accepted: one round more."""
    extra = (1 if spec is None else spec.ndt) if overlap else 0
    if spec is None:
        return 1 + extra
    npb = -(-(page_size - 1 + spec.num_steps) // page_size)
    return max(spec.ndt + 1, 1 + spec.topk * npb * page_size) + 1 + extra


def _token_id(t) -> int | None:
    """t as an int if it is an integer (Python, NumPy, a one-element integer tensor: what
    implements __index__), else None. Bools are flags, not token ids (NumPy's have no
    __index__; Python's and torch's do)."""
    if isinstance(t, bool) or (isinstance(t, torch.Tensor) and t.dtype == torch.bool):
        return None
    try:
        return operator.index(t)
    except TypeError:
        return None


def check_prompts(prompts, *, vocab_size: int, max_batch: int, max_new_tokens: int,
                  max_context: int, margin: int) -> None:
    if not isinstance(prompts, (list, tuple)) or len(prompts) == 0:
        raise ValueError("empty batch: generate() needs at least one prompt")
    if len(prompts) > max_batch:
        raise ValueError(f"{len(prompts)} prompts exceed the engine's max_batch={max_batch}")
    for i, p in enumerate(prompts):
        check_prompt(p, vocab_size=vocab_size, max_new_tokens=max_new_tokens,
                     max_context=max_context, margin=margin, name=f"prompt {i}")


def check_prompt(p, *, vocab_size: int, max_new_tokens: int, max_context: int, margin: int,
                 name: str = "prompt") -> None:
    """One request's prompt and length (generate() and add_request())."""
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} must be an integer >= 1")
    if len(p) == 0:
        raise ValueError(f"{name} is empty: every prompt needs at least one token")
    for j, t in enumerate(p):
        tid = _token_id(t)
        if tid is None:  # int(t) would truncate 1.5 to 1 and run a prompt nobody wrote
            raise ValueError(f"{name} token {j} = {t!r} ({type(t).__name__}) is not a token "
                             f"id: token ids are integers in [0, {vocab_size})")
        if not 0 <= tid < vocab_size:
            raise ValueError(f"{name} token {j} = {t} is outside the vocabulary "
                             f"[0, {vocab_size})")
    need = len(p) + max_new_tokens + margin
    if need > max_context:
        raise ValueError(
            f"{name} has {len(p)} tokens; with max_new_tokens={max_new_tokens} and "
            f"{margin} positions of speculative headroom it needs a context of {need}, "
            f"more than max_context={max_context}")
