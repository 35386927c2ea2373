"""The attention backend: the seam between the model and the paged KV pool.

One interface, two implementations sharing all bookkeeping (`build_metadata`): Triton
kernels, and plain torch for fast CPU runs. Graph runners only ever call the three
`init_forward_metadata*` entry points; they never touch the metadata's insides.
"""
from __future__ import annotations

import torch

import kernels
from specdec import faults
from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.attention.metadata import (AttentionMetadata, build_draft_decode_metadata,
                                        build_metadata)
from specdec.memory.kv_pool import KVPool


class AttentionBackend:
    paged_attention = staticmethod(kernels.paged_attention_ref)
    rope_store_kv = staticmethod(kernels.rope_store_kv_ref)

    def __init__(self, pool: KVPool, req_to_token: torch.Tensor, page_size: int,
                 sm_scale: float) -> None:
        self.pool = pool
        self.req_to_token = req_to_token
        self.page_size = page_size
        self.sm_scale = sm_scale

    # -- eager ---------------------------------------------------------------------------
    def init_forward_metadata(self, fb: ForwardBatch) -> None:
        """Build metadata for `fb` exactly as it will run (after any padding)."""
        fb.attn_metadata = build_metadata(fb, self.req_to_token, self.page_size)
        if fb.mode is ForwardMode.DRAFT_DECODE and faults.on("draft_per_step_loc_unsliced"):
            fb.attn_metadata.write_loc = fb.out_cache_loc.view(fb.num_steps, -1)[fb.draft_step]

    # -- CUDA graphs ---------------------------------------------------------------------
    def init_forward_metadata_capture_cuda_graph(self, fb: ForwardBatch) -> AttentionMetadata:
        """Called inside graph capture, on the static inputs: the metadata build itself is
        captured, so every replay recomputes it on the device from the refilled inputs."""
        md = build_metadata(fb, self.req_to_token, self.page_size)
        if fb.mode is ForwardMode.DRAFT_DECODE and faults.on("draft_kv_indices_missing_topk"):
            # the historical bug: the static branch page table sized bs rows, not bs * topk
            md.page_table = md.page_table[:md.page_table.shape[0] // fb.topk].clone()
        fb.attn_metadata = md
        return md

    def init_draft_decode_metadata_capture_cuda_graph(
            self, fbs: list[ForwardBatch]) -> list[AttentionMetadata]:
        """The capture entry point for all forwards of one multi-step draft decode at once
        (one batch per step): they share the branch page table and the row map, built once
        in the graph instead of once per step."""
        mds = build_draft_decode_metadata(fbs, self.req_to_token, self.page_size)
        if mds and faults.on("draft_kv_indices_missing_topk"):
            # the historical bug: the static branch page table sized bs rows, not bs * topk
            table = mds[0].page_table[:mds[0].page_table.shape[0] // fbs[0].topk].clone()
            for md in mds:
                md.page_table = table
        for fb, md in zip(fbs, mds):
            fb.attn_metadata = md
        return mds

    def init_forward_metadata_replay_cuda_graph(self, fb: ForwardBatch,
                                                static: AttentionMetadata) -> None:
        """At replay, before the graph runs. Everything this backend's metadata holds derives
        on the device from the static inputs (refilled by the runner) and req_to_token, and
        the captured build recomputes it: nothing is left for the host. A backend with
        host-side plans (FlashInfer-style) would refill them here."""

    # -- the layer call ------------------------------------------------------------------
    def forward(self, q: torch.Tensor, *, k: torch.Tensor, v: torch.Tensor, layer_id: int,
                fb: ForwardBatch, rope, positions: torch.Tensor) -> torch.Tensor:
        """q, k unrotated: rotate both at `positions` with `rope`'s tables, store k and v at
        the metadata's write slots (one fused kernel), then attend; a decode batch does all
        three in the attention's launch."""
        md: AttentionMetadata = fb.attn_metadata
        k_buf, v_buf = self.pool.k_buffers[layer_id], self.pool.v_buffers[layer_id]
        fused = None
        if fb.one_new_row_each:
            # One new position a row, its last, read by no other row: the rotation and the
            # store go into the attention's own launch (kernels/attention.py, `rope`).
            fused = (k, v, rope.cos, rope.sin, positions, md.write_loc)
        else:
            q = self.rope_store_kv(q, k, v, rope.cos, rope.sin, positions, k_buf, v_buf,
                                   md.write_loc)
        return self.paged_attention(q, k_buf, v_buf, md.page_table, md.row_seq, md.row_kv_len,
                                    md.row_mask_start, md.row_mask_offset, md.custom_mask,
                                    self.page_size, self.sm_scale, rope=fused)


class TorchAttnBackend(AttentionBackend):
    """Plain torch: fast on CPU, the same semantics as the kernels."""


class TritonAttnBackend(AttentionBackend):
    paged_attention = staticmethod(kernels.paged_attention)
    rope_store_kv = staticmethod(kernels.rope_store_kv)


BACKENDS = {"torch": TorchAttnBackend, "triton": TritonAttnBackend}
