"""The peer buffers of a CUDA TP group's small all-reduces (kernels/peer_all_reduce.py).

Each rank allocates one byte buffer in symmetric memory (torch.distributed._symmetric_
memory) and exchanges it once over the data group (`rendezvous`): every rank then holds
every other rank's buffer and signal pad mapped into its own address space, over NVLink
(peer to peer; NVLink multicast is not used, and the device machines keep it off). The
buffers belong to the group and outlive its engines; a kernel that captured them in a CUDA
graph reads the same addresses on every replay.

Ending: the graphs that captured the kernel are destroyed first (captured.py), then the
buffers are dropped, then the process groups end (group.py). A group that failed keeps its
buffers for good, as it keeps its graphs: a kernel may still be waiting in them. Such a
kernel waits on a peer that will never arrive; `abort()` raises the pinned abort word every
wait also reads, so it ends (the ncclCommAbort of this path)."""
from __future__ import annotations

import os
import warnings

import torch

from kernels.peer_all_reduce import PeerBuffers

# Bytes per rank. A message larger than the crossover goes to NCCL anyway; the buffer holds
# the largest one the peer path takes (specdec/tp/comm.py CROSSOVER_BYTES, docs/tp.md).
BUFFER_BYTES = int(os.environ.get("SPECDEC_TP_PEER_BYTES", str(4 << 20)))


class PeerMemory:
    """One rank's side: its buffer, the handle mapping every rank's, the abort word."""

    def __init__(self, group_name: str, device: torch.device, nbytes: int = BUFFER_BYTES) -> None:
        import torch.distributed._symmetric_memory as symm_mem
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is not None:  # needed before torch 2.10, deprecated (a no-op) since
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                enable(group_name)
        self.buffer = symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
        self.handle = symm_mem.rendezvous(self.buffer, group_name)
        self.abort_word = torch.zeros(1, dtype=torch.int32, pin_memory=True)
        world = self.handle.world_size
        slots = self.handle.signal_pad_size // 4 // world  # int32 flags: one per peer each
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.peers = PeerBuffers(
            buffer_ptrs=self.handle.buffer_ptrs_dev, signal_ptrs=self.handle.signal_pad_ptrs_dev,
            abort=self.abort_word, offset=int(getattr(self.handle, "offset", 0)),
            nbytes=nbytes, max_programs=max(1, min(slots, sms)), rank=self.handle.rank,
            world=world, group_name=group_name, owner=(self.buffer, self.handle))

    def abort(self) -> None:
        """End every wait of every kernel of ours on this rank, now and later."""
        self.abort_word.fill_(1)
