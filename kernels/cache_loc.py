"""Cache-location kernels: req_to_token <-> out_cache_loc, and the draft slot layout.

See docs/kernels.md (cache locations) and contract section 4. One Triton program per
request. Each program computes its request's packed start in out_cache_loc (the exclusive
cumsum of the earlier requests' lengths) itself, and loop bounds are read from memory: one
launch, no host sync, safe inside CUDA graph capture.
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

from kernels._scan import SUM_BLOCK, sum_before

_BLOCK = 128


# The pool's sizes are runtime values (docs/kernels.md, compiled variants).
@triton.jit(do_not_specialize=("stride_r2t", "max_context"))
def _packed_copy_kernel(
    req_pool_ptr, r2t_ptr, start_ptr, end_ptr, loc_ptr, stride_r2t, max_context,
    TO_POOL: tl.constexpr, BLOCK: tl.constexpr, BLOCK_B: tl.constexpr,
):
    """TO_POOL: req_to_token[req, start + j] = loc[packed + j]; else the reverse."""
    b = tl.program_id(0)
    req = tl.load(req_pool_ptr + b).to(tl.int64)
    start = tl.load(start_ptr + b).to(tl.int64)
    length = tl.load(end_ptr + b).to(tl.int64) - start
    # packed = sum of the lengths of requests 0..b-1 (the exclusive cumsum, per program).
    packed = sum_before(end_ptr, b, BLOCK_B) - sum_before(start_ptr, b, BLOCK_B)
    row = r2t_ptr + req * stride_r2t + start
    # A while loop: the Triton 3.6 interpreter cannot take a loaded scalar as a range bound.
    off = 0
    while off < length:
        j = off + tl.arange(0, BLOCK)
        ok = (j < length) & (start + j < max_context)
        if TO_POOL:
            loc = tl.load(loc_ptr + packed + j, mask=ok)
            tl.store(row + j, loc.to(tl.int32), mask=ok)
        else:
            slot = tl.load(row + j, mask=ok)
            tl.store(loc_ptr + packed + j, slot.to(tl.int64), mask=ok)
        off += BLOCK


def _packed_copy(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, to_pool):
    bs = req_pool_indices.shape[0]
    if bs == 0:
        return
    _packed_copy_kernel[(bs,)](
        req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc,
        req_to_token.stride(0), req_to_token.shape[1], TO_POOL=to_pool, BLOCK=_BLOCK,
        BLOCK_B=SUM_BLOCK,
    )


def assign_req_to_token_pool(req_pool_indices, req_to_token, start_offset, end_offset,
                             out_cache_loc):
    """Triton: req_to_token[req[b], start[b]:end[b]] = next (end-start) of out_cache_loc."""
    _packed_copy(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, True)


def assign_extend_cache_locs(req_pool_indices, req_to_token, start_offset, end_offset,
                             out_cache_loc):
    """Triton: out_cache_loc (packed in b order) = req_to_token[req[b], start[b]:end[b]]."""
    _packed_copy(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, False)


def _packed_index(req_pool_indices, start_offset, end_offset, total: int | None = None):
    """(request row, position) of every packed element, in b order. `total` (the packed
    length, when the caller knows it) keeps repeat_interleave from syncing with the host, so
    the reference also runs inside graph capture."""
    lens = (end_offset - start_offset).long()
    b = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens,
                                output_size=total)
    j = torch.arange(b.numel(), device=lens.device) - (torch.cumsum(lens, 0) - lens)[b]
    return req_pool_indices.long()[b], start_offset.long()[b] + j


def assign_req_to_token_pool_ref(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc):
    rows, pos = _packed_index(req_pool_indices, start_offset, end_offset)
    req_to_token[rows, pos] = out_cache_loc[: pos.numel()].to(req_to_token.dtype)


def assign_extend_cache_locs_ref(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc):
    rows, pos = _packed_index(req_pool_indices, start_offset, end_offset, out_cache_loc.shape[0])
    out_cache_loc[: pos.numel()] = req_to_token[rows, pos].to(out_cache_loc.dtype)


# The draft shape (topk, steps, page size) and the pool's sizes are runtime values: as
# constexprs or specialized ints, each combination the gate draws was a kernel compiled anew
# (docs/kernels.md, compiled variants); only the two block widths stay compile-time.
@triton.jit(do_not_specialize=("stride_r2t", "max_context", "topk", "num_steps", "page_size"))
def _draft_locs_kernel(
    req_pool_ptr, r2t_ptr, seq_lens_ptr, out_ptr, src_ptr, tgt_ptr, stride_r2t, max_context,
    topk, num_steps, page_size,
    BLOCK_OUT: tl.constexpr, BLOCK_COPY: tl.constexpr, HAS_COPY: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    row = r2t_ptr + tl.load(req_pool_ptr + b).to(tl.int64) * stride_r2t
    seq_len = tl.load(seq_lens_ptr + b).to(tl.int64)
    last = seq_len % page_size
    base = seq_len - last
    npb = (last + num_steps + page_size - 1) // page_size  # pages per branch
    branch_span = npb * page_size

    # Lane (k, s) in layout [topk, num_steps]: position base + k*npb*page + last + s.
    idx = tl.arange(0, BLOCK_OUT)
    n_out = topk * num_steps
    ok = idx < n_out
    pos = base + (idx // num_steps) * branch_span + last + idx % num_steps
    slot = tl.load(row + pos, mask=ok & (pos < max_context), other=0)
    tl.store(out_ptr + b * n_out + idx, slot.to(tl.int64), mask=ok)

    if HAS_COPY:  # topk > 1 and page_size > 1
        # Prefix-tail copy lanes (k-1, j): branch k's first page repeats positions base..base+j.
        n_copy = (topk - 1) * (page_size - 1)
        c = tl.arange(0, BLOCK_COPY)
        c_ok = c < n_copy
        k = c // (page_size - 1) + 1
        j = c % (page_size - 1)
        real = c_ok & (j < last)  # lanes with j >= last copy reserved slot 0 onto itself
        src = tl.load(row + base + j, mask=real & (base + j < max_context), other=0)
        tgt_pos = base + k * branch_span + j
        tgt = tl.load(row + tgt_pos, mask=real & (tgt_pos < max_context), other=0)
        tl.store(src_ptr + b * n_copy + c, src.to(tl.int64), mask=c_ok)
        tl.store(tgt_ptr + b * n_copy + c, tgt.to(tl.int64), mask=c_ok)


def assign_draft_cache_locs(req_pool_indices, req_to_token, seq_lens, out_cache_loc,
                            source_cache_loc, target_cache_loc, topk, num_steps, page_size):
    """Triton: draft write slots [bs, topk, num_steps] and the prefix-tail copy lanes."""
    bs = seq_lens.shape[0]
    if bs == 0:
        return
    n_copy = (topk - 1) * (page_size - 1)
    _draft_locs_kernel[(bs,)](
        req_pool_indices, req_to_token, seq_lens, out_cache_loc, source_cache_loc,
        target_cache_loc, req_to_token.stride(0), req_to_token.shape[1],
        topk, num_steps, page_size,
        BLOCK_OUT=triton.next_power_of_2(topk * num_steps),
        BLOCK_COPY=triton.next_power_of_2(max(n_copy, 1)), HAS_COPY=n_copy > 0,
    )


def assign_draft_cache_locs_ref(req_pool_indices, req_to_token, seq_lens, out_cache_loc,
                                source_cache_loc, target_cache_loc, topk, num_steps, page_size):
    """Plain torch: the contract section 4 formula, vectorized over [bs, topk, steps]."""
    bs = seq_lens.shape[0]
    dev = seq_lens.device
    rows = req_to_token[req_pool_indices.long()].long()  # [bs, max_context]
    seq = seq_lens.long()[:, None, None]
    last = seq % page_size
    base = seq - last
    span = (last + num_steps + page_size - 1) // page_size * page_size
    k = torch.arange(topk, device=dev)[None, :, None]
    s = torch.arange(num_steps, device=dev)[None, None, :]
    pos = base + k * span + last + s
    out_cache_loc.copy_(rows.gather(1, pos.reshape(bs, -1)).reshape(-1))
    if topk == 1 or page_size == 1:
        return
    k = torch.arange(1, topk, device=dev)[None, :, None]
    j = torch.arange(page_size - 1, device=dev)[None, None, :]
    real = (j < last).expand(bs, topk - 1, page_size - 1)
    src_pos = (base + j).expand(bs, topk - 1, page_size - 1)
    tgt_pos = base + k * span + j
    zero = torch.zeros((), dtype=torch.long, device=dev)

    def lanes(p):  # slot at p where the lane is real, else 0; p clamped so gather stays legal
        got = rows.gather(1, p.clamp(max=rows.shape[1] - 1).reshape(bs, -1))
        return torch.where(real.reshape(bs, -1), got, zero).reshape(-1)

    source_cache_loc.copy_(lanes(src_pos))
    target_cache_loc.copy_(lanes(tgt_pos))
