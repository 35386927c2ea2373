"""Paged attention over a page table, with per-row KV length and an optional custom mask.

See docs/kernels.md (paged_attention). One Triton program handles one query row and one KV
head, i.e. the whole GQA group of query heads that read that KV head, so each KV tile is
loaded once per group. The KV loop runs over virtual positions in blocks of BLOCK_N up to the
row's kv length (read from memory: no host sync, so the wrapper is CUDA-graph safe), maps
positions to slots through the page table and keeps an online softmax in fp32.
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634


@triton.jit
def _paged_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, pt_ptr, row_seq_ptr, kv_len_ptr, mstart_ptr, moff_ptr, mask_ptr,
    qk_scale, page_size, max_pages, mask_numel,
    stride_qr, stride_qh, stride_kr, stride_kh, stride_vr, stride_vh, stride_or, stride_oh,
    stride_pt,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    F32_DOT: tl.constexpr,
):
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
    if F32_DOT:
        q = q.to(tl.float32)

    kv_len = tl.load(kv_len_ptr + r)
    seq = tl.load(row_seq_ptr + r).to(tl.int64)
    m_start = tl.load(mstart_ptr + r).to(tl.int64)
    m_off = tl.load(moff_ptr + r).to(tl.int64)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    # A while loop, not `for range(kv_len)`: the Triton 3.6 interpreter cannot use a loaded
    # scalar as a range bound under NumPy 2.x (int() of a 1-element array). The cost on GPU:
    # a while loop is not software-pipelined; restore the `for` once the interpreter is fixed.
    start = 0
    while start < kv_len:
        pos = (start + offs_n).to(tl.int64)
        valid = pos < kv_len
        page_idx = pos // page_size
        page = tl.load(pt_ptr + seq * stride_pt + page_idx,
                       mask=valid & (page_idx < max_pages), other=0)
        slot = page.to(tl.int64) * page_size + pos % page_size
        # Positions at or past mask_start are visible only where the custom mask says so.
        midx = m_off + pos - m_start
        need = valid & (m_off >= 0) & (pos >= m_start)
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

    # Rows that see nothing (kv_len 0 or everything masked) have l_i == 0 and acc == 0.
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(o_ptr + r * stride_or + heads[:, None] * stride_oh + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=h_ok[:, None] & d_ok[None, :])


def paged_attention(q, k_buffer, v_buffer, page_table, row_seq, row_kv_len, row_mask_start,
                    row_mask_offset, custom_mask, page_size, sm_scale):
    """Triton paged attention; see module docstring and docs/kernels.md."""
    R, Hq, D = q.shape
    Hkv = k_buffer.shape[1]
    assert Hq % Hkv == 0 and D >= 16 and D & (D - 1) == 0, (Hq, Hkv, D)
    assert k_buffer.stride(-1) == 1 and v_buffer.stride(-1) == 1
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
    _paged_attention_kernel[(R, Hkv)](
        q, k_buffer, v_buffer, out, page_table, row_seq, row_kv_len, row_mask_start,
        row_mask_offset, mask_u8,
        float(sm_scale) * _LOG2E, page_size, page_table.shape[1], mask_u8.numel(),
        q.stride(0), q.stride(1), k_buffer.stride(0), k_buffer.stride(1),
        v_buffer.stride(0), v_buffer.stride(1), out.stride(0), out.stride(1),
        page_table.stride(0),
        GROUP=group, HEAD_DIM=D, BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_N=64,
        F32_DOT=f32_dot,
    )
    return out


def paged_attention_ref(q, k_buffer, v_buffer, page_table, row_seq, row_kv_len, row_mask_start,
                        row_mask_offset, custom_mask, page_size, sm_scale):
    """Plain torch: gather every row's KV into [R, max_kv], masked softmax in fp32.

    max_kv is the page table's full width, not the batch's longest row: shapes then depend
    only on tensor shapes, never on values, so this runs without a host sync and inside graph
    capture, and eager and graph runs of one batch compute identical shapes."""
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
    slots = torch.where(valid, slots, torch.zeros_like(slots))
    k = k_buffer[slots].float().repeat_interleave(Hq // Hkv, dim=2)  # [R, L, Hq, D]
    v = v_buffer[slots].float().repeat_interleave(Hq // Hkv, dim=2)
    scores = torch.einsum("rhd,rlhd->rhl", q.float(), k) * sm_scale

    m_off = row_mask_offset.long()[:, None]
    m_start = row_mask_start.long()[:, None]
    flat_mask = custom_mask.reshape(-1)
    midx = (m_off + pos - m_start).clamp(0, flat_mask.numel() - 1)
    visible = valid & ((m_off < 0) | (pos < m_start) | flat_mask[midx])
    scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
    v = v.masked_fill(~visible[:, :, None, None], 0.0)  # unread slots may hold NaN garbage
    # A row with no visible position gives NaN in softmax; its output is defined as zeros.
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("rhl,rlhd->rhd", probs, v).to(q.dtype)
