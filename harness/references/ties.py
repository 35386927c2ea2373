"""Tie handling (oracle 6, docs/contract.md): near-equal top-2 logits may flip between two correct
runs; a divergence there is benign and ends the comparison, any other is a failure."""
from __future__ import annotations

import torch

# Largest top-2 logit margin that two correct runs may resolve differently, per dtype.
TIE_EPS = {torch.float32: 1e-3, torch.float16: 5e-2, torch.bfloat16: 2.5e-1}


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_greedy(out: list[int], ref: list[int], margins: list[float], dtype) -> tuple[bool, str]:
    """(ok, description). ok is False only for a divergence at a clear (non-tie) position."""
    i = first_divergence(out, ref)
    if i is None:
        return True, "identical"
    eps = TIE_EPS[dtype]
    if i < len(margins) and margins[i] < eps:
        return True, f"benign tie at output {i} (margin {margins[i]:.2e} < {eps:.0e})"
    m = margins[i] if i < len(margins) else float("nan")
    return False, (f"first divergence at output {i}: got {out[i] if i < len(out) else None}, "
                   f"expected {ref[i] if i < len(ref) else None} (reference top-2 margin {m:.3e})")
