"""Paged KV pools: one K and one V buffer per layer, indexed by slot."""
from __future__ import annotations

import torch


class KVPool:
    """`[num_slots, num_kv_heads, head_dim]` per layer. Slot 0 (and its page) is the reserved
    dummy that padded lanes write to; target and draft pools share slot numbers.

    All K and V layer buffers are views of one tensor `[2, num_layers, ...]`, evenly spaced, so
    a KV move covers every layer in one launch (kernels/kv_move.py)."""

    def __init__(self, num_layers: int, *, num_slots: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        self.kv = torch.zeros((2, num_layers, num_slots, num_kv_heads, head_dim), dtype=dtype,
                              device=device)
        # Single views (select), not unbind's multi-output views: autograd refuses in-place
        # writes to those outside no_grad (a graph capture at construction writes KV).
        self.k_buffers = [self.kv[0, i] for i in range(num_layers)]
        self.v_buffers = [self.kv[1, i] for i in range(num_layers)]
        self.num_slots = num_slots

    @property
    def buffers(self) -> list[torch.Tensor]:
        return self.k_buffers + self.v_buffers
