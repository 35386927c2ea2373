"""Properties of store_kv_cache and move_kv_cache (exact equality, overlapping moves)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.kv_move import move_kv_cache, move_kv_cache_ref
from kernels.kv_store import store_kv_cache, store_kv_cache_ref

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]  # pure copies: bf16 is exact anywhere


@st.composite
def store_cases(draw):
    """A pool layer [S, Hkv, D], N distinct real slots plus padded lanes writing slot 0."""
    num_slots = draw(st.integers(2, 200))
    n_real = draw(st.integers(0, min(num_slots - 1, 40)))
    n_pad = draw(st.integers(0, 3))
    shape = (draw(st.sampled_from([1, 2, 8])), draw(st.sampled_from([16, 64, 128])))
    dtype = draw(st.sampled_from(DTYPES))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    real = torch.randperm(num_slots - 1, generator=g)[:n_real] + 1  # slot 0 is reserved
    loc = torch.cat([real, torch.zeros(n_pad, dtype=torch.long)])
    loc = loc[torch.randperm(loc.numel(), generator=g)]
    mk = lambda n: torch.randn(n, *shape, generator=g).to(DEVICE, dtype)  # noqa: E731
    return mk(num_slots), mk(num_slots), loc.to(DEVICE), mk(loc.numel()), mk(loc.numel())


@settings(deadline=None)
@given(case=store_cases())
def test_store_matches_reference_and_law(case):
    """Triton == reference == `buf[loc[i]] = x[i]`, bit for bit (slot 0 is padding garbage)."""
    k_buf, v_buf, loc, k, v = case
    tk, tv, rk, rv = k_buf.clone(), v_buf.clone(), k_buf.clone(), v_buf.clone()
    store_kv_cache(tk, tv, loc, k, v)
    store_kv_cache_ref(rk, rv, loc, k, v)
    lk, lv = k_buf.clone(), v_buf.clone()
    for i, slot in enumerate(loc.tolist()):
        lk[slot], lv[slot] = k[i], v[i]
    for got in (tk, rk):
        assert torch.equal(got[1:], lk[1:])
    for got in (tv, rv):
        assert torch.equal(got[1:], lv[1:])


def move_law(buffers, tgt, src):
    """The law: every source row is read (from a clone) before any target row is written."""
    out = []
    for buf in buffers:
        old, new = buf.clone(), buf.clone()
        for t, s in zip(tgt.tolist(), src.tolist()):
            new[t] = old[s]
        out.append(new)
    return out


@st.composite
def move_cases(draw):
    """Buffers of mixed trailing shapes/dtypes; distinct targets, overlapping or permuted."""
    num_slots = draw(st.integers(4, 96))
    n = draw(st.integers(0, num_slots // 2))
    mode = draw(st.sampled_from(["random", "shift", "permute"]))
    trailing = draw(st.lists(st.sampled_from([(), (3,), (2, 16), (4, 8, 2)]), min_size=1,
                             max_size=3))
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in trailing]
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    if mode == "random":  # targets distinct, sources anywhere (often among the targets)
        tgt = torch.randperm(num_slots, generator=g)[:n]
        src = torch.randint(0, num_slots, (n,), generator=g)
    elif mode == "shift":  # compaction-like: a run moved by a small offset, either way
        lim = min(3, num_slots - n)
        d = draw(st.integers(-lim, lim))
        a = draw(st.integers(max(0, -d), num_slots - n - max(0, d)))
        tgt = torch.arange(a, a + n)
        src = tgt + d
    else:  # the same set of slots, permuted: every row is both read and written
        tgt = torch.randperm(num_slots, generator=g)[:n]
        src = tgt[torch.randperm(n, generator=g)]
    buffers = [torch.randn(num_slots, *t, generator=g).to(DEVICE, dt)
               for t, dt in zip(trailing, dtypes)]
    return buffers, tgt.to(DEVICE), src.to(DEVICE)


@settings(deadline=None)
@given(case=move_cases())
def test_move_matches_law(case):
    """move_kv_cache and its reference both equal the clone-based law exactly."""
    buffers, tgt, src = case
    expected = move_law(buffers, tgt, src)
    for fn in (move_kv_cache, move_kv_cache_ref):
        bufs = [b.clone() for b in buffers]
        fn(bufs, tgt, src)
        for got, want in zip(bufs, expected):
            assert torch.equal(got, want), fn.__name__


@pytest.mark.parametrize("tgt,src", [([5, 6, 7], [6, 7, 8]), ([6, 7, 8], [5, 6, 7]),
                                     ([1, 2], [2, 1]), ([3, 1, 2], [1, 2, 3])])
@pytest.mark.parametrize("fn", [move_kv_cache, move_kv_cache_ref])
def test_move_overlapping_examples(fn, tgt, src):
    """The brief's examples: shifted runs and swaps must not read already-moved rows."""
    buf = torch.arange(10 * 4, dtype=torch.float32, device=DEVICE).view(10, 2, 2)
    tgt_t = torch.tensor(tgt, device=DEVICE)
    src_t = torch.tensor(src, device=DEVICE)
    (want,) = move_law([buf], tgt_t, src_t)
    fn([buf], tgt_t, src_t)
    assert torch.equal(buf, want)
    assert torch.equal(buf[tgt_t[0]], torch.arange(4.0, device=DEVICE).view(2, 2) + 4 * src[0])


@settings(deadline=None)
@given(case=move_cases(), layers=st.integers(1, 4))
def test_move_on_pool_views_matches_law(case, layers):
    """Buffers that are evenly spaced views of one pool tensor (K and V of every layer,
    moved in one launch) follow the same law; the pool outside the moved rows is untouched."""
    buffers, tgt, src = case
    layer_bufs = [buffers[0] + i for i in range(2 * layers)]  # distinct per layer
    expected = move_law(layer_bufs, tgt, src)
    for fn in (move_kv_cache, move_kv_cache_ref):
        pool = torch.stack(layer_bufs).view(2, layers, *layer_bufs[0].shape)
        views = list(pool[0].unbind(0)) + list(pool[1].unbind(0))
        fn(views, tgt, src)
        for got, want in zip(views, expected):
            assert torch.equal(got, want), fn.__name__
