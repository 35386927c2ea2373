"""Tree construction for verify: mask, positions and retrieve links (contract section 6).

Semantics follow SGLang's `build_tree_efficient` (sgl-kernel eagle_utils.cu). Node 0 is the
root (bonus token); node i >= 1 is global candidate `top_scores_index[b, i-1]` (ascending,
so parents precede children). Two deliberate tightenings of SGLang's undefined corners:
- a node whose parent is not selected is skipped (no links) and its mask walk stops there
  (SGLang keeps walking with an out-of-range index and writes past the row);
- a parent slot `g // topk` outside parent_list counts as "not selected" (SGLang reads out
  of bounds). The mask walk is bounded by spec_steps steps (SGLang: unbounded).
"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401  (must precede the triton import)
import torch
import triton
import triton.language as tl

from kernels._scan import SUM_BLOCK, sum_before

FULL_MASK = 0
QLEN_ONLY = 1
QLEN_ONLY_BITPACKING = 2


def _bitpack_dtype(ndt: int) -> torch.dtype:
    if ndt <= 8:
        return torch.uint8
    if ndt <= 16:
        return torch.int16
    if ndt <= 32:
        return torch.int32
    raise ValueError(f"QLEN_ONLY_BITPACKING supports ndt <= 32, got {ndt}")


def _alloc_mask(mode, bs, ndt, seq_lens_sum, device):
    if mode == FULL_MASK:
        # Prefix columns are True; the kernel overwrites every tree column.
        return torch.ones(seq_lens_sum * ndt + bs * ndt * ndt, dtype=torch.bool, device=device)
    if mode == QLEN_ONLY:
        return torch.zeros(bs * ndt * ndt, dtype=torch.bool, device=device)
    if mode == QLEN_ONLY_BITPACKING:
        return torch.zeros(bs * ndt, dtype=_bitpack_dtype(ndt), device=device)
    raise ValueError(f"unknown tree_mask_mode {mode}")


# The tree's shape (topk, steps, ndt) is a runtime value: as constexprs or specialized ints,
# each shape the gate draws was a kernel compiled anew (docs/kernels.md, compiled variants).
@triton.jit(do_not_specialize=("topk", "spec_steps", "pl_width", "ndt"))
def _build_tree_kernel(parent_list, sel, seq_lens, tree_mask, positions,
                       r_index, r_next, r_sib, topk, spec_steps, pl_width, ndt,
                       MODE: tl.constexpr, BLOCK: tl.constexpr,
                       BLOCK_B: tl.constexpr):
    # One program per request. Node vectors live on axis 0 ("rows"); the same index
    # vector on axis 1 ("cols") lets us gather parent[cur] with a one-hot reduction,
    # since Triton has no register gather.
    b = tl.program_id(0).to(tl.int64)
    nodes = tl.arange(0, BLOCK)
    valid = nodes < ndt
    is_draft = valid & (nodes >= 1)
    seq_len = tl.load(seq_lens + b).to(tl.int64)

    g = tl.load(sel + b * (ndt - 1) + (nodes - 1), mask=is_draft, other=-1)
    tb = g // topk
    has_cand = is_draft & (tb > 0) & (tb < pl_width)
    pg = tl.load(parent_list + b * pl_width + tb, mask=has_cand, other=-1)
    # Parent node = the node whose candidate index equals pg (first match, like SGLang).
    match = (pg[:, None] == g[None, :]) & has_cand[:, None] & is_draft[None, :]
    pos = tl.min(tl.where(match, nodes[None, :], BLOCK), axis=1)
    # parent: 0 = root, >0 = node, -1 = none (root itself, padding, or parent not selected).
    parent = tl.where(is_draft & (tb == 0), 0, tl.where(has_cand & (pos < BLOCK), pos, -1))

    # Ancestor walk, all rows at once: at most spec_steps steps (the depth bound).
    anc = (nodes[None, :] == 0) & valid[:, None]
    depth = tl.zeros([BLOCK], dtype=tl.int64)
    cur = nodes
    active = is_draft
    # `while` rather than `for ... in range(runtime int)`: the Triton 3.6 interpreter cannot
    # take a runtime range bound under numpy >= 2.4; both compile to the same scf loop.
    step = tl.zeros([], dtype=tl.int32)
    while step < spec_steps:
        hit = (nodes[None, :] == cur[:, None]) & active[:, None]
        anc = anc | hit
        depth += active.to(tl.int64)
        p = tl.sum(tl.where(hit, parent[None, :], 0), axis=1)
        active = active & (p > 0)  # stop at the root (0) or at a missing parent (-1)
        cur = tl.where(active, p, cur)
        step += 1

    row = b * ndt + nodes
    tl.store(positions + row, seq_len + depth, mask=valid)
    tl.store(r_index + row, row, mask=valid)
    # First child = smallest node whose parent is n; next sibling = next larger node with
    # the same (linked) parent. Same result as SGLang's descending insert-at-head.
    child = (parent[None, :] == nodes[:, None]) & is_draft[None, :] & valid[:, None]
    first = tl.min(tl.where(child, nodes[None, :], BLOCK), axis=1)
    tl.store(r_next + row, tl.where(first < BLOCK, first, -1).to(tl.int64), mask=valid)
    sib = ((parent[None, :] == parent[:, None]) & (parent[:, None] >= 0)
           & (nodes[None, :] > nodes[:, None]) & is_draft[None, :])
    nsib = tl.min(tl.where(sib, nodes[None, :], BLOCK), axis=1)
    tl.store(r_sib + row, tl.where(nsib < BLOCK, nsib, -1).to(tl.int64), mask=valid)

    in_tree = valid[:, None] & (nodes[None, :] < ndt)
    if MODE == 0:  # FULL_MASK: row t has seq_len + ndt columns, tree columns after the prefix
        # This request's block starts after ndt * (seq_len + ndt) entries per earlier request.
        start = b * ndt * ndt + ndt * sum_before(seq_lens, b, BLOCK_B)
        offs = start + nodes[:, None].to(tl.int64) * (seq_len + ndt) + seq_len + nodes[None, :]
        tl.store(tree_mask + offs, anc, mask=in_tree)
    elif MODE == 1:  # QLEN_ONLY
        offs = row[:, None] * ndt + nodes[None, :]
        tl.store(tree_mask + offs, anc, mask=in_tree)
    else:  # QLEN_ONLY_BITPACKING: bit j = column j; int64 math, truncated by the store
        bits = tl.full([BLOCK], 1, tl.int64) << nodes.to(tl.int64)
        packed = tl.sum(tl.where(anc & in_tree, bits[None, :], 0), axis=1)
        tl.store(tree_mask + row, packed.to(tree_mask.dtype.element_ty), mask=valid)


def build_tree_kernel_efficient(bonus_tokens, parent_list, top_scores_index, draft_tokens,
                                seq_lens, seq_lens_sum, topk, spec_steps, num_verify_tokens,
                                tree_mask_mode=FULL_MASK):
    bs, ndt, dev = seq_lens.shape[0], num_verify_tokens, seq_lens.device
    tree_mask = _alloc_mask(tree_mask_mode, bs, ndt, seq_lens_sum, dev)
    positions = torch.empty(bs * ndt, dtype=torch.int64, device=dev)
    r_index, r_next, r_sib = (torch.empty(bs, ndt, dtype=torch.int64, device=dev) for _ in range(3))
    _launch(tree_mask, positions, r_index, r_next, r_sib, parent_list, top_scores_index, seq_lens,
            topk, spec_steps, ndt, tree_mask_mode)
    tokens = torch.cat([bonus_tokens.reshape(bs, 1), draft_tokens.reshape(bs, ndt - 1)], 1)
    return tree_mask, positions, r_index, r_next, r_sib, tokens.flatten().to(torch.int64)


def build_tree_in_place(tree_mask, positions, r_index, r_next, r_sib, parent_list,
                        top_scores_index, seq_lens, topk, spec_steps, num_verify_tokens):
    """build_tree_kernel_efficient (FULL_MASK) into the caller's buffers, allocating nothing:
    what a captured graph calls. Writes the mask's tree columns only: its prefix columns are
    the caller's to fill with True first (the allocating version's torch.ones)."""
    _launch(tree_mask, positions, r_index, r_next, r_sib, parent_list, top_scores_index, seq_lens,
            topk, spec_steps, num_verify_tokens, FULL_MASK)


def tree_column_offsets(seq_lens: torch.Tensor, ndt: int) -> torch.Tensor:
    """[bs, ndt, ndt] flat FULL_MASK offsets of each request's tree columns (row t, column
    seq_len + c), in the layout _build_tree_kernel writes. Sync-free torch."""
    seq = seq_lens.long()
    bs = seq.shape[0]
    start = ndt * (torch.cumsum(seq, 0) - seq) + torch.arange(bs, device=seq.device) * ndt * ndt
    t = torch.arange(ndt, device=seq.device)
    return (start[:, None, None] + t[None, :, None] * (seq[:, None, None] + ndt)
            + seq[:, None, None] + t[None, None, :])


def build_tree_in_place_ref(tree_mask, positions, r_index, r_next, r_sib, parent_list,
                            top_scores_index, seq_lens, topk, spec_steps, num_verify_tokens):
    """The reference of build_tree_in_place: the allocating reference's outputs, copied in."""
    bs, ndt = seq_lens.shape[0], num_verify_tokens
    zeros = torch.zeros(bs * ndt, dtype=torch.int64, device=seq_lens.device)
    mask, pos, ri, rn, rs, _ = build_tree_kernel_efficient_ref(
        zeros[:bs], parent_list, top_scores_index, zeros[:bs * (ndt - 1)], seq_lens,
        int(seq_lens.sum()), topk, spec_steps, ndt, FULL_MASK)
    cols = tree_column_offsets(seq_lens, ndt).reshape(-1)
    tree_mask[cols] = mask[cols]
    positions.copy_(pos)
    r_index.copy_(ri)
    r_next.copy_(rn)
    r_sib.copy_(rs)


def _launch(tree_mask, positions, r_index, r_next, r_sib, parent_list, top_scores_index, seq_lens,
            topk, spec_steps, ndt, tree_mask_mode):
    bs, dev = seq_lens.shape[0], seq_lens.device
    pl = parent_list.contiguous()
    pl_width = pl.shape[1] if pl.dim() == 2 else 0
    if pl.numel() == 0:  # spec_steps == 1: never read, but give the kernel a real pointer
        pl = torch.full((1,), -1, dtype=torch.int64, device=dev)
    if bs > 0:
        _build_tree_kernel[(bs,)](
            pl, top_scores_index.contiguous(), seq_lens.contiguous(), tree_mask,
            positions, r_index, r_next, r_sib, topk, spec_steps, pl_width, ndt,
            MODE=tree_mask_mode, BLOCK=max(2, triton.next_power_of_2(ndt)), BLOCK_B=SUM_BLOCK)


def _ref_parents(sel: list[int], pl: list[int], topk: int, ndt: int) -> list[int]:
    """Each node's parent (entry 0, the root's, unused): 0 = root, >0 = node, -1 = parent
    not selected."""
    def parent_node(i):
        tb = sel[i - 1] // topk
        if tb == 0:
            return 0
        if tb >= len(pl) or pl[tb] not in sel:
            return -1
        return sel.index(pl[tb]) + 1
    return [-1] + [parent_node(i) for i in range(1, ndt)]


def _ref_links(parents: list[int], ndt: int) -> tuple[list[int], list[int]]:
    """One request's first-child and next-sibling links (-1: none)."""
    r_next, r_sib = [-1] * ndt, [-1] * ndt
    for i in range(ndt - 1, 0, -1):  # descending, insert at head -> ascending lists
        par = parents[i]
        if par < 0:
            continue
        if r_next[par] != -1:
            r_sib[i] = r_next[par]
        r_next[par] = i
    return r_next, r_sib


def _ref_ancestors(parents: list[int], ndt: int, spec_steps: int,
                   seq_len: int) -> tuple[list[list[bool]], list[int]]:
    """One request's mask rows (each node's ancestors, itself and the root included) and
    positions (seq_len + depth), the walk bounded by spec_steps steps."""
    rows, pos = [], []
    for t in range(ndt):
        row, depth, cur = [False] * ndt, 0, t
        row[0] = True
        if t > 0:
            for _ in range(spec_steps):
                row[cur] = True
                depth += 1
                cur = parents[cur]
                if cur <= 0:
                    break
        rows.append(row)
        pos.append(seq_len + depth)
    return rows, pos


def _ref_mask_layout(mask: torch.Tensor, lens: list[int], seq_lens_sum: int, ndt: int,
                     tree_mask_mode: int) -> torch.Tensor:
    """mask [bs, ndt, ndt] (tree columns only) in tree_mask_mode's flat layout."""
    bs = mask.shape[0]
    if tree_mask_mode == FULL_MASK:
        parts = [torch.cat([torch.ones(ndt, lens[b], dtype=torch.bool), mask[b]], 1).flatten()
                 for b in range(bs)]
        tree_mask = torch.cat(parts) if parts else torch.ones(0, dtype=torch.bool)
        # seq_lens_sum may exceed the lengths' sum (an upper bound under overlap scheduling):
        # the buffer is sized by it, and the tail past the last block is never read.
        size = seq_lens_sum * ndt + bs * ndt * ndt
        assert tree_mask.numel() <= size
        return torch.cat([tree_mask, torch.ones(size - tree_mask.numel(), dtype=torch.bool)])
    if tree_mask_mode == QLEN_ONLY:
        return mask.flatten()
    if tree_mask_mode == QLEN_ONLY_BITPACKING:
        dtype = _bitpack_dtype(ndt)
        packed = (mask.reshape(bs * ndt, ndt).long() << torch.arange(ndt)).sum(-1)
        if dtype != torch.uint8:  # wrap into the signed type (bit ndt-1 is the sign bit)
            nbits = torch.iinfo(dtype).bits
            packed = torch.where(packed >= 2 ** (nbits - 1), packed - 2 ** nbits, packed)
        return packed.to(dtype)
    raise ValueError(f"unknown tree_mask_mode {tree_mask_mode}")


def build_tree_kernel_efficient_ref(bonus_tokens, parent_list, top_scores_index, draft_tokens,
                                    seq_lens, seq_lens_sum, topk, spec_steps, num_verify_tokens,
                                    tree_mask_mode=FULL_MASK):
    """Plain-Python mirror of SGLang's per-request loops (with the tightenings above)."""
    bs, ndt, dev = seq_lens.shape[0], num_verify_tokens, seq_lens.device
    sel_all = top_scores_index.tolist()
    pl_all = parent_list.tolist() if parent_list.numel() else [[] for _ in range(bs)]
    lens = seq_lens.tolist()
    rows, pos, r_next, r_sib = [], [], [], []
    for b in range(bs):
        parents = _ref_parents(sel_all[b], pl_all[b], topk, ndt)
        nxt, sib = _ref_links(parents, ndt)
        r_next.append(nxt)
        r_sib.append(sib)
        b_rows, b_pos = _ref_ancestors(parents, ndt, spec_steps, lens[b])
        rows += b_rows
        pos += b_pos

    mask = torch.tensor(rows, dtype=torch.bool).reshape(bs, ndt, ndt)
    tree_mask = _ref_mask_layout(mask, lens, seq_lens_sum, ndt, tree_mask_mode)
    positions = torch.tensor(pos, dtype=torch.int64)
    r_index = torch.arange(bs * ndt, dtype=torch.int64).reshape(bs, ndt)
    tokens = torch.cat([bonus_tokens.reshape(bs, 1).cpu(), draft_tokens.reshape(bs, ndt - 1).cpu()],
                       1)
    outs = (tree_mask, positions, r_index, torch.tensor(r_next, dtype=torch.int64).reshape(bs, ndt),
            torch.tensor(r_sib, dtype=torch.int64).reshape(bs, ndt), tokens.flatten().to(torch.int64))
    return tuple(o.to(dev) for o in outs)
