"""A device-side exclusive prefix sum for kernels that run one program per request.

Each program sums the entries before its own (`sum_before`), so a wrapper needs no separate
cumsum launch, no host sync, and stays CUDA-graph safe. O(b) loads per program: fine for
batch-sized arrays, which is all it is used on.
"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

SUM_BLOCK = 64  # entries read per tile


@triton.jit
def sum_before(ptr, b, BLOCK: tl.constexpr):
    """sum(ptr[0:b]) as int64, read in tiles of BLOCK. A while loop: the Triton 3.6
    interpreter cannot take a program id as a range bound."""
    offs = tl.arange(0, BLOCK)
    total = tl.sum(tl.zeros([BLOCK], tl.int64), 0)
    i0 = 0
    while i0 < b:
        idx = i0 + offs
        total += tl.sum(tl.load(ptr + idx, mask=idx < b, other=0).to(tl.int64), 0)
        i0 += BLOCK
    return total
