"""Greedy token choice: the argmax of each row of logits, in two short launches.

`argmax(logits)`: `logits` `[R, V]` (float32, float16 or bfloat16) -> int64 `[R]`, each row's
index of its largest value, the first one on ties, with NaN larger than every number (the
first NaN wins): torch.argmax's rule, bit for bit.

Why not torch.argmax: over one row of a 128k vocabulary it is one reduction of about 27 us on
an H100/H200, a decode step's single longest kernel after the GEMMs and attention
(bench/results/decode-tp2-llama8b-h200x2-2026-11-26.json). Here each row is cut into blocks of
BLOCK, one program each writes its block's (NaN seen, largest value, first index of it), and a
second kernel reduces those per row by the same rule. Both grids depend only on the shape, so
the pair is CUDA-graph safe.
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

_BLOCK = 4096
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit(do_not_specialize=("vocab", "stride_r", "num_blocks"))
def _block_argmax_kernel(x_ptr, pnan_ptr, pval_ptr, pidx_ptr, vocab, stride_r, num_blocks,
                         BLOCK: tl.constexpr):
    """Grid (R, num_blocks): block b of row r -> its partial at [r, b]."""
    r = tl.program_id(0).to(tl.int64)
    b = tl.program_id(1)
    offs = b * BLOCK + tl.arange(0, BLOCK)
    ok = offs < vocab
    x = tl.load(x_ptr + r * stride_r + offs, mask=ok, other=float("-inf")).to(tl.float32)
    nan = (x != x) & ok
    has_nan = tl.max(nan.to(tl.int32), axis=0)
    best = tl.max(tl.where(nan, float("-inf"), x), axis=0)
    # The first NaN where there is one, else the first index holding the block's largest value.
    hit = tl.where(has_nan > 0, nan, ok & (x == best))
    idx = tl.min(tl.where(hit, offs, vocab), axis=0)
    part = r * num_blocks + b
    tl.store(pnan_ptr + part, has_nan)
    tl.store(pval_ptr + part, best)
    tl.store(pidx_ptr + part, idx)


@triton.jit(do_not_specialize=("vocab", "num_blocks"))
def _combine_argmax_kernel(pnan_ptr, pval_ptr, pidx_ptr, out_ptr, vocab, num_blocks,
                           BLOCK_B: tl.constexpr):
    """Grid (R,): a row's partials (blocks in index order) -> its argmax."""
    r = tl.program_id(0).to(tl.int64)
    bs = tl.arange(0, BLOCK_B)
    ok = bs < num_blocks
    nan = tl.load(pnan_ptr + r * num_blocks + bs, mask=ok, other=0)
    val = tl.load(pval_ptr + r * num_blocks + bs, mask=ok, other=float("-inf"))
    idx = tl.load(pidx_ptr + r * num_blocks + bs, mask=ok, other=vocab)
    has_nan = tl.max(nan, axis=0)
    best = tl.max(val, axis=0)
    hit = tl.where(has_nan > 0, nan > 0, ok & (val == best))
    tl.store(out_ptr + r, tl.min(tl.where(hit, idx, vocab), axis=0).to(tl.int64))


def _check(logits: torch.Tensor) -> None:
    if logits.dim() != 2:
        raise ValueError(f"argmax: logits must be [rows, vocab], got shape {tuple(logits.shape)}")
    if logits.dtype not in _DTYPES:
        raise ValueError(f"argmax: logits dtype {logits.dtype} is not supported; expected one "
                         f"of {list(_DTYPES)}")
    if logits.shape[1] == 0:
        raise ValueError("argmax: an empty vocabulary (logits of shape "
                         f"{tuple(logits.shape)}) has no argmax")


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """Triton; see the module docstring."""
    _check(logits)
    rows, vocab = logits.shape
    out = torch.empty(rows, dtype=torch.int64, device=logits.device)
    if rows == 0:
        return out
    x = logits if logits.stride(1) == 1 else logits.contiguous()
    nb = triton.cdiv(vocab, _BLOCK)
    pnan = torch.empty((rows, nb), dtype=torch.int32, device=x.device)
    pval = torch.empty((rows, nb), dtype=torch.float32, device=x.device)
    pidx = torch.empty((rows, nb), dtype=torch.int32, device=x.device)
    _block_argmax_kernel[(rows, nb)](x, pnan, pval, pidx, vocab, x.stride(0), nb,
                                     BLOCK=_BLOCK, num_warps=8)
    _combine_argmax_kernel[(rows,)](pnan, pval, pidx, out, vocab, nb,
                                    BLOCK_B=max(16, triton.next_power_of_2(nb)), num_warps=1)
    return out


def argmax_ref(logits: torch.Tensor) -> torch.Tensor:
    """Plain torch, the same signature and results."""
    _check(logits)
    return torch.argmax(logits, dim=-1)
