"""Attention metadata: the decode fast path equals the general packed-rows build it skips."""
from __future__ import annotations

import dataclasses

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.attention.metadata import build_metadata


def _fields_equal(a, b) -> bool:
    return all(torch.equal(getattr(a, f.name), getattr(b, f.name))
               for f in dataclasses.fields(a))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_decode_metadata_equals_the_packed_rows_build(data):
    """A DECODE batch (one row per request) gets the metadata the general packed-rows build
    (EXTEND/DRAFT_EXTEND's) gives the same rows with extend_lens all 1, for any page size,
    lengths and pool rows; and that comparison sees a changed length (the check can fail)."""
    page_size = data.draw(st.sampled_from([1, 2, 4, 16]))
    bs = data.draw(st.integers(1, 6))
    pages_per_req = data.draw(st.integers(1, 5))
    max_context = pages_per_req * page_size
    rows = data.draw(st.lists(st.integers(1, 7), min_size=bs, max_size=bs, unique=True))
    seq = data.draw(st.lists(st.integers(0, max_context - 1), min_size=bs, max_size=bs))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    page_ids = torch.randperm(64, generator=g)[:8 * pages_per_req].view(8, pages_per_req)
    req_to_token = (page_ids.repeat_interleave(page_size, 1) * page_size
                    + torch.arange(page_size).repeat(pages_per_req)).to(torch.int32)
    seq_t = torch.tensor(seq)
    rows_t = torch.tensor(rows)
    write = req_to_token[rows_t, seq_t].long()
    fb = ForwardBatch(mode=ForwardMode.DECODE, input_ids=torch.zeros(bs, dtype=torch.int64),
                      positions=seq_t, out_cache_loc=write,
                      req_pool_indices=rows_t, seq_lens=seq_t, kv_prefix_lens=seq_t,
                      extend_lens=torch.ones(bs, dtype=torch.int64))
    fast = build_metadata(fb, req_to_token, page_size)
    packed = build_metadata(dataclasses.replace(fb, mode=ForwardMode.EXTEND), req_to_token,
                            page_size)
    assert _fields_equal(fast, packed)
    shifted = build_metadata(dataclasses.replace(fb, kv_prefix_lens=seq_t + 1), req_to_token,
                             page_size)
    assert not _fields_equal(fast, shifted)
