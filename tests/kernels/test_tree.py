"""build_tree_kernel_efficient: Triton == reference, and reference == the ancestry law."""
from __future__ import annotations

import kernels._triton_env  # noqa: F401
import pytest
import torch
from hypothesis import given, settings, strategies as st

from kernels.tree import (FULL_MASK, QLEN_ONLY, QLEN_ONLY_BITPACKING, build_tree_in_place,
                          build_tree_in_place_ref, build_tree_kernel_efficient,
                          build_tree_kernel_efficient_ref, tree_column_offsets)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MODES = [FULL_MASK, QLEN_ONLY, QLEN_ONLY_BITPACKING]


@st.composite
def tree_shapes(draw):
    bs = draw(st.integers(1, 6))
    topk = draw(st.integers(1, 4))
    steps = draw(st.integers(1, 5))
    if topk == 1:
        ndt = steps + 1
    else:
        ndt = draw(st.integers(2, min(topk + (steps - 1) * topk * topk + 1, 32)))
    return bs, topk, steps, ndt, draw(st.integers(0, 2**31 - 1))


def draft_tree(bs, topk, steps, ndt, seed, vocab=50):
    """Contract section 5 in plain torch: select_top_k_tokens per step, then
    organize_draft_results. Also returns the true parent of every global candidate."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)

    def draft_forward(rows):  # random next-token distribution, top-k of it
        probs = (torch.randn(rows, vocab, generator=gen, device=DEVICE) * 2).softmax(-1)
        return probs.topk(topk, dim=-1)

    score_list, token_list, parents_list = [], [], []
    topk_p, topk_index = draft_forward(bs)
    scores = None
    true_parent = [dict() for _ in range(bs)]  # global candidate -> parent global (-1 = root)
    for i in range(steps):
        if i == 0:
            scores = topk_p
            score_list.append(topk_p.unsqueeze(1))
            token_list.append(topk_index)
            parents_list.append(torch.arange(-1, topk, device=DEVICE).repeat(bs, 1))
            for b in range(bs):
                true_parent[b].update({k: -1 for k in range(topk)})
            branch_global = torch.arange(topk, device=DEVICE).repeat(bs, 1)
        else:
            expand = scores[:, :, None] * topk_p.view(bs, topk, topk)
            scores, sel = expand.flatten(1).topk(topk, dim=-1)
            score_list.append(expand)
            token_list.append(topk_index.view(bs, topk * topk))
            base = topk * topk * (i - 1) + topk
            parents_list.append(sel + base)
            for b in range(bs):  # candidate (branch j, k) of this step hangs off branch j
                for j in range(topk):
                    for k in range(topk):
                        true_parent[b][base + j * topk + k] = int(branch_global[b, j])
            branch_global = sel + base
        if i < steps - 1:
            topk_p, topk_index = draft_forward(bs * topk)  # one row per branch b*topk + k
    all_scores = torch.cat([s.flatten(1) for s in score_list], 1)
    all_tokens = torch.cat(token_list, 1)
    top = torch.sort(all_scores.topk(ndt - 1, dim=-1).indices).values
    draft_tokens = torch.gather(all_tokens, 1, top)
    if len(parents_list) > 1:
        parent_list = torch.cat(parents_list[:-1], 1)
    else:
        parent_list = torch.empty(bs, 0, dtype=torch.int64, device=DEVICE)
    return parent_list, top, draft_tokens, true_parent


def make_inputs(bs, topk, steps, ndt, seed, random_subset=False):
    parent_list, top, draft_tokens, true_parent = draft_tree(bs, topk, steps, ndt, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    if random_subset:  # arbitrary selections: exercises nodes whose parent is not selected
        width = topk + (steps - 1) * topk * topk
        top = torch.stack([torch.sort(torch.randperm(width, generator=gen)[: ndt - 1]).values
                           for _ in range(bs)]).to(DEVICE)
    seq_lens = torch.randint(0, 40, (bs,), generator=gen).to(DEVICE)
    bonus = torch.randint(0, 50, (bs,), generator=gen).to(DEVICE)
    return bonus, parent_list, top, draft_tokens, seq_lens, true_parent


def law(top, seq_lens, true_parent, ndt):
    """Independent statement: ancestry walk over the true parents; a chain stops where a
    parent is not selected; children link in ascending node order."""
    bs = top.shape[0]
    masks, positions = torch.zeros(bs, ndt, ndt, dtype=torch.bool), []
    nxt, sib = torch.full((bs, ndt), -1), torch.full((bs, ndt), -1)
    for b in range(bs):
        node_of = {g: i + 1 for i, g in enumerate(top[b].tolist())}
        par = {0: None}
        for g, i in node_of.items():
            pg = true_parent[b][g]
            par[i] = 0 if pg == -1 else node_of.get(pg)  # None: parent not selected
        for t in range(ndt):
            chain, cur = [t], t
            while cur != 0 and par[cur] is not None:
                cur = par[cur]
                chain.append(cur)
            masks[b, t, chain + [0]] = True
            positions.append(int(seq_lens[b]) + len([c for c in chain if c != 0]))
        for p in range(ndt):
            kids = sorted(i for i in range(1, ndt) if par[i] == p)
            if kids:
                nxt[b, p] = kids[0]
                for a, c in zip(kids, kids[1:]):
                    sib[b, a] = c
    return masks, torch.tensor(positions), nxt, sib


def unpack(mask, mode, bs, ndt, seq_lens):
    """Any mode -> [bs, ndt, ndt] tree-column bools (plus prefix check for FULL_MASK)."""
    mask = mask.cpu()
    if mode == QLEN_ONLY:
        return mask.view(bs, ndt, ndt)
    if mode == QLEN_ONLY_BITPACKING:
        return ((mask.long().view(bs * ndt, 1) >> torch.arange(ndt)) & 1).bool().view(bs, ndt, ndt)
    out, off = [], 0
    for b in range(bs):
        sl = int(seq_lens[b])
        blk = mask[off: off + ndt * (sl + ndt)].view(ndt, sl + ndt)
        assert blk[:, :sl].all(), "prefix columns must be visible"
        out.append(blk[:, sl:])
        off += ndt * (sl + ndt)
    assert off == mask.numel()
    return torch.stack(out)


def run_both(bonus, parent_list, top, draft_tokens, seq_lens, topk, steps, ndt, mode):
    args = (bonus, parent_list, top, draft_tokens, seq_lens, int(seq_lens.sum()), topk, steps, ndt, mode)
    got, want = build_tree_kernel_efficient(*args), build_tree_kernel_efficient_ref(*args)
    for name, g, w in zip(["mask", "positions", "index", "next", "sibling", "tokens"], got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert torch.equal(g.cpu(), w.cpu()), name
    return want


@settings(deadline=None)
@given(shape=tree_shapes(), mode=st.sampled_from(MODES), subset=st.booleans(),
       seq_dtype=st.sampled_from([torch.int64, torch.int32]))
def test_build_tree_matches_ref_and_law(shape, mode, subset, seq_dtype):
    bs, topk, steps, ndt, seed = shape
    bonus, parent_list, top, draft_tokens, seq_lens, true_parent = make_inputs(
        bs, topk, steps, ndt, seed, random_subset=subset)
    seq_lens = seq_lens.to(seq_dtype)
    mask, positions, r_index, r_next, r_sib, tokens = run_both(
        bonus, parent_list, top, draft_tokens, seq_lens, topk, steps, ndt, mode)
    w_mask, w_pos, w_next, w_sib = law(top.cpu(), seq_lens.cpu(), true_parent, ndt)
    assert torch.equal(unpack(mask, mode, bs, ndt, seq_lens), w_mask)
    assert torch.equal(positions.cpu(), w_pos)
    assert torch.equal(r_next.cpu(), w_next) and torch.equal(r_sib.cpu(), w_sib)
    assert torch.equal(r_index.cpu(), torch.arange(bs * ndt).view(bs, ndt))
    assert torch.equal(tokens.cpu(), torch.cat([bonus[:, None], draft_tokens], 1).flatten().cpu())
    if not subset:  # realistic drafts never select a child without its parent
        for b in range(bs):
            sel = set(top[b].tolist())
            assert all(true_parent[b][g] in sel | {-1} for g in sel)
        assert (positions.cpu().view(bs, ndt) - seq_lens.cpu()[:, None] <= steps).all()


@pytest.mark.parametrize("mode", MODES)
def test_walk_bounded_on_cyclic_parents(mode):
    # topk 1, 3 steps, parent_list says candidate 1's parent is itself: SGLang would spin
    # forever; here the walk stops after spec_steps and both implementations agree.
    parent_list = torch.tensor([[-1, 1, 1]], device=DEVICE)
    top = torch.tensor([[0, 1, 2]], device=DEVICE)
    out = run_both(torch.tensor([7], device=DEVICE), parent_list, top,
                   torch.tensor([[1, 2, 3]], device=DEVICE), torch.tensor([5], device=DEVICE),
                   1, 3, 4, mode)
    assert out[1].tolist() == [5, 6, 8, 8]


@pytest.mark.parametrize("ndt", [8, 9, 16, 17, 32])
def test_bitpacking_width_edges(ndt):
    # Row ndt-1 always has bit ndt-1 set: the sign bit of int16/int32 at 16 and 32.
    bonus, parent_list, top, draft_tokens, seq_lens, true_parent = make_inputs(2, 4, 3, ndt, ndt)
    mask = run_both(bonus, parent_list, top, draft_tokens, seq_lens, 4, 3, ndt, QLEN_ONLY_BITPACKING)[0]
    assert mask.dtype == {8: torch.uint8, 16: torch.int16, 32: torch.int32}[max(8, 1 << (ndt - 1).bit_length())]
    assert torch.equal(unpack(mask, QLEN_ONLY_BITPACKING, 2, ndt, seq_lens),
                       law(top.cpu(), seq_lens.cpu(), true_parent, ndt)[0])


@settings(deadline=None)
@given(shape=tree_shapes(), subset=st.booleans(), stale=st.booleans())
def test_build_tree_in_place_writes_what_the_allocating_one_returns(shape, subset, stale):
    """Into a mask prefilled with True (what the captured round does), both in-place versions
    write exactly the allocating kernel's mask, whatever the buffers held before (stale: a
    larger, older tree's columns): the tree columns are all they write, and all of them."""
    bs, topk, steps, ndt, seed = shape
    bonus, parent_list, top, draft_tokens, seq_lens, _ = make_inputs(
        bs, topk, steps, ndt, seed, random_subset=subset)
    want = build_tree_kernel_efficient_ref(bonus, parent_list, top, draft_tokens, seq_lens,
                                           int(seq_lens.sum()), topk, steps, ndt, FULL_MASK)
    dev = seq_lens.device
    for fn in (build_tree_in_place, build_tree_in_place_ref):
        mask = torch.ones(want[0].numel() + 5, dtype=torch.bool, device=dev)
        links = [torch.full((bs, ndt), -7, dtype=torch.int64, device=dev) for _ in range(3)]
        positions = torch.full((bs * ndt,), -7, dtype=torch.int64, device=dev)
        if stale:  # an older tree's columns: False wherever this one's may not be
            mask[tree_column_offsets(seq_lens, ndt).reshape(-1)] = False
        fn(mask, positions, *links, parent_list, top, seq_lens, topk, steps, ndt)
        assert torch.equal(mask[:want[0].numel()].cpu(), want[0].cpu()), fn.__name__
        assert mask[want[0].numel():].all(), fn.__name__
        for got, w in zip([positions, *links], want[1:5]):
            assert torch.equal(got.cpu(), w.cpu()), fn.__name__
