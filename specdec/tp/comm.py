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

    def vocab_rows(self, vocab: int) -> tuple[int, int]:
        """This rank's rows of a `vocab`-row table: (first, count). Shards of ceil(V/world)
        rows, the last one shorter when world does not divide V (e.g. an odd V over 2)."""
        per = -(-vocab // self.world)
        first = self.rank * per
        return first, max(0, min(per, vocab - first))

    def gather_last(self, x: torch.Tensor, vocab: int) -> torch.Tensor:
        """[n, this rank's rows] local shards -> [n, vocab], rank-major along the last dim.
        A short last shard is padded to ceil(V/world) for the gather (every rank sends the
        same shape) and the padding cut off after it."""
        n, per = x.shape[0], -(-vocab // self.world)
        if x.shape[1] < per:
            x = torch.nn.functional.pad(x, (0, per - x.shape[1]))
        g = _ops.wait_tensor(_ops.all_gather_into_tensor(x.contiguous(), self.world,
                                                         self.group_name))
        full = g.view(self.world, n, per).permute(1, 0, 2).reshape(n, -1)
        return full if full.shape[1] == vocab else full[:, :vocab]

    def vocab_embed(self, weight: torch.Tensor, ids: torch.Tensor, vocab: int) -> torch.Tensor:
        """A vocab-parallel lookup: this rank's rows [rank*ceil(V/world), ...) of the table;
        ids outside them read row 0 and are zeroed; the all-reduce fills in the owner's rows."""
        first, _ = self.vocab_rows(vocab)
        local = ids - first
        mine = (local >= 0) & (local < weight.shape[0])
        emb = torch.nn.functional.embedding(torch.where(mine, local, 0), weight)
        return self.all_reduce(emb * mine[:, None].to(emb.dtype))
