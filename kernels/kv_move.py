"""Move KV rows inside pool buffers: `buf[tgt_loc] = buf[src_loc]` for every buffer.

See docs/kernels.md (move_kv_cache) and contract section 7. Ranges may overlap (a target
can also be a source), so every source row is gathered into a temporary by one launch before
a second launch scatters it: a single in-place pass would read rows it already overwrote
(the `kv_move_in_place` bug). Grids depend on shapes only, so the wrapper is graph safe.

Buffers that are evenly spaced views of one tensor (a KV pool's layers) move together: one
gather and one scatter launch for all of them, not two per buffer.
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl


@triton.jit
def _copy_rows_kernel(
    dst_ptr, dst_loc_ptr, src_ptr, src_loc_ptr, row_len, stride_dst, stride_src,
    stride_dst_buf, stride_src_buf,
    DST_INDEXED: tl.constexpr, SRC_INDEXED: tl.constexpr, BLOCK: tl.constexpr,
):
    """dst[buf, dst_loc[i] or i] = src[buf, src_loc[i] or i]; grid (rows, blocks, buffers)."""
    i = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    buf = tl.program_id(2).to(tl.int64)
    dst_ptr += buf * stride_dst_buf
    src_ptr += buf * stride_src_buf
    ok = offs < row_len
    src_row = i
    if SRC_INDEXED:
        src_row = tl.load(src_loc_ptr + i).to(tl.int64)
    dst_row = i
    if DST_INDEXED:
        dst_row = tl.load(dst_loc_ptr + i).to(tl.int64)
    x = tl.load(src_ptr + src_row * stride_src + offs, mask=ok)
    tl.store(dst_ptr + dst_row * stride_dst + offs, x, mask=ok)


def _copy_rows(dst, dst_loc, src, src_loc):
    """dst, src `[B, rows, F]` (any buffer stride)."""
    n, row_len = (dst_loc if dst_loc is not None else src_loc).shape[0], dst.shape[2]
    block = min(triton.next_power_of_2(row_len), 1024)
    _copy_rows_kernel[(n, triton.cdiv(row_len, block), dst.shape[0])](
        dst, dst_loc if dst_loc is not None else dst, src,
        src_loc if src_loc is not None else src, row_len, dst.stride(1), src.stride(1),
        dst.stride(0), src.stride(0),
        DST_INDEXED=dst_loc is not None, SRC_INDEXED=src_loc is not None, BLOCK=block,
    )


def _as_rows(buf: torch.Tensor) -> torch.Tensor:
    flat = buf.reshape(buf.shape[0], -1)  # any trailing shape becomes one row of F
    assert flat.data_ptr() == buf.data_ptr() and flat.stride(1) == 1, \
        "buffer must be viewable as [S, F] without a copy"
    return flat


def _stacked(buffers: list[torch.Tensor]) -> list[torch.Tensor]:
    """`[B, S, F]` views: one over all buffers when they are evenly spaced views of one
    storage with one shape and dtype (a KV pool), else one per buffer."""
    flats = [_as_rows(b) for b in buffers]
    first = flats[0]
    same = all(f.shape == first.shape and f.stride() == first.stride() and f.dtype == first.dtype
               and f.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
               for f in flats)
    if same and len(flats) > 1:
        step = flats[1].data_ptr() - first.data_ptr()
        if step > 0 and step % first.element_size() == 0 and all(
                f.data_ptr() - first.data_ptr() == i * step for i, f in enumerate(flats)):
            return [first.as_strided((len(flats), *first.shape),
                                     (step // first.element_size(), *first.stride()))]
    return [f.unsqueeze(0) for f in flats]


def move_kv_cache(k_or_v_buffers, tgt_loc, src_loc):
    """Triton: for each buffer, gather buf[src_loc] into a temporary, then scatter to tgt_loc."""
    n = tgt_loc.shape[0]
    assert src_loc.shape[0] == n
    if n == 0 or not k_or_v_buffers:
        return
    for stack in _stacked(list(k_or_v_buffers)):
        if stack.shape[2] == 0:
            continue
        tmp = torch.empty((stack.shape[0], n, stack.shape[2]), dtype=stack.dtype,
                          device=stack.device)
        _copy_rows(tmp, None, stack, src_loc)  # gather: every source is read ...
        _copy_rows(stack, tgt_loc, tmp, None)  # ... before any target is written


def move_kv_cache_ref(k_or_v_buffers, tgt_loc, src_loc):
    """Plain torch: advanced indexing on the right makes a copy, so gather precedes scatter."""
    for buf in k_or_v_buffers:
        buf[tgt_loc] = buf[src_loc]
