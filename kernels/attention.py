"""Paged attention over a page table, with per-row KV length and an optional custom mask.

See docs/kernels.md (paged_attention). One Triton program handles one query row and one KV
head, i.e. the whole GQA group of query heads that read that KV head, so each KV tile is
loaded once per group. The KV loop runs over virtual positions in blocks of BLOCK_N up to the
row's kv length (read from memory: no host sync, so the wrapper is CUDA-graph safe), maps
positions to slots through the page table and keeps an online softmax in fp32.

Split-KV ("flash decoding"): with few (row, KV head) pairs, e.g. decode at batch 1, those
programs cannot fill the GPU, so the KV axis is also split over a third grid axis of
num_splits programs. Each writes fp32 partials (running max m, sum l, unnormalised acc) to
scratch, and a second kernel combines them per (row, query head). num_splits depends only on
shapes and the device (`_num_splits`), never on values, so the wrapper stays graph safe.
"""
from __future__ import annotations

import functools

import torch

from kernels._triton_env import INTERPRET  # (must precede `import triton`)
import triton
import triton.language as tl

from kernels.rope import rope_store_kv_ref

_LOG2E = 1.4426950408889634
_BLOCK_N = 64
# Split-KV heuristic: aim for this many programs per SM (several resident per SM hide latency),
# at most _MAX_SPLITS splits, and at most _MAX_SCRATCH_FLOATS fp32 of acc scratch per call.
_PROGRAMS_PER_SM = 4
_MAX_SPLITS = 128
_MAX_SCRATCH_FLOATS = 1 << 22  # 16 MiB
_COMBINE_BLOCK_S = 32  # splits per tile in the combine kernel
# Warps per program: the tiles are small (a GQA group padded to 16 heads x 64 positions), and
# two warps let more programs stay resident, which is what a memory-bound loop without
# software pipelining needs. Measured on an H100 (bf16, context 1000, page size 1, per call
# with the combine): llama-8b shapes at 8 rows 22.1 -> 14.8 us, 16 rows 44.2 -> 31.5 us,
# 64 rows 126.8 -> 103.0 us; llama-1b shapes 8 rows 10.6 -> 9.7 us; 1 row within 0.25 us
# (bench/results/attention-warps-h100-2026-11-27.txt).
_NUM_WARPS = 2


# Ints that follow the batch or the pool (not the model's shapes) are not specialized: each
# value class (== 1, a multiple of 16, other) of each would be a kernel compiled anew on a
# machine's first gate run (docs/kernels.md). The model's strides keep their divisibility
# hints (aligned K/V loads).
_BATCH_INTS = ("max_pages", "mask_numel", "num_splits", "stride_pt", "stride_pmr",
               "stride_pmh")


@triton.jit(do_not_specialize=_BATCH_INTS)
def _paged_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, pt_ptr, row_seq_ptr, kv_len_ptr, mstart_ptr, moff_ptr, mask_ptr,
    pm_ptr, pl_ptr, pacc_ptr,
    kn_ptr, vn_ptr, cos_ptr, sin_ptr, pos_ptr, wloc_ptr,
    qk_scale, page_size, max_pages, mask_numel, num_splits,
    stride_qr, stride_qh, stride_kr, stride_kh, stride_vr, stride_vh, stride_or, stride_oh,
    stride_pt, stride_pmr, stride_pmh, stride_par, stride_pah, stride_pas,
    stride_knr, stride_knh, stride_vnr, stride_vnh, stride_cos,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    F32_DOT: tl.constexpr, SPLIT: tl.constexpr, ROPE: tl.constexpr,
):
    """Grid (R, Hkv, num_splits). SPLIT=False (num_splits == 1): the whole row, output written
    directly; pm/pl/pacc are unused. SPLIT=True: split s covers the row's positions
    [s*chunk, (s+1)*chunk) with chunk = ceil(kv_len / num_splits) rounded up to BLOCK_N, and
    writes fp32 partials m, l [R, Hq, num_splits] and acc [R, Hq, num_splits, D]; an empty
    split writes the neutral partial (m=-inf, l=0, acc=0).

    ROPE=True (the `rope` argument of `paged_attention`: decode rows): q is unrotated and
    rotated here at the row's position, and the program whose range holds the row's last
    position (kv_len - 1) first stores that position's K (rotated) and V from kn/vn at
    wloc[r], as `rope_store_kv` would, then reads it back like every other position (a block
    barrier orders the store before the loads)."""
    r = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1).to(tl.int64)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    # BLOCK_H >= 16 pads the group so tl.dot has legal shapes; padded heads are masked out.
    h_ok = offs_h < GROUP
    d_ok = offs_d < HEAD_DIM
    heads = kvh * GROUP + offs_h
    q = tl.load(q_ptr + r * stride_qr + heads[:, None] * stride_qh + offs_d[None, :],
                mask=h_ok[:, None] & d_ok[None, :], other=0.0)
    if ROPE:
        # Rotate-half in fp32, rounded to q's dtype: rope_store_kv's arithmetic (kernels/rope.py).
        partner = (offs_d + HEAD_DIM // 2) % HEAD_DIM
        sign = tl.where(offs_d < HEAD_DIM // 2, -1.0, 1.0)
        rpos = tl.load(pos_ptr + r).to(tl.int64)
        cos = tl.load(cos_ptr + rpos * stride_cos + offs_d)
        sin = tl.load(sin_ptr + rpos * stride_cos + offs_d)
        q_p = tl.load(q_ptr + r * stride_qr + heads[:, None] * stride_qh + partner[None, :],
                      mask=h_ok[:, None] & d_ok[None, :], other=0.0)
        q = (q.to(tl.float32) * cos[None, :]
             + (sign[None, :] * q_p.to(tl.float32)) * sin[None, :]).to(q.dtype)
    if F32_DOT:
        q = q.to(tl.float32)

    kv_len = tl.load(kv_len_ptr + r)
    seq = tl.load(row_seq_ptr + r).to(tl.int64)
    m_start = tl.load(mstart_ptr + r).to(tl.int64)
    m_off = tl.load(moff_ptr + r).to(tl.int64)
    # A row without a mask (m_off < 0) gets a mask start past every valid position, so the
    # test in the loop is one block comparison (`pos >= m_start`). Folding the scalar
    # `m_off >= 0` into the block mask instead is int data under the Triton 3.9 interpreter,
    # whose loads reject it ('mask has unsupported dtype').
    m_start = tl.where(m_off >= 0, m_start, kv_len.to(tl.int64))

    if SPLIT:
        # The chunk follows this row's kv_len (read on device), so every split of a row gets
        # an equal share whatever the page table's width; BLOCK_N-aligned, so no block
        # straddles two splits.
        kv64 = kv_len.to(tl.int64)
        chunk = (kv64 + num_splits - 1) // num_splits
        chunk = (chunk + BLOCK_N - 1) // BLOCK_N * BLOCK_N
        start = tl.program_id(2).to(tl.int64) * chunk
        end = tl.minimum(kv64, start + chunk)
    else:
        start = 0
        end = kv_len

    if ROPE:
        last = kv_len.to(tl.int64) - 1
        if (start <= last) & (last < end):  # this program reads the new position: it stores it
            slot_new = tl.load(wloc_ptr + r).to(tl.int64)
            kn = tl.load(kn_ptr + r * stride_knr + kvh * stride_knh + offs_d)
            kn_p = tl.load(kn_ptr + r * stride_knr + kvh * stride_knh + partner)
            k_rot = (kn.to(tl.float32) * cos + (sign * kn_p.to(tl.float32)) * sin).to(kn.dtype)
            tl.store(k_ptr + slot_new * stride_kr + kvh * stride_kh + offs_d,
                     k_rot.to(k_ptr.dtype.element_ty))
            vn = tl.load(vn_ptr + r * stride_vnr + kvh * stride_vnh + offs_d)
            tl.store(v_ptr + slot_new * stride_vr + kvh * stride_vh + offs_d,
                     vn.to(v_ptr.dtype.element_ty))
        tl.debug_barrier()

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    # A while loop, not `for range(kv_len)`: the Triton 3.6 interpreter cannot use a loaded
    # scalar as a range bound under NumPy 2.x (int() of a 1-element array). The cost on GPU:
    # a while loop is not software-pipelined; restore the `for` once the interpreter is fixed.
    while start < end:
        pos = (start + offs_n).to(tl.int64)
        valid = pos < end
        page_idx = pos // page_size
        page = tl.load(pt_ptr + seq * stride_pt + page_idx,
                       mask=valid & (page_idx < max_pages), other=0)
        slot = page.to(tl.int64) * page_size + pos % page_size
        # Positions at or past mask_start are visible only where the custom mask says so.
        midx = m_off + pos - m_start
        need = valid & (pos >= m_start)
        allowed = tl.load(mask_ptr + midx, mask=need & (midx < mask_numel), other=0)
        visible = valid & ((~need) | (allowed != 0))

        kv_ok = valid[None, :] & d_ok[:, None]
        k = tl.load(k_ptr + slot[None, :] * stride_kr + kvh * stride_kh + offs_d[:, None],
                    mask=kv_ok, other=0.0)  # [HEAD_DIM, BLOCK_N]
        if F32_DOT:
            qk = tl.dot(q, k.to(tl.float32), input_precision="ieee")
        else:
            qk = tl.dot(q, k)
        qk = tl.where(visible[None, :], qk * qk_scale, float("-inf"))

        # Online softmax in base 2; m_safe keeps fully masked blocks from producing NaNs.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(qk - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        # V only where visible: a masked slot may hold garbage (NaN * 0 would poison acc).
        v = tl.load(v_ptr + slot[:, None] * stride_vr + kvh * stride_vh + offs_d[None, :],
                    mask=visible[:, None] & d_ok[None, :], other=0.0)  # [BLOCK_N, HEAD_DIM]
        if F32_DOT:
            pv = tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
        start += BLOCK_N

    if SPLIT:
        # Unnormalised partials; an empty or fully masked split stores m=-inf, l=0, acc=0.
        split = tl.program_id(2).to(tl.int64)
        ml_off = r * stride_pmr + heads * stride_pmh + split
        tl.store(pm_ptr + ml_off, m_i, mask=h_ok)
        tl.store(pl_ptr + ml_off, l_i, mask=h_ok)
        tl.store(pacc_ptr + r * stride_par + heads[:, None] * stride_pah + split * stride_pas
                 + offs_d[None, :], acc, mask=h_ok[:, None] & d_ok[None, :])
    else:
        # Rows that see nothing (kv_len 0 or everything masked) have l_i == 0 and acc == 0.
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(o_ptr + r * stride_or + heads[:, None] * stride_oh + offs_d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=h_ok[:, None] & d_ok[None, :])


@triton.jit(do_not_specialize=("num_splits", "stride_pmr", "stride_pmh"))
def _combine_splits_kernel(
    pm_ptr, pl_ptr, pacc_ptr, o_ptr,
    stride_pmr, stride_pmh, stride_par, stride_pah, stride_pas, stride_or, stride_oh,
    num_splits, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Grid (R, Hq): out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s, M = max_s m_s.

    Two passes over tiles of BLOCK_S splits: the max, then the weighted sums. Empty splits
    (m=-inf) weigh 0; a row that sees nothing (all l == 0, acc == 0) gives zeros."""
    r = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    ml_base = r * stride_pmr + h * stride_pmh
    acc_base = r * stride_par + h * stride_pah

    # num_splits is a runtime value (a constexpr compiled a kernel per split count); while
    # loops, as in the kernel above, for the Triton 3.6 interpreter.
    m_max = tl.full([BLOCK_S], float("-inf"), tl.float32)
    s0 = 0
    while s0 < num_splits:
        s_ok = s0 + offs_s < num_splits
        m = tl.load(pm_ptr + ml_base + s0 + offs_s, mask=s_ok, other=float("-inf"))
        m_max = tl.maximum(m_max, m)
        s0 += BLOCK_S
    big_m = tl.max(m_max, 0)
    big_m = tl.where(big_m == float("-inf"), 0.0, big_m)

    l_sum = tl.zeros([BLOCK_S], tl.float32)
    acc = tl.zeros([HEAD_DIM], tl.float32)
    s0 = 0
    while s0 < num_splits:
        s_ok = s0 + offs_s < num_splits
        m = tl.load(pm_ptr + ml_base + s0 + offs_s, mask=s_ok, other=float("-inf"))
        l = tl.load(pl_ptr + ml_base + s0 + offs_s, mask=s_ok, other=0.0)
        a = tl.load(pacc_ptr + acc_base + (s0 + offs_s)[:, None].to(tl.int64) * stride_pas
                    + offs_d[None, :], mask=s_ok[:, None], other=0.0)
        w = tl.exp2(m - big_m)  # 0 for empty splits and padding (m = -inf)
        l_sum += w * l
        acc += tl.sum(w[:, None] * a, 0)
        s0 += BLOCK_S
    denom = tl.sum(l_sum, 0)
    out = acc / tl.where(denom > 0, denom, 1.0)
    tl.store(o_ptr + r * stride_or + h * stride_oh + offs_d, out.to(o_ptr.dtype.element_ty))


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _target_programs(device: torch.device) -> int:
    """Programs that fill `device`: _PROGRAMS_PER_SM per SM on a GPU; 0 (no split) on CPU or
    under the interpreter, where splitting only adds work (tests force it instead)."""
    if device.type != "cuda" or INTERPRET:
        return 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _PROGRAMS_PER_SM * _sm_count(index)


def _num_splits(R: int, Hq: int, Hkv: int, D: int, max_kv: int, device) -> int:
    """The automatic split count: a pure function of shapes and the device (graph safe).

    ceil(target_programs / (R*Hkv)), clamped to [1, min(ceil(max_kv / BLOCK_N), _MAX_SPLITS)]
    and so that the acc scratch R*Hq*num_splits*D stays under _MAX_SCRATCH_FLOATS; a large R
    already fills the GPU and gets 1. max_kv is the page table's width in positions."""
    target = _target_programs(torch.device(device))
    n = -(-target // max(1, R * Hkv))
    n = min(n, -(-max_kv // _BLOCK_N), _MAX_SPLITS, _MAX_SCRATCH_FLOATS // max(1, R * Hq * D))
    return max(1, n)


def _check_rope(rope, q, k_buffer) -> None:
    k, v, cos, sin, positions, write_loc = rope
    R, _, D = q.shape
    if k.shape != (R, k_buffer.shape[1], D) or v.shape != k.shape:
        raise ValueError(f"paged_attention rope: k {tuple(k.shape)} and v {tuple(v.shape)} "
                         f"must be [rows, kv heads, head dim] = {(R, k_buffer.shape[1], D)}")
    if positions.shape[0] != R or write_loc.shape[0] != R:
        raise ValueError(f"paged_attention rope: one position and one write slot a row "
                         f"({R} rows), got {positions.shape[0]} and {write_loc.shape[0]}")
    if cos.shape != sin.shape or cos.shape[1] != D or cos.stride(1) != 1 or sin.stride(1) != 1 \
            or cos.stride(0) != sin.stride(0):
        raise ValueError(f"paged_attention rope: cos {tuple(cos.shape)} and sin "
                         f"{tuple(sin.shape)} must be [max_position, {D}] tables of one layout")


def paged_attention(q, k_buffer, v_buffer, page_table, row_seq, row_kv_len, row_mask_start,
                    row_mask_offset, custom_mask, page_size, sm_scale, num_splits=None,
                    rope=None):
    """Triton paged attention; see module docstring and docs/kernels.md.

    `num_splits`: KV splits per (row, KV head); None = `_num_splits` (shapes and device
    only). 1 is the single-pass kernel; more adds fp32 scratch and a combine launch.

    `rope` (decode rows): (k, v, cos, sin, positions, write_loc). q is then unrotated: each
    row's q and k are rotated at its position and its k and v stored at its write slot, as
    `rope_store_kv(q, k, v, cos, sin, positions, k_buffer, v_buffer, write_loc)` would, in
    this launch. Each row must have exactly one new position, its last (kv_len - 1), at
    write_loc, and read no other row's new one: a decode batch."""
    R, Hq, D = q.shape
    Hkv = k_buffer.shape[1]
    assert Hq % Hkv == 0 and D >= 16 and D & (D - 1) == 0, (Hq, Hkv, D)
    assert k_buffer.stride(-1) == 1 and v_buffer.stride(-1) == 1
    if rope is not None:
        _check_rope(rope, q, k_buffer)
    if q.stride(-1) != 1:
        q = q.contiguous()
    out = torch.empty_like(q)
    if R == 0:
        return out
    group = Hq // Hkv
    # Same-dtype fp16/bf16 uses the tensor-core dot; fp32 or mixed dtypes use an exact fp32 dot
    # (TF32 would miss the fp32 tolerance).
    f32_dot = (k_buffer.dtype == torch.float32 or q.dtype != k_buffer.dtype
               or v_buffer.dtype != k_buffer.dtype)
    mask_u8 = custom_mask.reshape(-1).view(torch.uint8)  # bool pointers are awkward in Triton
    if num_splits is None:
        num_splits = _num_splits(R, Hq, Hkv, D, page_table.shape[1] * page_size, q.device)
    num_splits = max(1, int(num_splits))
    split = num_splits > 1
    if split:  # shape-only scratch, fully written by the split kernel (empty splits included)
        part_m = torch.empty((R, Hq, num_splits), dtype=torch.float32, device=q.device)
        part_l = torch.empty_like(part_m)
        part_acc = torch.empty((R, Hq, num_splits, D), dtype=torch.float32, device=q.device)
    else:  # unused by the single-pass kernel
        part_m = part_l = part_acc = out
    if rope is not None:
        k_new, v_new, cos, sin, positions, write_loc = rope
        if k_new.stride(-1) != 1:
            k_new = k_new.contiguous()
        if v_new.stride(-1) != 1:
            v_new = v_new.contiguous()
        new_strides = (k_new.stride(0), k_new.stride(1), v_new.stride(0), v_new.stride(1),
                       cos.stride(0))
    else:  # unused without ROPE
        k_new = v_new = cos = sin = positions = write_loc = q
        new_strides = (0, 0, 0, 0, 0)
    _paged_attention_kernel[(R, Hkv, num_splits)](
        q, k_buffer, v_buffer, out, page_table, row_seq, row_kv_len, row_mask_start,
        row_mask_offset, mask_u8, part_m, part_l, part_acc,
        k_new, v_new, cos, sin, positions, write_loc,
        float(sm_scale) * _LOG2E, page_size, page_table.shape[1], mask_u8.numel(), num_splits,
        q.stride(0), q.stride(1), k_buffer.stride(0), k_buffer.stride(1),
        v_buffer.stride(0), v_buffer.stride(1), out.stride(0), out.stride(1),
        page_table.stride(0),
        part_m.stride(0) if split else 0, part_m.stride(1) if split else 0,
        part_acc.stride(0) if split else 0, part_acc.stride(1) if split else 0,
        part_acc.stride(2) if split else 0,
        *new_strides,
        GROUP=group, HEAD_DIM=D, BLOCK_H=max(16, triton.next_power_of_2(group)),
        BLOCK_N=_BLOCK_N, F32_DOT=f32_dot, SPLIT=split, ROPE=rope is not None,
        num_warps=_NUM_WARPS,
    )
    if split:
        _combine_splits_kernel[(R, Hq)](
            part_m, part_l, part_acc, out,
            part_m.stride(0), part_m.stride(1), part_acc.stride(0), part_acc.stride(1),
            part_acc.stride(2), out.stride(0), out.stride(1),
            num_splits, HEAD_DIM=D,
            BLOCK_S=min(_COMBINE_BLOCK_S, triton.next_power_of_2(num_splits)),
        )
    return out


def paged_attention_ref(q, k_buffer, v_buffer, page_table, row_seq, row_kv_len, row_mask_start,
                        row_mask_offset, custom_mask, page_size, sm_scale, num_splits=None,
                        rope=None):
    """Plain torch: gather every row's KV into [R, max_kv], masked softmax in fp32.

    `num_splits` is accepted for signature parity with `paged_attention` and ignored. `rope`:
    `rope_store_kv_ref` first, as `paged_attention` does in its launch.

    max_kv is the page table's full width, not the batch's longest row: shapes then depend
    only on tensor shapes, never on values, so this runs without a host sync and inside graph
    capture, and eager and graph runs of one batch compute identical shapes."""
    if rope is not None:
        _check_rope(rope, q, k_buffer)
        k_new, v_new, cos, sin, positions, write_loc = rope
        q = rope_store_kv_ref(q, k_new, v_new, cos, sin, positions, k_buffer, v_buffer,
                              write_loc)
    R, Hq, D = q.shape
    Hkv = k_buffer.shape[1]
    kv_len = row_kv_len.long()
    max_kv = page_table.shape[1] * page_size
    if R == 0 or max_kv == 0:
        return torch.zeros_like(q)
    dev = q.device
    pos = torch.arange(max_kv, device=dev)[None, :]  # [1, L]
    valid = pos < kv_len[:, None]  # [R, L]
    pages = page_table.long()[row_seq.long()]  # [R, max_pages]
    page_idx = (pos // page_size).clamp(max=pages.shape[1] - 1).expand(R, -1)
    slots = pages.gather(1, page_idx) * page_size + pos % page_size

    m_off = row_mask_offset.long()[:, None]
    m_start = row_mask_start.long()[:, None]
    flat_mask = custom_mask.reshape(-1)
    midx = (m_off + pos - m_start).clamp(0, flat_mask.numel() - 1)
    visible = valid & ((m_off < 0) | (pos < m_start) | flat_mask[midx])
    slots = torch.where(visible, slots, torch.zeros_like(slots))
    # Grouped-query heads as [R, Hkv, group, D] against each KV head once: the KV is never
    # repeated per query head (on CPU this function is the engine's attention, run in every
    # forward of the suite).
    group = Hq // Hkv
    k = k_buffer[slots].float().transpose(1, 2)  # [R, Hkv, L, D]
    v = v_buffer[slots].float()
    v = v.masked_fill(~visible[:, :, None, None], 0.0).transpose(1, 2)  # unread slots: NaN garbage
    scores = torch.matmul(q.float().view(R, Hkv, group, D), k.transpose(-1, -2)) * sm_scale
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))  # [R, Hkv, group, L]
    # A row with no visible position gives NaN in softmax; its output is defined as zeros.
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.matmul(probs, v).reshape(R, Hq, D).to(q.dtype)
