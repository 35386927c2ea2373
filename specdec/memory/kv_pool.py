"""Paged KV pools: one K and one V buffer per layer, indexed by slot."""
from __future__ import annotations

import torch


class KVPool:
    """`[num_slots, num_kv_heads, head_dim]` per layer. Slot 0 (and its page) is the reserved
    dummy that padded lanes write to; target and draft pools share slot numbers."""

    def __init__(self, num_layers: int, num_slots: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        shape = (num_slots, num_kv_heads, head_dim)
        self.k_buffers = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v_buffers = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.num_slots = num_slots

    @property
    def buffers(self) -> list[torch.Tensor]:
        return self.k_buffers + self.v_buffers
