"""Write the K/V of the current forward into a KV pool layer: `k_buffer[loc[i]] = k[i]`.

See docs/kernels.md (store_kv_cache). Each Triton program copies one block of one row, for K
and V at once. The grid depends on shapes only, so the wrapper is CUDA-graph safe.
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl


@triton.jit
def _store_kv_kernel(
    kbuf_ptr, vbuf_ptr, loc_ptr, k_ptr, v_ptr,
    row_len, stride_kbuf, stride_vbuf, stride_k, stride_v,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < row_len
    slot = tl.load(loc_ptr + i).to(tl.int64)
    k = tl.load(k_ptr + i * stride_k + offs, mask=ok)
    v = tl.load(v_ptr + i * stride_v + offs, mask=ok)
    # tl.store casts to the buffer's dtype, so k/v may come in a wider dtype than the pool.
    tl.store(kbuf_ptr + slot * stride_kbuf + offs, k, mask=ok)
    tl.store(vbuf_ptr + slot * stride_vbuf + offs, v, mask=ok)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """View [N, ...] as [N, F]; rows must be contiguous inside (a pool layer always is)."""
    return x.reshape(x.shape[0], -1)


def store_kv_cache(k_buffer, v_buffer, loc, k, v):
    """Triton: `k_buffer[loc] = k`, `v_buffer[loc] = v` (in place)."""
    n = loc.shape[0]
    if n == 0:
        return
    kb, vb = _rows(k_buffer), _rows(v_buffer)
    for full, flat in ((k_buffer, kb), (v_buffer, vb)):
        assert flat.data_ptr() == full.data_ptr() and flat.stride(1) == 1, \
            "KV buffers must be viewable as [S, F] without a copy"
    k2, v2 = _rows(k), _rows(v)
    row_len = kb.shape[1]
    assert vb.shape[1] == row_len and k2.shape[1] == row_len and v2.shape[1] == row_len
    if k2.stride(1) != 1:
        k2 = k2.contiguous()
    if v2.stride(1) != 1:
        v2 = v2.contiguous()
    block = min(triton.next_power_of_2(row_len), 1024)
    _store_kv_kernel[(n, triton.cdiv(row_len, block))](
        kb, vb, loc, k2, v2, row_len, kb.stride(0), vb.stride(0), k2.stride(0), v2.stride(0),
        BLOCK=block,
    )


def store_kv_cache_ref(k_buffer, v_buffer, loc, k, v):
    """Plain torch: indexed assignment. `loc` is read as the kernel reads it, numel entries
    at stride 1 from its first element, so a strided view misbehaves here exactly as on the
    GPU (the CPU tier must not hide a contiguity bug)."""
    loc = loc.as_strided((loc.numel(),), (1,))
    k_buffer[loc] = k.to(k_buffer.dtype)
    v_buffer[loc] = v.to(v_buffer.dtype)
