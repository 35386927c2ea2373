"""The final-draw law shared by the sampling kernels' tests (tree and chain)."""
from __future__ import annotations

import numpy as np


def check_final_token(tok, r, coin, vocab, q=None):
    """tok is the fixed-point draw of coin from r (float64 residual of fp32 rows); q, the
    target row: an empty residual falls back to the last token it supports (else 0)."""
    assert 0 <= tok < vocab
    total = r.sum()
    if total == 0:
        support = [] if q is None else np.nonzero(np.asarray(q) > 0)[0].tolist()
        assert tok == (support[-1] if support else 0)
        return
    assert r[tok] > 0
    tol = (vocab + 4) * 2.0**-40  # fixed-point quantisation of the kernel (2^-40 per entry)
    u = min(float(coin), 1.0) * total
    assert r[:tok].sum() <= u + tol and r[: tok + 1].sum() >= u - tol
