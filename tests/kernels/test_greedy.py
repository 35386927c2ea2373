"""The greedy argmax kernel == torch.argmax bit for bit: ties to the first index, NaN above
every number, -inf rows, strided rows, several blocks a row; bad input named."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.greedy import _BLOCK, argmax, argmax_ref

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# The Triton interpreter computes bf16 wrongly, so bf16 is only drawn on a GPU.
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0]


@settings(deadline=None, max_examples=60)
@given(rows=st.integers(0, 4), vocab=st.sampled_from([1, 7, _BLOCK - 1, _BLOCK, _BLOCK + 1,
                                                      2 * _BLOCK + 300]),
       dtype=st.sampled_from(DTYPES), levels=st.sampled_from([3, 1000]),
       specials=st.lists(st.tuples(st.integers(0, 10**9), st.sampled_from(SPECIAL)), max_size=6),
       strided=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_argmax_equals_torch(rows, vocab, dtype, levels, specials, strided, seed):
    """Few value levels make ties across blocks; specials put NaN, +-inf and signed zeros
    anywhere, the first NaN or the first tied maximum in any block."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-levels, levels, (rows, vocab * (2 if strided else 1)), generator=g).float()
    for pos, value in specials:
        if rows:
            x.view(-1)[pos % x.numel()] = value
    x = x.to(DEVICE, dtype)
    if strided:
        x = x[:, ::2]
    got = argmax(x)
    assert got.dtype == torch.int64 and got.device == x.device
    assert torch.equal(got, argmax_ref(x)), (got, argmax_ref(x))


@pytest.mark.parametrize("bad, match", [
    (torch.zeros(5), r"must be \[rows, vocab\], got shape \(5,\)"),
    (torch.zeros(2, 5, dtype=torch.int64), "dtype torch.int64 is not supported"),
    (torch.zeros(2, 0), "empty vocabulary"),
])
def test_bad_logits_are_named(bad, match):
    for fn in (argmax, argmax_ref):
        with pytest.raises(ValueError, match=match):
            fn(bad.to(DEVICE))
