"""Metadata built once for several forwards (the steps of one multi-step draft, the forwards of
one captured round) is what each forward's own build gives, field by field."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.attention.metadata import (AttentionMetadata, build_draft_decode_metadata,
                                        build_metadata, request_page_table)
from specdec.spec.layout import draft_reserve_end

FIELDS = [f.name for f in dataclasses.fields(AttentionMetadata)]


def _pool(bs: int, max_context: int, seed: int):
    """A req_to_token whose rows 1..bs hold distinct random slots (row 0: the reserved one)."""
    gen = torch.Generator().manual_seed(seed)
    r2t = torch.zeros(bs + 1, max_context, dtype=torch.int32)
    slots = torch.randperm(bs * max_context, generator=gen) + 1
    r2t[1:] = slots.view(bs, max_context).to(torch.int32)
    return r2t


def _same(a, b, what):
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and torch.equal(x, y), f"{what}: {name} differs"


@pytest.mark.parametrize("topk,steps,page_size", [(1, 3, 1), (1, 5, 4), (2, 4, 1), (4, 4, 16),
                                                   (3, 2, 8)])
def test_draft_steps_share_what_each_step_builds(topk, steps, page_size):
    bs, max_context = 3, 128
    r2t = _pool(bs, max_context, seed=topk * 10 + steps)
    rows = torch.tensor([2, 1, 3])
    prefix = torch.tensor([5, 17, 40])
    assert all(draft_reserve_end(int(p), topk, steps, page_size) <= max_context for p in prefix)
    n = bs * topk
    out_cache_loc = torch.arange(n * steps, dtype=torch.int64) + 1000

    def fb(step):
        return ForwardBatch(mode=ForwardMode.DRAFT_DECODE,
                            input_ids=torch.zeros(n, dtype=torch.int64),
                            positions=torch.zeros(n, dtype=torch.int64),
                            out_cache_loc=out_cache_loc, req_pool_indices=rows, seq_lens=prefix - 1,
                            kv_prefix_lens=prefix, topk=topk, num_steps=steps, draft_step=step)

    shared = build_draft_decode_metadata([fb(i) for i in range(steps - 1)], r2t, page_size)
    assert len(shared) == steps - 1
    for i, md in enumerate(shared):
        alone = build_metadata(fb(i), r2t, page_size)
        _same(md, alone, f"step {i}")
        # Independently: step i writes column i of the [bs, topk, steps] layout, and its rows
        # see the prefix and the i + 1 draft tokens of their branch.
        assert torch.equal(md.write_loc, out_cache_loc.view(bs, topk, steps)[:, :, i].reshape(-1))
        assert md.row_kv_len.tolist() == [int(p) + i + 1 for p in prefix for _ in range(topk)]
    # A request page table handed in (a captured round builds it once) changes nothing.
    pre = fb(0)
    pre.req_page_table = request_page_table(r2t, rows, page_size)
    _same(build_metadata(pre, r2t, page_size), shared[0], "given page table")
    assert build_draft_decode_metadata([], r2t, page_size) == []  # num_steps 1: no forward


@pytest.mark.parametrize("mode", [ForwardMode.TARGET_VERIFY, ForwardMode.DRAFT_EXTEND])
def test_a_given_request_page_table_changes_nothing(mode):
    bs, ndt, page_size, max_context = 2, 4, 4, 64
    r2t = _pool(bs, max_context, seed=3)
    rows, seq = torch.tensor([1, 2]), torch.tensor([9, 21])
    n = bs * ndt
    kw = ({"num_draft_tokens": ndt, "custom_mask": torch.ones(n * (max_context + ndt), dtype=torch.bool),
           "seq_lens_sum": int(seq.sum())} if mode is ForwardMode.TARGET_VERIFY
          else {"extend_lens": torch.full((bs,), ndt)})

    def fb(table):
        return ForwardBatch(mode=mode, input_ids=torch.zeros(n, dtype=torch.int64),
                            positions=torch.zeros(n, dtype=torch.int64),
                            out_cache_loc=torch.arange(n, dtype=torch.int64),
                            req_pool_indices=rows, seq_lens=seq, kv_prefix_lens=seq,
                            req_page_table=table,
                            **kw)

    given = request_page_table(r2t, rows, page_size)
    _same(build_metadata(fb(given), r2t, page_size), build_metadata(fb(None), r2t, page_size),
          mode.value)
    # Negative control: a page table of other rows is used as given, so the comparison above
    # would see it.
    wrong = request_page_table(r2t, rows.flip(0), page_size)
    assert not torch.equal(build_metadata(fb(wrong), r2t, page_size).page_table,
                           build_metadata(fb(None), r2t, page_size).page_table)
