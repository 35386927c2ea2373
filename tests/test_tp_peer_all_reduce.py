"""The peer-memory all-reduce over two GPUs (kernels/peer_all_reduce.py through
specdec/tp/peer_memory.py): every rank gets the process group's sum (NCCL) bit for bit, and
the fused add + RMSNorm within the norm's tolerance; eagerly and replayed from a CUDA graph
with new inputs; and with the planted stale buffer (fault tp_peer_buffer_stale) it does not
(the control that proves the comparison can fail)."""
from __future__ import annotations

import pytest
import torch

from specdec import faults

pytestmark = [pytest.mark.multi_gpu,
              pytest.mark.skipif(torch.cuda.device_count() < 2,
                                 reason="the peer path needs 2 GPUs")]

SHAPES = [(1, 64, torch.float32), (3, 96, torch.bfloat16), (17, 4096, torch.bfloat16),
          (8, 320, torch.float16)]
_PEERS = {}  # this rank's PeerBuffers, opened once per worker process; only they are kept
#             (their owner keeps the mapped memory alive: the bench keeps nothing else either)


def _peers():
    import torch.distributed as dist
    from specdec.tp.peer_memory import PeerMemory
    name = dist.group.WORLD.group_name
    if name not in _PEERS:
        _PEERS[name] = PeerMemory(name, torch.device("cuda", torch.cuda.current_device())).peers
    return _PEERS[name]


def _inputs(n, h, dtype, seed, rank):
    g = torch.Generator().manual_seed(seed * 10 + rank)  # each rank its own partial sums
    x = (3 * torch.randn(n, h, generator=g)).to("cuda", dtype)
    gs = torch.Generator().manual_seed(seed)  # residual and weight: the same on every rank
    return x, torch.randn(n, h, generator=gs).to("cuda", dtype), torch.randn(h, generator=gs).to(
        "cuda", dtype)


def _errors(_engine, seed, graphed, stale):
    """On every rank: the largest difference from the reference, per shape and output."""
    import torch.distributed as dist
    from kernels.peer_all_reduce import peer_all_reduce, peer_all_reduce_ref
    peers, rank, out = _peers(), dist.get_rank(), []
    with faults.active(*(["tp_peer_buffer_stale"] if stale else [])):
        for n, h, dtype in SHAPES:
            x, r, w = _inputs(n, h, dtype, seed, rank)
            want_sum = peer_all_reduce_ref(x, peers)
            want_norm, want_stream = peer_all_reduce_ref(x, peers, r, w, 1e-5)
            if graphed:  # capture with other values, then replay on these
                sx = torch.zeros_like(x)
                peer_all_reduce(sx, peers), peer_all_reduce(sx, peers, r, w, 1e-5)  # compiled
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    got_sum = peer_all_reduce(sx, peers)
                    got_norm, got_stream = peer_all_reduce(sx, peers, r, w, 1e-5)
                sx.copy_(x)
                graph.replay()
            else:
                got_sum = peer_all_reduce(x, peers)
                got_norm, got_stream = peer_all_reduce(x, peers, r, w, 1e-5)
            torch.cuda.synchronize()
            out.append(((got_sum.float() - want_sum.float()).abs().max().item(),
                        (got_stream.float() - want_stream.float()).abs().max().item(),
                        (got_norm.float() - want_norm.float()).abs().max().item()))
    return out


def _run(seed, graphed, stale):
    from specdec.tp.group import TPGroup
    from specdec.tp.replicate import on_every_rank

    group = TPGroup.leader(2, "cuda", _errors)  # its user (a weak reference): this test
    try:
        return on_every_rank(group, None, _errors, seed, graphed, stale)
    finally:
        group.release()


TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("graphed", [False, True])
def test_every_rank_gets_the_process_groups_sum(graphed):
    """The sum and the stream equal NCCL's bit for bit (two ranks: one rounding either way);
    the normed output is within the norm kernel's tolerance of the torch reference."""
    for rank_errors in _run(seed=1, graphed=graphed, stale=False):
        for (n, h, dtype), (e_sum, e_stream, e_norm) in zip(SHAPES, rank_errors):
            assert e_sum == 0 and e_stream == 0, (n, h, dtype, e_sum, e_stream)
            assert e_norm <= 4 * TOL[dtype], (n, h, dtype, e_norm)


def test_a_stale_peer_buffer_is_seen():
    """Negative control: with the staging skipped every rank sums the buffers' old rows, and
    the comparison above fails on every shape."""
    for rank_errors in _run(seed=2, graphed=False, stale=True):
        assert all(e_sum > 0 for e_sum, _, _ in rank_errors), rank_errors
