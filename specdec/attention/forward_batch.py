"""What one forward runs on: the batch the attention backend turns into metadata."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch


class ForwardMode(enum.Enum):
    EXTEND = "extend"                # target prefill: packed prompt rows, causal
    DECODE = "decode"                # plain (non-speculative) decode: one row per request
    TARGET_VERIFY = "target_verify"  # ndt tree rows per request, prefix + tree mask
    DRAFT_EXTEND = "draft_extend"    # draft over committed tokens: packed rows, causal
    DRAFT_DECODE = "draft_decode"    # one draft step: topk branch rows per request

    @property
    def is_draft(self) -> bool:
        return self in (ForwardMode.DRAFT_EXTEND, ForwardMode.DRAFT_DECODE)


@dataclass(kw_only=True)
class ForwardBatch:
    """Inputs of one forward. Row tensors have one entry per input token.

    `kv_prefix_lens` counts the KV positions that precede this forward's rows in the pool the
    forward writes: the committed length for target forwards, the draft's own prefix length for
    draft forwards (contract section 3: the EAGLE draft is shifted by one, a standalone draft
    is not). `seq_lens` is always the committed target length.
    """

    mode: ForwardMode
    input_ids: torch.Tensor          # [N] int64
    positions: torch.Tensor          # [N] int64 (RoPE positions)
    out_cache_loc: torch.Tensor      # int64; [N], or [bs*topk*num_steps] for DRAFT_DECODE
    req_pool_indices: torch.Tensor   # [bs] int64
    seq_lens: torch.Tensor           # [bs] int64 committed target length
    kv_prefix_lens: torch.Tensor     # [bs] int64
    extend_lens: torch.Tensor | None = None   # [bs] rows per request (EXTEND/DECODE/DRAFT_EXTEND)
    seq_lens_sum: int = 0            # host sum of seq_lens (sizes the FULL_MASK buffer)
    num_draft_tokens: int = 0        # ndt (TARGET_VERIFY)
    custom_mask: torch.Tensor | None = None   # FULL_MASK tree mask (TARGET_VERIFY)
    topk: int = 1                    # DRAFT_DECODE
    num_steps: int = 1               # DRAFT_DECODE
    draft_step: int = 0              # DRAFT_DECODE: which of the num_steps - 1 forwards
    hidden_states: torch.Tensor | None = None  # EAGLE input hidden states [N, H]
    num_padded: int = 0              # trailing padding requests (graph buckets / batch-invariant)
    # The request page table of req_pool_indices, when a forward of the same captured round
    # already built it: both models share req_to_token, so metadata reuses it.
    req_page_table: torch.Tensor | None = field(default=None, repr=False)
    attn_metadata: object | None = field(default=None, repr=False)

    @property
    def batch_size(self) -> int:
        return int(self.req_pool_indices.shape[0])

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def one_new_row_each(self) -> bool:
        """A plain decode: each request's one row is its next position, read by no other row
        (the metadata's short build and the attention's fused RoPE store rely on it)."""
        return self.mode is ForwardMode.DECODE and self.num_tokens == self.batch_size
