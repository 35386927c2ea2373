"""Properties of the cache-location kernels: Triton == reference == a plain-Python loop."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.cache_loc import (
    assign_draft_cache_locs, assign_draft_cache_locs_ref, assign_extend_cache_locs,
    assign_extend_cache_locs_ref, assign_req_to_token_pool, assign_req_to_token_pool_ref,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@st.composite
def packed_cases(draw):
    """Distinct request rows, [start, end) ranges inside max_context, offsets int32 or int64."""
    max_reqs = draw(st.integers(1, 8))
    bs = draw(st.integers(0, max_reqs))
    max_context = draw(st.integers(1, 400))
    offset_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    a = torch.randint(0, max_context + 1, (2, bs), generator=g)
    start, end = a.min(0).values, a.max(0).values
    total = int((end - start).sum())
    dev = lambda x, dt: x.to(DEVICE, dt)  # noqa: E731
    return (dev(torch.randperm(max_reqs, generator=g)[:bs], offset_dtype),
            dev(torch.randint(0, 2**30, (max_reqs, max_context), generator=g), torch.int32),
            dev(start, offset_dtype), dev(end, offset_dtype),
            dev(torch.randint(0, 2**31, (total,), generator=g), torch.int64))  # slots fit int32


def packed_pairs(req, start, end):
    """(request row, position, packed index) of every element, in b order."""
    k = 0
    for r, s, e in zip(req.tolist(), start.tolist(), end.tolist()):
        for p in range(s, e):
            yield r, p, k
            k += 1


@settings(deadline=None)
@given(case=packed_cases())
def test_assign_req_to_token_pool(case):
    """req_to_token[req[b], start[b]:end[b]] = the next entries of out_cache_loc."""
    req, r2t, start, end, loc = case
    want = r2t.clone()
    for r, p, k in packed_pairs(req, start, end):
        want[r, p] = int(loc[k])
    for fn in (assign_req_to_token_pool, assign_req_to_token_pool_ref):
        got = r2t.clone()
        fn(req, got, start, end, loc)
        assert torch.equal(got, want), fn.__name__


@settings(deadline=None)
@given(case=packed_cases())
def test_assign_extend_cache_locs(case):
    """out_cache_loc (packed in b order) = req_to_token[req[b], start[b]:end[b]]."""
    req, r2t, start, end, loc = case
    want = torch.empty_like(loc)
    for r, p, k in packed_pairs(req, start, end):
        want[k] = int(r2t[r, p])
    for fn in (assign_extend_cache_locs, assign_extend_cache_locs_ref):
        got = torch.full_like(loc, -7)
        fn(req, r2t, start, end, got)
        assert torch.equal(got, want), fn.__name__


def draft_locs_loop(req, r2t, seq_lens, topk, num_steps, page_size):
    """Contract section 4 written as a loop over (b, k, s) and the tail lanes (b, k, j)."""
    out, src, tgt = [], [], []
    for r, seq_len in zip(req.tolist(), seq_lens.tolist()):
        row = r2t[r].tolist()
        last = seq_len % page_size
        base = seq_len - last
        npb = -(-(last + num_steps) // page_size)
        for k in range(topk):
            for s in range(num_steps):
                out.append(row[base + k * npb * page_size + last + s])
        for k in range(1, topk):
            for j in range(page_size - 1):
                real = j < last
                src.append(row[base + j] if real else 0)
                tgt.append(row[base + k * npb * page_size + j] if real else 0)
    return out, src, tgt


def run_draft(fn, req, r2t, seq_lens, topk, num_steps, page_size):
    bs = seq_lens.numel()
    out = torch.full((bs * topk * num_steps,), -7, dtype=torch.int64, device=DEVICE)
    src = torch.full((bs * (topk - 1) * (page_size - 1),), -7, dtype=torch.int64, device=DEVICE)
    tgt = src.clone()
    fn(req, r2t, seq_lens, out, src, tgt, topk, num_steps, page_size)
    return out.tolist(), src.tolist(), tgt.tolist()


@st.composite
def draft_cases(draw):
    """Shapes for the draft slot layout; req_to_token is wide enough for every branch page."""
    bs = draw(st.integers(1, 6))
    topk = draw(st.integers(1, 4))
    num_steps = draw(st.integers(1, 5))
    page_size = draw(st.sampled_from([1, 2, 4, 8, 16]))
    seq_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    max_seq = 200
    npb_max = -(-(page_size - 1 + num_steps) // page_size)
    max_context = max_seq + topk * npb_max * page_size
    r2t = torch.randperm(bs * max_context, generator=g).view(bs, max_context).int() + 1
    return (torch.randperm(bs, generator=g).to(DEVICE),
            r2t.to(DEVICE),
            torch.randint(0, max_seq + 1, (bs,), generator=g).to(DEVICE, seq_dtype),
            topk, num_steps, page_size)


@settings(deadline=None)
@given(case=draft_cases())
def test_assign_draft_cache_locs(case):
    """Triton == reference == the per-(b, k, s) loop of the contract's formula."""
    want = draft_locs_loop(*case)
    assert run_draft(assign_draft_cache_locs_ref, *case) == want
    assert run_draft(assign_draft_cache_locs, *case) == want


@pytest.mark.parametrize("fn", [assign_draft_cache_locs, assign_draft_cache_locs_ref])
def test_draft_conventions_example(fn):
    """Page 4, topk 2, steps 3, seq_len 6: branch 0 at 6,7,8; branch 1 at 14,15,16;
    tail copies 12,13 <- 4,5 (slots equal positions here), the third lane copies 0 onto 0."""
    r2t = torch.arange(32, dtype=torch.int32, device=DEVICE).view(1, 32)
    args = (torch.tensor([0], device=DEVICE), r2t, torch.tensor([6], device=DEVICE), 2, 3, 4)
    out, src, tgt = run_draft(fn, *args)
    assert out == [6, 7, 8, 14, 15, 16]
    assert src == [4, 5, 0] and tgt == [12, 13, 0]
    assert (out, src, tgt) == draft_locs_loop(*args)


@pytest.mark.parametrize("fn", [assign_draft_cache_locs, assign_draft_cache_locs_ref])
@pytest.mark.parametrize("topk,page_size", [(1, 4), (3, 1)])
def test_draft_token_granular_and_chain(fn, topk, page_size):
    """page_size 1: position seq_len + k*num_steps + s; topk 1: position seq_len + s."""
    r2t = torch.arange(64, dtype=torch.int32, device=DEVICE).view(1, 64)
    seq_len, steps = 9, 3
    out, _, _ = run_draft(fn, torch.tensor([0], device=DEVICE), r2t,
                          torch.tensor([seq_len], device=DEVICE), topk, steps, page_size)
    assert out == [seq_len + k * steps + s for k in range(topk) for s in range(steps)]
