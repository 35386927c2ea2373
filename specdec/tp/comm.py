"""The collectives of a sharded forward, as functional collectives (`_c10d_functional`).

They go through the dispatcher, so the CPU graph stand-in records and replays them like any
other op, and a CUDA graph captures the NCCL kernels they enqueue. Every rank gets the same
bytes back (the reduced values are broadcast, not re-summed per rank), so every rank holds
the same hidden states and the same full logits."""
from __future__ import annotations

import torch

_ops = torch.ops._c10d_functional


class TPComm:
    def __init__(self, rank: int, world: int, group_name: str) -> None:
        self.rank, self.world, self.group_name = rank, world, group_name

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over ranks (row-parallel o_proj / down_proj, the masked embedding lookup)."""
        return _ops.wait_tensor(_ops.all_reduce(x.contiguous(), "sum", self.group_name))

    def gather_last(self, x: torch.Tensor) -> torch.Tensor:
        """[n, V/world] local shards -> [n, V], rank-major along the last dim."""
        n = x.shape[0]
        g = _ops.wait_tensor(_ops.all_gather_into_tensor(x.contiguous(), self.world,
                                                         self.group_name))
        return g.view(self.world, n, -1).permute(1, 0, 2).reshape(n, -1)

    def vocab_embed(self, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """A vocab-parallel lookup: this rank's rows [rank*V/world, ...) of the table; ids
        outside it read row 0 and are zeroed; the all-reduce fills in the owner's rows."""
        per = weight.shape[0]
        local = ids - self.rank * per
        mine = (local >= 0) & (local < per)
        emb = torch.nn.functional.embedding(torch.where(mine, local, 0), weight)
        return self.all_reduce(emb * mine[:, None].to(emb.dtype))
