"""The collectives of a sharded forward.

Two paths for an all-reduce (docs/tp.md, the all-reduce paths), chosen per message by its
size, the same way on every rank (every rank reduces the same shapes):
- the process group's, as functional collectives (`_c10d_functional`): NCCL on CUDA, gloo on
  CPU. They go through the dispatcher, so the CPU graph stand-in records and replays them
  like any other op, and a CUDA graph captures the NCCL kernels they enqueue;
- on CUDA, messages up to the crossover: one Triton kernel over peer memory
  (kernels/peer_all_reduce.py, buffers from peer_memory.py), fused with the residual add and
  RMSNorm that follow a row-parallel projection. Not on CPU: there the group's path runs.
Every rank gets the same bytes back (NCCL broadcasts the reduced values; the peer kernel
sums in rank order on every rank), so every rank holds the same hidden states and the same
full logits."""
from __future__ import annotations

import os

import torch

from kernels.norm import rms_norm, rms_norm_ref
from kernels.peer_all_reduce import peer_all_reduce
from specdec.model.layers import on_device

_ops = torch.ops._c10d_functional

PATHS = ("auto", "nccl")  # Engine(tp_all_reduce=...): peer kernel up to the crossover, or never
# The largest message (bytes) the peer kernel takes; NCCL above. `python -m specdec bench
# allreduce --tp 2` on 2 H200s (bench/results/allreduce-tp2-h200x2-2026-11-26.json): the
# fused peer kernel beat NCCL + norm at every size measured, 4 KiB to 8 MiB; 4 MiB is the
# largest measured for both hidden sizes (2048 and 4096).
CROSSOVER_BYTES = int(os.environ.get("SPECDEC_TP_PEER_MAX_BYTES", str(4 << 20)))


def check_path(path: str) -> None:
    if path not in PATHS:
        raise ValueError(f"tp_all_reduce={path!r}: expected one of {list(PATHS)} ('auto': the "
                         "peer-memory kernel on CUDA up to the crossover, NCCL above it and "
                         "gloo on CPU; 'nccl': the process group's collectives only)")


class TPComm:
    def __init__(self, rank: int, world: int, group_name: str, peer=None) -> None:
        self.rank, self.world, self.group_name = rank, world, group_name
        self.peer = peer  # a PeerMemory (this path takes small CUDA messages), else None
        self._peer_memory = None  # the group's, opened at the first engine that asks

    def for_engine(self, path: str, device: torch.device) -> "TPComm":
        """The collectives an engine on `device` asks for (`path`, one of PATHS). The first
        CUDA engine with 'auto' opens the group's peer buffers: a collective, so every rank
        builds the same engine at the same time (they do: rank 0 sends the build)."""
        check_path(path)
        if path == "nccl" or torch.device(device).type != "cuda" or self.world == 1:
            return TPComm(self.rank, self.world, self.group_name)
        if self._peer_memory is None:
            from specdec.tp.peer_memory import PeerMemory
            self._peer_memory = PeerMemory(self.group_name, torch.device(device))
        return TPComm(self.rank, self.world, self.group_name, self._peer_memory)

    def close_peers(self, healthy: bool) -> None:
        """Before the groups end (their graphs already gone): drop the peer buffers; a failed
        group keeps them for good, and ends every wait in them."""
        mem = self._peer_memory
        if mem is None:
            return
        if healthy:
            self._peer_memory = None
        else:
            mem.abort()

    def abort_peers(self) -> None:
        """A peer died or hung: every kernel of ours waiting on it ends (results garbage)."""
        if self._peer_memory is not None:
            self._peer_memory.abort()

    def _peer_takes(self, x: torch.Tensor) -> bool:
        n = x.numel() * x.element_size()
        return self.peer is not None and x.is_cuda and n <= min(CROSSOVER_BYTES,
                                                                self.peer.peers.nbytes)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over ranks (row-parallel o_proj / down_proj, the masked embedding lookup)."""
        if self._peer_takes(x):
            return peer_all_reduce(x, self.peer.peers)
        return _ops.wait_tensor(_ops.all_reduce(x.contiguous(), "sum", self.group_name))

    def all_reduce_norm(self, x: torch.Tensor, residual: torch.Tensor | None,
                        weight: torch.Tensor, eps: float):
        """(norm(sum + residual), sum + residual) of a row-parallel projection's partial `x`
        (residual None: (norm(sum), sum)): one fused kernel on the peer path, else the
        group's all-reduce and then the norm kernel (kernels/norm.py)."""
        if self._peer_takes(x):
            return peer_all_reduce(x, self.peer.peers, residual, weight, eps)
        s = self.all_reduce(x)
        norm = on_device(s, rms_norm, rms_norm_ref)
        if residual is None:
            return norm(s, weight, eps), s
        return norm(s, weight, eps, residual)

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
