"""Rotary embedding fused with the KV store: one launch rotates q and k and writes k and v
into the paged pool, where the unfused path took a dozen elementwise launches and a store.

`rope_store_kv(q, k, v, cos, sin, positions, k_buffer, v_buffer, loc) -> q_rot`:
- `q` `[N, Hq, D]`, `k`, `v` `[N, Hkv, D]` (strided views of one fused projection are fine:
  the last dim must be contiguous); `cos`, `sin` fp32 `[max_position, D]`, both halves equal
  (`cat([freqs, freqs])`); `positions` int64 `[N]`.
- rotation (rotate-half, as transformers' Llama): in fp32, `x * cos + cat(-x2, x1) * sin`,
  rounded to x's dtype.
- `k_buffer[loc[i]] = rot(k[i])`, `v_buffer[loc[i]] = v[i]` (cast to the pool's dtype); `loc`
  int64 is read as `store_kv_cache` reads it: numel entries at stride 1 from its first element.
- returns `rot(q)`, a new contiguous `[N, Hq, D]` tensor in q's dtype.
The grid is (N, Hq + 2*Hkv): one program per head of q, k or v; shapes only (graph safe).
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

from kernels.kv_store import store_kv_cache_ref


@triton.jit
def _rope_store_kernel(
    q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, pos_ptr, kbuf_ptr, vbuf_ptr, loc_ptr, qo_ptr,
    HQ, HKV, HALF,
    stride_qr, stride_qh, stride_kr, stride_kh, stride_vr, stride_vh, stride_cos,
    stride_kbs, stride_kbh, stride_vbs, stride_vbh, stride_qor, stride_qoh,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    ok = offs < HALF
    if h < HQ + HKV:
        pos = tl.load(pos_ptr + i).to(tl.int64)
        c = tl.load(cos_ptr + pos * stride_cos + offs, mask=ok, other=0.0)
        s = tl.load(sin_ptr + pos * stride_cos + offs, mask=ok, other=0.0)
        if h < HQ:
            src = q_ptr + i * stride_qr + h * stride_qh
            dst = qo_ptr + i * stride_qor + h * stride_qoh
        else:
            slot = tl.load(loc_ptr + i).to(tl.int64)
            src = k_ptr + i * stride_kr + (h - HQ) * stride_kh
            dst = kbuf_ptr + slot * stride_kbs + (h - HQ) * stride_kbh
        x1 = tl.load(src + offs, mask=ok, other=0.0)
        x2 = tl.load(src + HALF + offs, mask=ok, other=0.0)
        x1f, x2f = x1.to(tl.float32), x2.to(tl.float32)
        o1 = (x1f * c + (-x2f) * s).to(x1.dtype)
        o2 = (x2f * c + x1f * s).to(x1.dtype)
        tl.store(dst + offs, o1.to(dst.dtype.element_ty), mask=ok)
        tl.store(dst + HALF + offs, o2.to(dst.dtype.element_ty), mask=ok)
    else:
        slot = tl.load(loc_ptr + i).to(tl.int64)
        hv = h - HQ - HKV
        src = v_ptr + i * stride_vr + hv * stride_vh
        dst = vbuf_ptr + slot * stride_vbs + hv * stride_vbh
        x1 = tl.load(src + offs, mask=ok, other=0.0)
        x2 = tl.load(src + HALF + offs, mask=ok, other=0.0)
        tl.store(dst + offs, x1.to(dst.dtype.element_ty), mask=ok)
        tl.store(dst + HALF + offs, x2.to(dst.dtype.element_ty), mask=ok)


def rope_store_kv(q, k, v, cos, sin, positions, k_buffer, v_buffer, loc):
    """Triton; see the module docstring."""
    n, hq, d = q.shape
    hkv = k.shape[1]
    assert d % 2 == 0 and k.shape == v.shape == (n, hkv, d), (q.shape, k.shape, v.shape)
    assert q.stride(2) == k.stride(2) == v.stride(2) == 1, "head dims must be contiguous"
    assert k_buffer.stride(2) == v_buffer.stride(2) == 1 and cos.stride(1) == sin.stride(1) == 1
    assert cos.stride(0) == sin.stride(0)
    out = torch.empty((n, hq, d), dtype=q.dtype, device=q.device)
    if n:
        half = d // 2
        _rope_store_kernel[(n, hq + 2 * hkv)](
            q, k, v, cos, sin, positions, k_buffer, v_buffer, loc, out,
            hq, hkv, half,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            cos.stride(0), k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0),
            v_buffer.stride(1), out.stride(0), out.stride(1),
            BLOCK=triton.next_power_of_2(half), num_warps=1,
        )
    return out


def rotate_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [N, H, D] rotated by cos/sin rows [N, 1, D] (fp32); the result in x's dtype."""
    xf = x.float()
    half = xf.shape[-1] // 2
    rotated = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)


def rope_store_kv_ref(q, k, v, cos, sin, positions, k_buffer, v_buffer, loc):
    """Plain torch, the same signature and results."""
    c, s = cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)
    q, k = rotate_ref(q, c, s), rotate_ref(k, c, s)
    store_kv_cache_ref(k_buffer, v_buffer, loc, k, v)
    return q.contiguous()
