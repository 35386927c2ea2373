"""The fused layer kernels (norm, SwiGLU activation, RoPE + KV store): Triton == torch
reference, and each reference == the unfused statement of its law."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.activation import silu_mul, silu_mul_ref
from kernels.norm import rms_norm, rms_norm_ref
from kernels.rope import rope_store_kv, rope_store_kv_ref

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# The Triton interpreter computes bf16 wrongly, so bf16 is only drawn on a GPU.
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _close(a, b, dtype):
    torch.testing.assert_close(a.float(), b.float(), atol=TOL[dtype], rtol=TOL[dtype])


def _randn(shape, g, dtype, scale=1.0):
    return (scale * torch.randn(shape, generator=g)).to(DEVICE, dtype)


@settings(deadline=None)
@given(rows=st.integers(0, 9), hidden=st.sampled_from([8, 64, 96, 320, 2048]),
       residual=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_rms_norm_matches_reference(rows, hidden, residual, dtype, seed):
    """norm(x [+ residual]) and the summed stream agree; the reference is transformers' law."""
    g = torch.Generator().manual_seed(seed)
    x, w = _randn((rows, hidden), g, dtype, 3.0), _randn((hidden,), g, dtype)
    res = _randn((rows, hidden), g, dtype) if residual else None
    out, ref = rms_norm(x, w, 1e-5, res), rms_norm_ref(x, w, 1e-5, res)
    if residual:
        (out, total), (ref, ref_total) = out, ref
        assert torch.equal(total, ref_total) and torch.equal(ref_total, x + res)
    _close(out, ref, dtype)
    h = (x + res if residual else x).double()
    law = w.double() * h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
    _close(ref, law, dtype)


@settings(deadline=None)
@given(rows=st.integers(0, 9), inter=st.sampled_from([4, 64, 1000, 1408]),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_silu_mul_matches_reference(rows, inter, dtype, seed):
    """silu(gate) * up on the fused [gate | up] projection."""
    g = torch.Generator().manual_seed(seed)
    x = _randn((rows, 2 * inter), g, dtype, 3.0)
    out = silu_mul(x)
    assert out.shape == (rows, inter) and out.dtype == dtype
    _close(out, silu_mul_ref(x), dtype)
    _close(silu_mul_ref(x), F.silu(x[:, :inter].double()) * x[:, inter:].double(), dtype)


def _tables(max_pos, d, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    f = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
    emb = torch.cat([f, f], -1)
    return emb.cos().to(DEVICE, dtype), emb.sin().to(DEVICE, dtype)


@settings(deadline=None)
@given(n=st.integers(0, 9), hkv=st.sampled_from([1, 2]), group=st.sampled_from([1, 4]),
       d=st.sampled_from([16, 64, 96]), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**31 - 1))
def test_rope_store_matches_reference(n, hkv, group, d, dtype, seed):
    """Rotated q comes back; rotated k and raw v land at `loc` (as strided views of one fused
    projection); no other slot changes."""
    g = torch.Generator().manual_seed(seed)
    hq, slots = hkv * group, 3 * n + 4
    qkv = _randn((n, (hq + 2 * hkv) * d), g, dtype)
    q = qkv[:, :hq * d].view(n, hq, d)
    k = qkv[:, hq * d:(hq + hkv) * d].view(n, hkv, d)
    v = qkv[:, (hq + hkv) * d:].view(n, hkv, d)
    cos, sin = _tables(64, d, dtype)
    pos = torch.randint(0, 64, (n,), generator=g).to(DEVICE)
    loc = (torch.randperm(slots - 1, generator=g)[:n] + 1).to(DEVICE)
    bufs = [_randn((slots, hkv, d), g, dtype) for _ in range(4)]
    kb, vb, kr, vr = bufs[0], bufs[1], bufs[0].clone(), bufs[1].clone()
    out = rope_store_kv(q, k, v, cos, sin, pos, kb, vb, loc)
    ref = rope_store_kv_ref(q, k, v, cos, sin, pos, kr, vr, loc)
    assert out.shape == (n, hq, d) and out.is_contiguous()
    _close(out, ref, dtype)
    _close(kb, kr, dtype)
    assert torch.equal(vb, vr) and torch.equal(vb[loc], v)
    # The law: rotate-half at each row's position.
    c, s = cos[pos].double()[:, None], sin[pos].double()[:, None]
    half = d // 2
    kd = k.double()
    law = kd * c + torch.cat([-kd[..., half:], kd[..., :half]], -1) * s
    _close(kr[loc], law, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_store_reads_loc_at_stride_one(dtype):
    """Like store_kv_cache: a strided loc view is read as numel entries from its start."""
    cos, sin = _tables(8, 16, dtype)
    q = torch.randn(2, 1, 16, device=DEVICE).to(dtype)
    k, v = q.clone(), q.clone()
    loc = torch.tensor([[1, 5], [2, 6]], device=DEVICE)[:, 0]  # a view: 1, 2 at stride 2
    pos = torch.zeros(2, dtype=torch.int64, device=DEVICE)
    for fn in (rope_store_kv, rope_store_kv_ref):
        kb = torch.zeros(8, 1, 16, device=DEVICE, dtype=dtype)
        vb = torch.zeros_like(kb)
        fn(q, k, v, cos, sin, pos, kb, vb, loc)
        assert torch.equal(vb[1], v[0]) and torch.equal(vb[5], v[1]) and (vb[2] == 0).all()
