"""paged_attention's `rope` (decode rows: rotate q and k, store the new K/V, attend, in one
launch) == rope_store_kv then paged_attention, Triton and reference alike, split or not."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.attention import paged_attention, paged_attention_ref
from kernels.rope import rope_store_kv

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# The Triton interpreter computes bf16 wrongly, so bf16 is only drawn on a GPU.
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _tables(max_pos: int, d: int):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos().float().to(DEVICE), emb.sin().float().to(DEVICE)


def _decode_batch(data, dtype):
    """Rows of distinct requests, each with its pages, its last position new (its slot holds
    garbage until the call stores it)."""
    rows = data.draw(st.integers(1, 4), label="rows")
    hkv = data.draw(st.sampled_from([1, 2]), label="hkv")
    hq = hkv * data.draw(st.sampled_from([1, 2, 4]), label="group")
    d = data.draw(st.sampled_from([16, 32]), label="head_dim")
    page_size = data.draw(st.sampled_from([1, 4, 16]), label="page_size")
    max_kv = data.draw(st.integers(1, 80), label="max_kv")
    kv_len = data.draw(st.lists(st.integers(1, max_kv), min_size=rows, max_size=rows), label="kv_len")
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    pages_per_row = -(-max_kv // page_size)
    num_pages = 1 + rows * pages_per_row
    page_table = (1 + torch.randperm(num_pages - 1, generator=g)).view(rows, pages_per_row)
    slots = num_pages * page_size
    k_buf = torch.randn(slots, hkv, d, generator=g).to(DEVICE, dtype)
    v_buf = torch.randn(slots, hkv, d, generator=g).to(DEVICE, dtype)
    last = torch.tensor(kv_len) - 1
    wloc = page_table[torch.arange(rows), last // page_size] * page_size + last % page_size
    k_buf[wloc.to(DEVICE)] = 1e4  # garbage where the new K/V goes
    v_buf[wloc.to(DEVICE)] = -1e4
    q = torch.randn(rows, hq, d, generator=g).to(DEVICE, dtype)
    k = torch.randn(rows, hkv, d, generator=g).to(DEVICE, dtype)
    v = torch.randn(rows, hkv, d, generator=g).to(DEVICE, dtype)
    cos, sin = _tables(max_kv + 4, d)
    dev = lambda t, dt=None: t.to(DEVICE, dt) if dt else t.to(DEVICE)  # noqa: E731
    attn = (dev(page_table, torch.int32), dev(torch.arange(rows), torch.int32),
            dev(torch.tensor(kv_len), torch.int32), dev(torch.zeros(rows), torch.int32),
            dev(torch.full((rows,), -1)), dev(torch.ones(1, dtype=torch.bool)), page_size,
            d ** -0.5)
    rope = (k, v, cos, sin, dev(last), dev(wloc))
    return q, k_buf, v_buf, attn, rope


def _close(a, b, dtype):
    torch.testing.assert_close(a.float(), b.float(), atol=TOL[dtype], rtol=TOL[dtype])


@settings(deadline=None, max_examples=40)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), num_splits=st.sampled_from([None, 1, 2, 3]))
def test_fused_rope_equals_rope_store_then_attention(data, dtype, num_splits):
    """Output and the pool after the call: fused Triton == unfused Triton == fused reference."""
    q, k_buf, v_buf, attn, rope = _decode_batch(data, dtype)
    k, v, cos, sin, pos, wloc = rope
    kb_u, vb_u = k_buf.clone(), v_buf.clone()
    q_rot = rope_store_kv(q, k, v, cos, sin, pos, kb_u, vb_u, wloc)
    want = paged_attention(q_rot, kb_u, vb_u, *attn, num_splits=num_splits)
    kb_f, vb_f = k_buf.clone(), v_buf.clone()
    got = paged_attention(q, kb_f, vb_f, *attn, num_splits=num_splits, rope=rope)
    _close(got, want, dtype)
    _close(kb_f, kb_u, dtype)
    assert torch.equal(vb_f, vb_u)
    kb_r, vb_r = k_buf.clone(), v_buf.clone()
    ref = paged_attention_ref(q, kb_r, vb_r, *attn, rope=rope)
    _close(got, ref, dtype)
    _close(kb_r, kb_f, dtype)


def test_rope_shapes_are_checked():
    q = torch.zeros(2, 2, 16, device=DEVICE)
    kb = torch.zeros(8, 1, 16, device=DEVICE)
    attn = (torch.zeros(2, 1, dtype=torch.int32, device=DEVICE),
            torch.arange(2, dtype=torch.int32, device=DEVICE),
            torch.ones(2, dtype=torch.int32, device=DEVICE),
            torch.zeros(2, dtype=torch.int32, device=DEVICE),
            torch.full((2,), -1, device=DEVICE), torch.ones(1, dtype=torch.bool, device=DEVICE),
            4, 0.25)
    cos = torch.zeros(8, 16, device=DEVICE)
    bad = (torch.zeros(2, 2, 16, device=DEVICE), torch.zeros(2, 2, 16, device=DEVICE), cos, cos,
           torch.zeros(2, dtype=torch.int64, device=DEVICE),
           torch.zeros(2, dtype=torch.int64, device=DEVICE))
    for fn in (paged_attention, paged_attention_ref):
        with pytest.raises(ValueError, match=r"must be \[rows, kv heads, head dim\]"):
            fn(q, kb, kb.clone(), *attn, rope=bad)
