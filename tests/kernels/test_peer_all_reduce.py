"""The peer-memory all-reduce kernel on one rank (kernels/peer_all_reduce.py): its sum, its
fused residual add and RMSNorm against the norm's reference, and its barrier leaving every
flag at 0 (what lets a CUDA graph replay it). Over two GPUs: tests/test_tp_peer_all_reduce.py."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.norm import rms_norm_ref
from kernels.peer_all_reduce import PeerBuffers, peer_all_reduce

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


class OneRank:
    """A one-rank group's buffers, in ordinary memory: the kernel's own path, its barrier
    meeting only itself."""

    def __init__(self, nbytes: int = 1 << 16, programs: int = 4) -> None:
        self.buffer = torch.zeros(nbytes, dtype=torch.uint8, device=DEVICE)
        self.pad = torch.zeros(programs, dtype=torch.int32, device=DEVICE)
        self.ptrs = torch.tensor([self.buffer.data_ptr()], dtype=torch.int64, device=DEVICE)
        self.pads = torch.tensor([self.pad.data_ptr()], dtype=torch.int64, device=DEVICE)
        abort = torch.zeros(1, dtype=torch.int32, pin_memory=DEVICE == "cuda")
        self.peers = PeerBuffers(self.ptrs.data_ptr(), self.pads.data_ptr(), abort, 0, nbytes,
                                 programs, 0, 1, "unused")


@settings(deadline=None, max_examples=30)
@given(rows=st.integers(0, 9), hidden=st.sampled_from([8, 64, 96, 320]),
       mode=st.sampled_from(["sum", "norm", "add_norm"]), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**31 - 1))
def test_one_rank_matches_the_norm_reference(rows, hidden, mode, dtype, seed):
    """One rank: the sum is x itself, bit for bit; the fused epilogue is kernels/norm.py's
    law (the stream exactly x + residual); every signal flag is back at 0."""
    g = torch.Generator().manual_seed(seed)
    x = (3 * torch.randn(rows, hidden, generator=g)).to(DEVICE, dtype)
    w = torch.randn(hidden, generator=g).to(DEVICE, dtype)
    r = torch.randn(rows, hidden, generator=g).to(DEVICE, dtype)
    one = OneRank()
    if mode == "sum":
        assert torch.equal(peer_all_reduce(x, one.peers), x)
    else:
        res = r if mode == "add_norm" else None
        out, stream = peer_all_reduce(x, one.peers, res, w, 1e-5)
        ref = rms_norm_ref(x, w, 1e-5, res)
        ref_out, ref_stream = ref if res is not None else (ref, x)
        assert torch.equal(stream, ref_stream)
        torch.testing.assert_close(out.float(), ref_out.float(), atol=TOL[dtype], rtol=TOL[dtype])
    assert not one.pad.any(), "a barrier left a flag raised: the next call would not wait"


def test_refuses_what_it_cannot_take():
    """A message over the buffer, or a residual without a norm: a clear error, no launch."""
    import pytest
    one = OneRank(nbytes=64)
    with pytest.raises(ValueError, match="do not fit"):
        peer_all_reduce(torch.ones(4, 8, device=DEVICE), one.peers)
    with pytest.raises(ValueError, match="needs a norm weight"):
        peer_all_reduce(torch.ones(1, 8, device=DEVICE), one.peers,
                        residual=torch.ones(1, 8, device=DEVICE))


def test_a_wait_for_a_peer_that_never_comes_ends_at_abort():
    """Two ranks, the second never launched: with the abort word raised (what the watchdog
    does when a worker dies) the call returns instead of spinning forever, and says nothing
    about its result (garbage by design)."""
    nbytes, programs = 1 << 12, 2
    bufs = [torch.zeros(nbytes, dtype=torch.uint8, device=DEVICE) for _ in range(2)]
    pads = [torch.zeros(programs * 2, dtype=torch.int32, device=DEVICE) for _ in range(2)]
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64, device=DEVICE)
    pad_ptrs = torch.tensor([p.data_ptr() for p in pads], dtype=torch.int64, device=DEVICE)
    abort = torch.ones(1, dtype=torch.int32, pin_memory=DEVICE == "cuda")
    peers = PeerBuffers(ptrs.data_ptr(), pad_ptrs.data_ptr(), abort, 0, nbytes, programs, 0, 2,
                        "unused")
    out = peer_all_reduce(torch.ones(3, 8, device=DEVICE), peers)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    assert out.shape == (3, 8)
    assert pads[1].view(programs, 2)[:, 0].eq(1).all()  # it did signal the absent peer
