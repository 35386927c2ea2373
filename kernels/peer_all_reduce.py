"""One-shot all-reduce over peer memory, optionally fused with the residual add and RMSNorm
that follow a row-parallel projection: one launch instead of an NCCL call and a norm.

`peer_all_reduce(x, peers, residual=None, weight=None, eps=0.0)` sums `x` [n, h] over the
ranks of `peers` (a PeerBuffers: every rank's buffer and signal pad, mapped into this
process). Without `weight` it returns the sum; with it, `(norm(sum + residual), sum +
residual)` (residual None: `(norm(sum), sum)`), the same rounding as kernels/norm.py: the
sum rounded to x's dtype, the stream added in fp32 and rounded, normalised in fp32.

How a program (a block of rows) runs on every rank at once:
1. it copies its rows of this rank's `x` into this rank's peer buffer;
2. a barrier with the same program on every other rank (release: 1's writes are visible to
   the peers; acquire: theirs to us);
3. it reads its rows from every rank's buffer, sums in fp32 (rank order, so every rank gets
   the same bits), and writes the epilogue;
4. a second barrier: no rank overwrites its buffer (the next call's step 1) while a peer is
   still reading it.
A barrier is a pair of flags per (program, peer) in the signal pads: set 0 -> 1 on the peer,
then wait for ours to go 1 -> 0 (compare-and-swap, system scope). Every flag is back at 0
when the barrier ends, so the same kernel replays inside a CUDA graph with nothing reset by
the host. Every wait also reads an abort word in pinned host memory: a peer that died never
arrives, and the host ends the wait the way ncclCommAbort ends NCCL's (the results are then
garbage, and the group is failed). Programs wait only on their namesakes on the other ranks; the grid is capped at
PeerBuffers.max_programs so every program is resident at once and none waits on one that
cannot start.

`peer_all_reduce_ref` is the same sum through the process group's all-reduce (NCCL on CUDA,
gloo on CPU) and kernels/norm.py's reference: what the engine runs wherever the peer path
does not apply (CPU, messages above the crossover), and what the kernel tests compare with.
The kernel needs every rank's buffer mapped (torch.distributed._symmetric_memory, CUDA): it
has no CPU form; under the Triton interpreter it runs with one rank only (tests).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

from faultpoints import on as fault_on
from kernels.norm import rms_norm_ref

ABORT_EVERY = tl.constexpr(1024)  # failed compare-and-swaps between reads of the abort word


@dataclass(frozen=True)
class PeerBuffers:
    """Every rank's buffer and signal pad, as this rank sees them (device addresses)."""
    buffer_ptrs: int      # device address of `world` uint64 buffer addresses, rank order
    signal_ptrs: int      # device address of `world` uint64 signal pad addresses
    abort: torch.Tensor   # int32 [1] the device reads and the host writes (pinned): nonzero
    #                       ends every wait (specdec/tp/peer_memory.py)
    offset: int           # bytes from each buffer address to the usable region
    nbytes: int           # usable bytes in each rank's buffer
    max_programs: int     # programs a call may use (signal pad slots / world, SM count)
    rank: int
    world: int
    group_name: str       # the process group the buffers were exchanged over
    # What owns the memory behind the addresses above (the symmetric buffer and its handle):
    # held here so the addresses stay mapped while anything can still pass them to a kernel.
    # A PeerBuffers kept without it pointed at freed memory (an illegal access on launch).
    owner: object = field(default=None, compare=False, repr=False)


@triton.jit
def _swap(flag, expect, to, abort_ptr, SEM: tl.constexpr):
    """Compare-and-swap `flag` from `expect` to `to`, retrying until it succeeds or the host
    raises the abort word (a peer died: nothing will ever arrive). The abort word sits in
    host memory, a PCIe read away: it is read once every ABORT_EVERY failed tries, so a
    wait that succeeds soon costs no such read."""
    old = tl.atomic_cas(flag, expect, to, sem=SEM, scope="sys")
    spins = 0
    while old != expect:
        spins += 1
        if spins % ABORT_EVERY == 0:
            if tl.load(abort_ptr, volatile=True) != 0:
                old = expect  # give up: the group is being aborted
        if old != expect:
            old = tl.atomic_cas(flag, expect, to, sem=SEM, scope="sys")


@triton.jit
def _barrier(pads, program, abort_ptr, rank, WORLD: tl.constexpr, SEM: tl.constexpr):
    """Meet program `program` of every rank: raise our flag in each peer's pad, then lower
    each peer's flag in ours as it arrives. Every flag ends at 0."""
    local = tl.load(pads + rank).to(tl.pointer_type(tl.int32))
    for peer in tl.static_range(WORLD):
        remote = tl.load(pads + peer).to(tl.pointer_type(tl.int32))
        _swap(remote + program * WORLD + rank, 0, 1, abort_ptr, SEM)
    for peer in tl.static_range(WORLD):
        _swap(local + program * WORLD + peer, 1, 0, abort_ptr, SEM)


# The batch's row count and the rank are runtime values: specialized (n_rows == 1, a multiple
# of 16, other; rank == 1) or constexpr, each was a kernel compiled anew per batch shape and
# per rank (docs/kernels.md, compiled variants). The row width keeps its hints (vector loads).
@triton.jit(do_not_specialize=("n_rows", "rank"))
def _peer_all_reduce_kernel(x_ptr, buf_ptrs, pad_ptrs, abort_ptr, res_ptr, w_ptr, out_ptr, sum_ptr,
                            n_rows, n_cols, eps, offset_elems, rank,
                            stride_x, stride_res, stride_out, stride_sum,
                            WORLD: tl.constexpr, HAS_NORM: tl.constexpr,
                            HAS_RES: tl.constexpr, STALE: tl.constexpr, BLOCK: tl.constexpr):
    program = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    bufs = buf_ptrs.to(tl.pointer_type(tl.uint64))
    pads = pad_ptrs.to(tl.pointer_type(tl.uint64))
    mine = tl.load(bufs + rank).to(tl.pointer_type(x_ptr.dtype.element_ty)) + offset_elems
    # Rows program, program + programs, ...: while loops, not range() (the Triton 3.6
    # interpreter cannot range over a program id).
    row = program
    while row < n_rows:
        if not STALE:  # the fault tp_peer_buffer_stale: the peers read the last call's rows
            x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=ok, other=0.0)
            tl.store(mine + row.to(tl.int64) * n_cols + cols, x, mask=ok)
        row += programs
    tl.debug_barrier()
    _barrier(pads, program, abort_ptr, rank, WORLD, "acq_rel")
    tl.debug_barrier()
    row = program
    while row < n_rows:
        r64 = row.to(tl.int64)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for peer in tl.static_range(WORLD):  # rank order: the same bits on every rank
            theirs = tl.load(bufs + peer).to(tl.pointer_type(x_ptr.dtype.element_ty))
            acc += tl.load(theirs + offset_elems + r64 * n_cols + cols, mask=ok,
                           other=0.0).to(tl.float32)
        s = acc.to(x_ptr.dtype.element_ty)  # the all-reduce's result, in x's dtype
        if HAS_NORM:
            if HAS_RES:
                r = tl.load(res_ptr + r64 * stride_res + cols, mask=ok, other=0.0)
                s = (s.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)
            tl.store(sum_ptr + r64 * stride_sum + cols, s, mask=ok)
            sf = s.to(tl.float32)
            rstd = 1.0 / tl.sqrt(tl.sum(sf * sf, 0) / n_cols + eps)
            y = (sf * rstd).to(x_ptr.dtype.element_ty)
            w = tl.load(w_ptr + cols, mask=ok, other=0.0)
            tl.store(out_ptr + r64 * stride_out + cols,
                     (w.to(tl.float32) * y.to(tl.float32)).to(out_ptr.dtype.element_ty),
                     mask=ok)
        else:
            tl.store(out_ptr + r64 * stride_out + cols, s, mask=ok)
        row += programs
    tl.debug_barrier()
    _barrier(pads, program, abort_ptr, rank, WORLD, "relaxed")


def fits(x: torch.Tensor, peers: PeerBuffers) -> bool:
    """Whether `x` fits the peer buffers (its rows at the buffer's start)."""
    return x.numel() * x.element_size() <= peers.nbytes


def peer_all_reduce(x: torch.Tensor, peers: PeerBuffers, residual: torch.Tensor | None = None,
                    weight: torch.Tensor | None = None, eps: float = 0.0):
    """Triton; see the module docstring. Every rank calls it with the same shapes."""
    if residual is not None and weight is None:
        raise ValueError("peer_all_reduce: a residual needs a norm weight (the add is fused "
                         "into the norm); got residual and weight=None")
    if not fits(x, peers):
        raise ValueError(f"peer_all_reduce: {x.numel() * x.element_size()} bytes do not fit "
                         f"the peer buffers' {peers.nbytes}; use the process group's all-reduce")
    if peers.offset % x.element_size():
        raise ValueError(f"peer_all_reduce: buffer offset {peers.offset} is not a multiple of "
                         f"{x.dtype}'s {x.element_size()} bytes")
    h = x.shape[-1]
    x2 = x.reshape(-1, h)
    x2 = x2 if x2.stride(-1) == 1 else x2.contiguous()
    n = x2.shape[0]
    out_dtype = x.dtype if weight is None else torch.promote_types(weight.dtype, x.dtype)
    out = torch.empty((n, h), dtype=out_dtype, device=x.device)
    total = torch.empty_like(x2) if weight is not None else out
    res2 = residual.reshape(-1, h) if residual is not None else x2
    res2 = res2 if res2.stride(-1) == 1 else res2.contiguous()
    if n:
        block = triton.next_power_of_2(h)
        _peer_all_reduce_kernel[(min(n, peers.max_programs),)](
            x2, peers.buffer_ptrs, peers.signal_ptrs, peers.abort, res2,
            weight if weight is not None else x2, out, total, n, h, float(eps),
            peers.offset // x.element_size(), peers.rank,
            x2.stride(0), res2.stride(0), out.stride(0), total.stride(0),
            WORLD=peers.world, HAS_NORM=weight is not None,
            HAS_RES=residual is not None, STALE=fault_on("tp_peer_buffer_stale"), BLOCK=block,
            num_warps=min(16, max(1, block // 256)))
    if weight is None:
        return out.view(x.shape)
    return out.view(x.shape), total.view(x.shape)


def peer_all_reduce_ref(x: torch.Tensor, peers, residual: torch.Tensor | None = None,
                        weight: torch.Tensor | None = None, eps: float = 0.0):
    """The same through the process group named `peers.group_name` (its all-reduce, then
    kernels/norm.py's reference); `peers` needs only `group_name` here."""
    ops = torch.ops._c10d_functional
    s = ops.wait_tensor(ops.all_reduce(x.contiguous(), "sum", peers.group_name))
    if weight is None:
        return s
    if residual is None:
        return rms_norm_ref(s, weight, eps), s
    return rms_norm_ref(s, weight, eps, residual)
