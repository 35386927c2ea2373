"""Properties of paged_attention: Triton == torch reference == a naive float64 loop."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.attention import paged_attention, paged_attention_ref

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# The Triton interpreter computes bf16 wrongly, so bf16 is only drawn on a GPU.
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


@dataclass
class Case:
    q: torch.Tensor
    k_buffer: torch.Tensor
    v_buffer: torch.Tensor
    page_table: torch.Tensor
    row_seq: torch.Tensor
    row_kv_len: torch.Tensor
    row_mask_start: torch.Tensor
    row_mask_offset: torch.Tensor
    custom_mask: torch.Tensor
    page_size: int
    sm_scale: float

    def args(self):
        return (self.q, self.k_buffer, self.v_buffer, self.page_table, self.row_seq,
                self.row_kv_len, self.row_mask_start, self.row_mask_offset, self.custom_mask,
                self.page_size, self.sm_scale)


def _tree_mask(ndt: int, g: torch.Generator) -> list[list[bool]]:
    """QLEN_ONLY mask of a random tree: row t sees itself and its ancestors."""
    parent = [-1] + [int(torch.randint(0, t, (1,), generator=g)) for t in range(1, ndt)]
    mask = [[False] * ndt for _ in range(ndt)]
    for t in range(ndt):
        a = t
        while a >= 0:
            mask[t][a] = True
            a = parent[a]
    return mask


def _rows(mode, num_rows, max_kv, g):
    """Per-row (seq, kv_len, mask_start, mask_offset) and the flat custom mask."""
    rand = lambda hi: int(torch.randint(0, hi + 1, (1,), generator=g))  # noqa: E731
    seqs, lens, starts, offsets, flat = [], [], [], [], []
    if mode == "tree":  # verify rows: ndt per request, prefix + QLEN_ONLY tree mask
        ndt = rand(min(5, num_rows) - 1) + 1
        for b in range(num_rows // ndt):
            seq_len, mask = rand(max_kv), _tree_mask(ndt, g)
            for t in range(ndt):
                seqs.append(b), lens.append(seq_len + ndt), starts.append(seq_len)
                offsets.append((b * ndt + t) * ndt)
                flat += mask[t]
    else:  # extend/decode-like rows sharing a few sequences; "random" adds random masks
        num_seqs = rand(2) + 1
        for _ in range(num_rows):
            kv_len = rand(max_kv)
            seqs.append(rand(num_seqs - 1)), lens.append(kv_len)
            if mode == "random" and rand(1):
                start = rand(kv_len)
                starts.append(start), offsets.append(len(flat))
                flat += (torch.rand(kv_len - start, generator=g) < 0.6).tolist()
            else:
                starts.append(rand(kv_len)), offsets.append(-1)
    for r in range(len(lens)):  # a few padded rows (kv_len 0) must come out as zeros
        if rand(7) == 0:
            lens[r] = 0
    return seqs, lens, starts, offsets, flat + [True]


@st.composite
def attention_cases(draw, dtypes=tuple(DTYPES), modes=("none", "random", "tree")):
    """Shapes and a seed; tensors come from a torch generator seeded by Hypothesis."""
    num_rows = draw(st.integers(1, 12))
    hq = draw(st.sampled_from([1, 2, 4, 8]))
    hkv = draw(st.sampled_from([h for h in (1, 2, 4, 8) if hq % h == 0]))
    head_dim = draw(st.sampled_from([16, 32, 64]))
    page_size = draw(st.sampled_from([1, 2, 4, 16, 64]))
    max_kv = draw(st.integers(0, 300))
    mode = draw(st.sampled_from(modes))
    dtype = draw(st.sampled_from(dtypes))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))

    seqs, lens, starts, offsets, flat = _rows(mode, num_rows, max_kv, g)
    R, num_seqs = len(lens), max(seqs) + 1
    max_pages = max(1, math.ceil(max(lens) / page_size))
    # Page ids from a random permutation (non-contiguous); page 0 stays unused, like slot 0.
    page_table = (torch.randperm(num_seqs * max_pages, generator=g) + 1).view(num_seqs, max_pages)
    num_slots = (num_seqs * max_pages + 1) * page_size
    k = torch.randn(num_slots, hkv, head_dim, generator=g)
    v = torch.randn(num_slots, hkv, head_dim, generator=g)
    # Poison every slot no row may read: a kernel reading past kv_len turns NaN.
    used = torch.zeros(num_slots, dtype=torch.bool)
    for s, n in zip(seqs, lens):
        p = torch.arange(n)
        used[page_table[s, p // page_size] * page_size + p % page_size] = True
    k[~used], v[~used] = float("nan"), float("nan")
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=DEVICE)  # noqa: E731
    return Case(
        q=torch.randn(R, hq, head_dim, generator=g).to(DEVICE, dtype),
        k_buffer=k.to(DEVICE, dtype), v_buffer=v.to(DEVICE, dtype),
        page_table=page_table.to(DEVICE, torch.int32), row_seq=i32(seqs), row_kv_len=i32(lens),
        row_mask_start=i32(starts),
        row_mask_offset=torch.tensor(offsets, dtype=torch.int64, device=DEVICE),
        custom_mask=torch.tensor(flat, dtype=torch.bool, device=DEVICE),
        page_size=page_size, sm_scale=1.0 / math.sqrt(head_dim),
    )


def naive_attention(c: Case) -> torch.Tensor:
    """Independent statement of the law: one row at a time, dense softmax in float64."""
    R, hq, _ = c.q.shape
    group = hq // c.k_buffer.shape[1]
    pt, cm = c.page_table.cpu().tolist(), c.custom_mask.cpu().tolist()
    out = torch.zeros(c.q.shape, dtype=torch.float64)
    for r in range(R):
        seq, n = int(c.row_seq[r]), int(c.row_kv_len[r])
        start, off = int(c.row_mask_start[r]), int(c.row_mask_offset[r])
        slots = [pt[seq][p // c.page_size] * c.page_size + p % c.page_size for p in range(n)
                 if off < 0 or p < start or cm[off + p - start]]
        if not slots:
            continue  # padded or fully masked row: zeros
        for h in range(hq):
            k = c.k_buffer[slots, h // group].double().cpu()
            v = c.v_buffer[slots, h // group].double().cpu()
            w = torch.softmax(k @ c.q[r, h].double().cpu() * c.sm_scale, dim=0)
            out[r, h] = w @ v
    return out


@settings(deadline=None)
@given(case=attention_cases())
def test_triton_matches_reference(case: Case):
    """paged_attention == paged_attention_ref within the dtype's tolerance, zeros on padding."""
    out = paged_attention(*case.args())
    ref = paged_attention_ref(*case.args())
    assert out.dtype == case.q.dtype and out.shape == case.q.shape
    tol = TOL[case.q.dtype]
    torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)
    padded = case.row_kv_len == 0
    assert (out[padded] == 0).all() and (ref[padded] == 0).all()


@settings(deadline=None)
@given(case=attention_cases(), num_splits=st.integers(1, 9))
def test_split_kv_matches_reference(case: Case, num_splits: int):
    """Split-KV (flash decoding, any split count, empty splits included) == the reference."""
    out = paged_attention(*case.args(), num_splits=num_splits)
    ref = paged_attention_ref(*case.args())
    tol = TOL[case.q.dtype]
    torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)
    assert (out[case.row_kv_len == 0] == 0).all()


@settings(deadline=None)
@given(case=attention_cases(dtypes=(torch.float32,)))
def test_reference_matches_naive_loop(case: Case):
    """The vectorized reference equals the per-row float64 statement of docs/kernels.md."""
    ref = paged_attention_ref(*case.args())
    torch.testing.assert_close(ref.double().cpu(), naive_attention(case), atol=1e-5, rtol=1e-5)


def test_tree_verify_row_sees_prefix_and_ancestors_only():
    """Hand-made verify rows: node 1 (child of root) must ignore sibling node 2."""
    g = torch.Generator().manual_seed(0)
    k = torch.randn(16, 1, 16, generator=g).to(DEVICE)
    v = torch.randn(16, 1, 16, generator=g).to(DEVICE)
    q = torch.randn(3, 1, 16, generator=g).to(DEVICE)
    mask = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.bool, device=DEVICE)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=DEVICE)  # noqa: E731
    args = (q, k, v, i32([[3, 1]]), i32([0, 0, 0]), i32([7, 7, 7]), i32([4, 4, 4]),
            torch.tensor([0, 3, 6], device=DEVICE), mask.flatten(), 4, 0.25)
    out = paged_attention(*args)
    # Row 1 sees prefix positions 0..3 (slots 12..15) and positions 4, 5 (slots 4, 5).
    slots = torch.tensor([12, 13, 14, 15, 4, 5], device=DEVICE)
    w = torch.softmax(k[slots, 0] @ q[1, 0] * 0.25, dim=0)
    torch.testing.assert_close(out[1, 0], w @ v[slots, 0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, paged_attention_ref(*args), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_masked_row_is_zero(dtype):
    """A row whose every position is masked out gives zeros, not NaN."""
    k = torch.randn(8, 2, 32, device=DEVICE).to(dtype)
    q = torch.randn(1, 4, 32, device=DEVICE).to(dtype)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=DEVICE)  # noqa: E731
    args = (q, k, k, i32([[1]]), i32([0]), i32([3]), i32([0]),
            torch.tensor([0], device=DEVICE), torch.zeros(3, dtype=torch.bool, device=DEVICE),
            4, 1.0)
    assert (paged_attention(*args) == 0).all() and (paged_attention_ref(*args) == 0).all()
