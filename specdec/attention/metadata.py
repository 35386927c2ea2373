"""Attention metadata: what every forward's attention reads and where it writes.

Shared by both backends (Triton and torch); built by `init_forward_metadata`. The forward's
KV write targets are baked in here, at init time, as SGLang's DeepSeek-V4 backend does: so the
caller must hand in the batch exactly as it will run (after padding), and in the multi-step
draft, the step's own slice of the draft layout.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.spec.layout import branch_page_table, per_step_draft_out_cache_loc


@dataclass
class AttentionMetadata:
    write_loc: torch.Tensor        # [N] int64: slots this forward stores its K/V into
    page_table: torch.Tensor       # [num_seqs, max_pages] int32
    row_seq: torch.Tensor          # [N] int32: which page-table row each query row reads
    row_kv_len: torch.Tensor       # [N] int32: virtual KV positions [0, len) are candidates
    row_mask_start: torch.Tensor   # [N] int32: positions >= this consult the custom mask
    row_mask_offset: torch.Tensor  # [N] int64: -1 = no mask
    custom_mask: torch.Tensor      # bool


def request_page_table(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor,
                       page_size: int) -> torch.Tensor:
    """Page ids of each request `[bs, max_context // page_size]` (allocation is page aligned).
    With pages of one slot a slot is its page: no division (a kernel fewer in every replay)."""
    pages = req_to_token[req_pool_indices][:, ::page_size]
    return (pages // page_size if page_size > 1 else pages).to(torch.int32)


def _request_pages(fb: ForwardBatch, req_to_token: torch.Tensor, page_size: int) -> torch.Tensor:
    if fb.req_page_table is not None:
        return fb.req_page_table
    return request_page_table(req_to_token, fb.req_pool_indices, page_size)


def _unmasked_columns(n: int, dev) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row_mask_start 0, row_mask_offset -1 = no mask, a one-entry mask) for n rows: what a
    forward without a custom mask hands the attention."""
    return (torch.zeros(n, dtype=torch.int32, device=dev),
            torch.full((n,), -1, dtype=torch.int64, device=dev),
            torch.ones(1, dtype=torch.bool, device=dev))


def build_draft_decode_metadata(fbs: list[ForwardBatch], req_to_token: torch.Tensor,
                                page_size: int) -> list[AttentionMetadata]:
    """Metadata of the forwards of one multi-step draft decode (one ForwardBatch per step, over
    the same requests and layout). The steps share the branch page table and the row map, built
    once; step i writes its own row of the `[num_steps, bs*topk]` layout and its rows see
    prefix + i + 1 positions."""
    if not fbs:
        return []  # num_steps 1: the draft extend proposes the only draft token
    fb = fbs[0]
    dev, n = fb.input_ids.device, fb.num_tokens
    pages = _request_pages(fb, req_to_token, page_size)
    table = branch_page_table(pages, fb.kv_prefix_lens, fb.topk, fb.num_steps, page_size)
    per_step = per_step_draft_out_cache_loc(fb.out_cache_loc, fb.batch_size, fb.topk,
                                            fb.num_steps)
    kv_len = (fb.kv_prefix_lens.repeat_interleave(fb.topk) + 1).to(torch.int32)
    row_seq = torch.arange(n, device=dev, dtype=torch.int32)
    zeros32, no_mask, dummy_mask = _unmasked_columns(n, dev)
    return [AttentionMetadata(per_step[s.draft_step], table, row_seq,
                              kv_len + s.draft_step if s.draft_step else kv_len, zeros32,
                              no_mask, dummy_mask) for s in fbs]


def build_metadata(fb: ForwardBatch, req_to_token: torch.Tensor,
                   page_size: int) -> AttentionMetadata:
    """Metadata for `fb` as it will run."""
    if fb.mode is ForwardMode.DRAFT_DECODE:
        return build_draft_decode_metadata([fb], req_to_token, page_size)[0]
    dev = fb.input_ids.device
    n = fb.num_tokens
    pages = _request_pages(fb, req_to_token, page_size)
    write_loc = fb.out_cache_loc
    if fb.mode is ForwardMode.TARGET_VERIFY:
        ndt = fb.num_draft_tokens
        row_seq = torch.arange(n, device=dev) // ndt
        t = torch.arange(n, device=dev) % ndt
        seq = fb.seq_lens[row_seq]
        # FULL_MASK layout: request b's block starts after ndt*(seq_len + ndt) entries per
        # earlier request; its row t has seq_len + ndt columns, prefix columns included.
        block = fb.num_draft_tokens * (fb.seq_lens + ndt)
        block_start = torch.cumsum(block, 0) - block
        offset = block_start[row_seq] + t * (seq + ndt)
        mask_start = torch.zeros(n, dtype=torch.int32, device=dev)  # every column masked
        return AttentionMetadata(write_loc, pages, row_seq.to(torch.int32),
                                 (seq + ndt).to(torch.int32), mask_start, offset, fb.custom_mask)
    if fb.one_new_row_each:
        # One row per request: the packing below reduces to row b reading request b's
        # committed prefix and itself. Two kernels where the packing launches a dozen, in
        # every decode replay (tests/test_metadata.py holds the two equal).
        row_seq = torch.arange(n, device=dev, dtype=torch.int32)
        kv_len = (fb.kv_prefix_lens + 1).to(torch.int32)
        return AttentionMetadata(write_loc, pages, row_seq, kv_len, *_unmasked_columns(n, dev))
    # EXTEND, DECODE, DRAFT_EXTEND: packed causal rows.
    lens = fb.extend_lens
    starts = torch.cumsum(lens, 0) - lens
    row_seq = torch.repeat_interleave(torch.arange(fb.batch_size, device=dev), lens, output_size=n)
    j = torch.arange(n, device=dev) - starts[row_seq]
    kv_len = fb.kv_prefix_lens[row_seq] + j + 1
    zeros32, no_mask, dummy_mask = _unmasked_columns(n, dev)
    return AttentionMetadata(write_loc, pages, row_seq.to(torch.int32), kv_len.to(torch.int32),
                             zeros32, no_mask, dummy_mask)
