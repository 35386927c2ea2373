"""harness/references/layout.py and tree.py against the kernels and layout code, on
realistic inputs (specdec's own select_top_k_tokens / organize_draft_results on random
probabilities), plus non-vacuity tests. Tests may import specdec/kernels; references must not."""
from __future__ import annotations

import ast
import doctest
import pathlib

import kernels
import pytest
import torch
from hypothesis import given, settings, strategies as st

from harness.references import layout as RL
from harness.references import tree as RT
from specdec.spec.compaction import accepted_kv_moves, compact_accepted_to_front
from specdec.spec.layout import per_step_draft_out_cache_loc
from specdec.spec.select import organize_draft_results, select_top_k_tokens

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MODES = [kernels.FULL_MASK, kernels.QLEN_ONLY, kernels.QLEN_ONLY_BITPACKING]
VOCAB = 40


# -- configurations and realistic inputs -------------------------------------------------------
@st.composite
def configs(draw):
    topk = draw(st.integers(1, 4))
    steps = draw(st.integers(1, 5))
    ndt = steps + 1 if topk == 1 else draw(st.integers(2, min(topk + (steps - 1) * topk * topk + 1, 32)))
    bs = draw(st.integers(1, 4))
    return dict(bs=bs, topk=topk, steps=steps, ndt=ndt,
                page_size=draw(st.sampled_from([1, 2, 4, 16, 64])),
                prefix=draw(st.lists(st.integers(1, 70), min_size=bs, max_size=bs)),
                arbitrary=draw(st.booleans()),  # random selection: exercises missing parents
                seed=draw(st.integers(0, 2**31 - 1)))


def draft_tree(c):
    """(parent_list, top_scores_index, draft_tokens) from the engine's selection code."""
    bs, topk, steps = c["bs"], c["topk"], c["steps"]
    gen = torch.Generator(device=DEVICE).manual_seed(c["seed"])

    def forward(rows):  # a random next-token distribution, its top-k
        return (torch.randn(rows, VOCAB, generator=gen, device=DEVICE) * 2).softmax(-1).topk(topk, -1)

    topk_p, topk_index = forward(bs)
    hidden, scores, lists = torch.zeros(bs, 1, device=DEVICE), None, ([], [], [])
    for i in range(steps):
        _, hidden, scores, info = select_top_k_tokens(i, topk_p=topk_p, topk_index=topk_index,
                                                      hidden_states=hidden, scores=scores,
                                                      topk=topk)
        for lst, x in zip(lists, info):
            lst.append(x)
        if i < steps - 1:
            topk_p, topk_index = forward(bs * topk)
    parent_list, top, draft_tokens = organize_draft_results(*lists, c["ndt"])
    if c["arbitrary"]:
        width = topk + (steps - 1) * topk * topk
        top = torch.stack([torch.randperm(width, generator=gen, device=DEVICE)[: c["ndt"] - 1].sort().values
                           for _ in range(bs)])
        draft_tokens = torch.gather(torch.cat(lists[1], 1), 1, top)
    return parent_list, top, draft_tokens


def req_to_token_table(c):
    """Distinct random slots >= 1 (slot 0 is reserved), wide enough for every layout; requests
    sit in shuffled rows of a larger table."""
    gen = torch.Generator().manual_seed(c["seed"] + 1)
    rows, width = c["bs"] + 2, 80 + 4 * 2 * 64 + 40
    table = (torch.randperm(rows * width, generator=gen) + 1).to(torch.int32).view(rows, width)
    pool_idx = torch.randperm(rows, generator=gen)[: c["bs"]]
    return table.to(DEVICE), pool_idx.to(DEVICE)


def ref_trees(parent_list, top, c):
    pl = parent_list.tolist() if parent_list.numel() else [[] for _ in range(c["bs"])]
    return [RT.build_tree(pl[b], top[b], c["topk"], c["steps"], c["ndt"]) for b in range(c["bs"])]


# -- comparisons: each returns a list of mismatch descriptions (empty = agreement) ---------------
def tree_mismatches(outs, trees, bonus, draft_tokens, seq_lens, ndt, mode):
    mask, pos, ridx, nxt, sib, tokens = (o.cpu() for o in outs)
    masks = [t["mask"] for t in trees]
    if mode == kernels.FULL_MASK:
        want_mask, got_mask = RT.full_mask_flat(masks, seq_lens, ndt), mask.tolist()
    elif mode == kernels.QLEN_ONLY:
        want_mask, got_mask = RT.qlen_mask_flat(masks), mask.tolist()
    else:  # signed int16/int32 wrap bit ndt-1 into the sign: compare as unsigned
        bits = 8 if mask.dtype == torch.uint8 else torch.iinfo(mask.dtype).bits
        want_mask, got_mask = RT.packed_mask_rows(masks), [v % (1 << bits) for v in mask.tolist()]
    bad = [] if got_mask == want_mask else [f"mask (mode {mode})"]
    for b, t in enumerate(trees):
        sl = slice(b * ndt, (b + 1) * ndt)
        want = {"positions": RL.verify_positions(int(seq_lens[b]), t["depth"]),
                "retrieve_index": [b * ndt + i for i in range(ndt)], "next_token": t["next_token"],
                "next_sibling": t["next_sibling"], "tokens": [int(bonus[b])] + draft_tokens[b].tolist()}
        got = {"positions": pos[sl].tolist(), "retrieve_index": ridx[b].tolist(),
               "next_token": nxt[b].tolist(), "next_sibling": sib[b].tolist(), "tokens": tokens[sl].tolist()}
        bad += [f"request {b}: {k} {got[k]} != {want[k]}" for k in want if got[k] != want[k]]
    return bad


def draft_loc_mismatches(out, src, tgt, table, pool_idx, prefix, topk, steps, ps):
    n, lanes, bad = topk * steps, (topk - 1) * (ps - 1), []
    for b, p in enumerate(prefix):
        row = table[int(pool_idx[b])].tolist()
        if out[b * n:(b + 1) * n].tolist() != RL.draft_out_cache_loc(row, p, topk, steps, ps):
            bad.append(f"request {b}: out_cache_loc")
        # Lanes (k-1, j) of docs/kernels.md: branch k's copies for j < last, then (0, 0).
        copies = RL.prefix_tail_copies(p, topk, steps, ps)
        last, want = (len(copies) // (topk - 1) if topk > 1 else 0), []
        for k in range(topk - 1):
            want += [(row[s], row[t]) for t, s in copies[k * last:(k + 1) * last]]
            want += [(0, 0)] * (ps - 1 - last)
        got = list(zip(src[b * lanes:(b + 1) * lanes].tolist(), tgt[b * lanes:(b + 1) * lanes].tolist()))
        if got != want:
            bad.append(f"request {b}: prefix-tail copies {got} != {want}")
    return bad


def verify_mismatches(predicts, accept_index, accept_num, results, ndt, sentinel=-7):
    bad, width = [], accept_index.shape[1]
    for b, (acc, preds, _) in enumerate(results):
        if int(accept_num[b]) != len(acc) - 1:
            bad.append(f"request {b}: accept_num {int(accept_num[b])} != {len(acc) - 1}")
        if accept_index[b].tolist() != [b * ndt + n for n in acc] + [-1] * (width - len(acc)):
            bad.append(f"request {b}: accept_index {accept_index[b].tolist()}, path {acc}")
        if predicts[b * ndt:(b + 1) * ndt].tolist() != [preds.get(t, sentinel) for t in range(ndt)]:
            bad.append(f"request {b}: predicts")
    return bad


def compaction_mismatches(x, accept_index, accept_lens, paths, table, pool_idx, seq_lens, bs, ndt):
    bad, width = [], accept_index.shape[1]
    got = compact_accepted_to_front(x, accept_index, bs, ndt).view(bs, ndt, -1).cpu()
    tgt, src = accepted_kv_moves(table, req_pool_indices=pool_idx, seq_lens=seq_lens,
                                 accept_index=accept_index, accept_lens=accept_lens, ndt=ndt)
    tgt, src, rows = tgt.view(bs, width).tolist(), src.view(bs, width).tolist(), x.view(bs, ndt, -1).cpu()
    for b, path in enumerate(paths):
        if got[b].tolist() != RT.compact(rows[b].tolist(), path, width):
            bad.append(f"request {b}: compacted rows")
        row = table[int(pool_idx[b])].tolist()
        moves = [(row[t], row[f]) for t, f in RT.accepted_kv_moves(int(seq_lens[b]), path)]
        moves += [(0, 0)] * (width - len(path))  # lanes past accept_lens: slot 0 onto itself
        if list(zip(tgt[b], src[b])) != moves:
            bad.append(f"request {b}: kv moves {list(zip(tgt[b], src[b]))} != {moves}")
    return bad


# -- pipelines: realistic inputs through an implementation --------------------------------------
def run_tree(c, impl, mode):
    parent_list, top, draft_tokens = draft_tree(c)
    seq_lens = torch.tensor(c["prefix"], device=DEVICE)
    bonus = torch.randint(0, VOCAB, (c["bs"],), generator=torch.Generator().manual_seed(c["seed"] + 3))
    outs = impl(bonus.to(DEVICE), parent_list, top, draft_tokens, seq_lens, sum(c["prefix"]),
                c["topk"], c["steps"], c["ndt"], mode)
    return outs, ref_trees(parent_list, top, c), (bonus, draft_tokens.cpu(), seq_lens.cpu())


def run_verify(c, impl):
    """Kernel outputs (predicts, accept_index, accept_num), the reference results, seq_lens."""
    (_, _, ridx, nxt, sib, tokens), trees, (_, _, seq_lens) = run_tree(
        c, kernels.build_tree_kernel_efficient_ref, kernels.FULL_MASK)
    bs, ndt, steps = c["bs"], c["ndt"], c["steps"]
    cand = tokens.view(bs, ndt)
    # Mostly the target agrees with one of the node's children: long accepted paths.
    gen = torch.Generator().manual_seed(c["seed"] + 2)
    tp = torch.randint(0, VOCAB, (bs, ndt), generator=gen)
    for b, t in enumerate(trees):
        for n in range(ndt):
            kids = [k for k in range(1, ndt) if t["parents"][k] == n]
            if kids and float(torch.rand(1, generator=gen)) < 0.8:
                tp[b, n] = cand[b, kids[int(torch.randint(len(kids), (1,), generator=gen))]]
    predicts = torch.full((bs * ndt,), -7, dtype=torch.int32, device=DEVICE)
    accept_index = torch.full((bs, steps + 1), -1, dtype=torch.int32, device=DEVICE)
    accept_num = torch.zeros(bs, dtype=torch.int32, device=DEVICE)
    impl(predicts, accept_index, accept_num, cand, ridx, nxt, sib, tp.to(DEVICE).reshape(-1))
    results = [RT.verify_greedy(cand[b].tolist(), t["parents"], tp[b].tolist(), steps)
               for b, t in enumerate(trees)]
    return (predicts.cpu(), accept_index.cpu(), accept_num.cpu()), results, seq_lens.to(DEVICE)


def run_draft_locs(c, impl):
    table, pool_idx = req_to_token_table(c)
    bs, topk, steps, ps = c["bs"], c["topk"], c["steps"], c["page_size"]
    out, src, tgt = (torch.full((n,), -7, dtype=torch.int64, device=DEVICE)
                     for n in (bs * topk * steps, bs * (topk - 1) * (ps - 1), bs * (topk - 1) * (ps - 1)))
    impl(pool_idx, table, torch.tensor(c["prefix"], device=DEVICE), out, src, tgt, topk, steps, ps)
    return out.cpu(), src.cpu(), tgt.cpu(), table.cpu(), pool_idx.cpu()


IDS = ["ref", "triton"]
TREE_IMPLS = [kernels.build_tree_kernel_efficient_ref, kernels.build_tree_kernel_efficient]
VERIFY_IMPLS = [kernels.verify_tree_greedy_ref, kernels.verify_tree_greedy]
LOC_IMPLS = [kernels.assign_draft_cache_locs_ref, kernels.assign_draft_cache_locs]


# -- agreement ---------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", TREE_IMPLS, ids=IDS)
@settings(deadline=None)
@given(c=configs())
def test_build_tree_agrees(impl, c):
    for mode in MODES:
        outs, trees, data = run_tree(c, impl, mode)
        assert tree_mismatches(outs, trees, *data, c["ndt"], mode) == []


@pytest.mark.parametrize("impl", VERIFY_IMPLS, ids=IDS)
@settings(deadline=None)
@given(c=configs())
def test_verify_greedy_agrees(impl, c):
    got, results, _ = run_verify(c, impl)
    assert verify_mismatches(*got, results, c["ndt"]) == []


@pytest.mark.parametrize("impl", LOC_IMPLS, ids=IDS)
@settings(deadline=None)
@given(c=configs())
def test_draft_cache_locs_agree(impl, c):
    assert draft_loc_mismatches(*run_draft_locs(c, impl), c["prefix"], c["topk"], c["steps"],
                                c["page_size"]) == []


@settings(deadline=None)
@given(c=configs())
def test_per_step_rows_agree(c):
    n = c["bs"] * c["topk"] * c["steps"]
    flat = torch.randperm(3 * n, generator=torch.Generator().manual_seed(c["seed"]))[:n].to(DEVICE)
    got = per_step_draft_out_cache_loc(flat, c["bs"], c["topk"], c["steps"])
    assert got.is_contiguous() and got.tolist() == RL.per_step_rows(flat, c["bs"], c["topk"], c["steps"])


def compaction_case(c):
    (_, accept_index, accept_num), results, seq_lens = run_verify(c, kernels.verify_tree_greedy_ref)
    table, pool_idx = req_to_token_table(c)
    paths = [acc for acc, _, _ in results]
    return accept_index.to(DEVICE), (accept_num.long().to(DEVICE) + 1, paths, table, pool_idx,
                                     seq_lens, c["bs"], c["ndt"])


@settings(deadline=None)
@given(c=configs())
def test_compaction_agrees(c):
    accept_index, args = compaction_case(c)
    n = c["bs"] * c["ndt"]
    for x in (torch.arange(n, device=DEVICE) + 100, torch.randn(n, 3, device=DEVICE)):  # predict, hidden
        assert compaction_mismatches(x, accept_index, *args) == []


def test_worked_examples():
    """Section 3: prompt of 7 -> draft extend [0..6]; draft decode [7] then [8]; draft extend
    after decode [7, 8, 9, 10] for ndt 4 (standalone: one later). Section 4: page 4, topk 2,
    steps 3, seq_len 6 -> last 2, base 4, npb 2; branch 0 at 6,7,8; branch 1 at 14,15,16;
    positions 12,13 hold copies of 4,5."""
    res = doctest.testmod(RL)  # the module docstring holds both worked examples
    assert res.failed == 0 and res.attempted == 5
    assert RL.draft_slot_positions(6, 2, 3, 4) == [[6, 7, 8], [14, 15, 16]]
    assert RL.prefix_tail_copies(6, 2, 3, 4) == [(12, 4), (13, 5)]
    assert (RL.draft_positions(7, 3, True), RL.draft_extend_positions(7, 4, True)) == ([7, 8], [7, 8, 9, 10])
    assert RL.draft_prefill_positions(7, False) == list(range(8))
    assert (RL.draft_positions(7 + 1, 3, False), RL.draft_positions(7, 1, True)) == ([8, 9], [])
    assert RL.draft_extend_positions(7, 4, False) == [8, 9, 10, 11]
    assert RL.verify_positions(7, [0, 1, 1, 2]) == [7, 8, 8, 9]
    assert RL.branch_geometry(6, 3, 4) == (2, 4, 2)
    assert RL.draft_slot_positions(6, 2, 3, 1) == [[6, 7, 8], [9, 10, 11]]
    assert RL.draft_slot_positions(6, 1, 3, 4) == [[6, 7, 8]] and RL.prefix_tail_copies(6, 1, 3, 4) == []
    assert RL.draft_out_cache_loc(list(range(100, 120)), 6, 2, 3, 4) == [106, 107, 108, 114, 115, 116]
    assert RL.per_step_rows([0, 1, 2, 10, 11, 12], 1, 2, 3) == [[0, 10], [1, 11], [2, 12]]


def test_references_are_independent():
    for mod in (RL, RT):
        tree = ast.parse(pathlib.Path(mod.__file__).read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m for m in names if m.split(".")[0] in ("specdec", "kernels")}, mod.__name__


@pytest.mark.parametrize("draft", ["eagle", "self"])
def test_engine_positions_follow_reference(draft):
    """The engine's traced forwards (draft extend after prefill, draft decode, target verify,
    draft extend after decode) run at references/layout.py's positions (sections 2 and 3)."""
    from specdec import Engine, SpecConfig
    from specdec.trace import TraceRecorder
    topk, steps, ndt, shifted, prompts = 2, 3, 5, draft == "eagle", [[1, 2, 3, 4, 5, 6, 7], [3, 4, 5]]
    eng = Engine(model="tiny", spec=SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt),
                 draft=draft, page_size=4, seed=1, max_batch=4, device=DEVICE)
    eng.recorder = TraceRecorder(4, keep_kv_slots=False)
    eng.generate(prompts, max_new_tokens=4)
    ext = next(f for f in eng.recorder.prefill if f.mode == "draft_extend")
    assert ext.positions.tolist() == sum((RL.draft_prefill_positions(len(p), shifted) for p in prompts), [])
    assert eng.recorder.rounds
    for r in eng.recorder.rounds:
        pos = {m: [f.positions.tolist() for f in r.forwards if f.mode == m]
               for m in ("draft_decode", "target_verify", "draft_extend")}
        seq = next(f for f in r.forwards if f.mode == "target_verify").seq_lens.tolist()
        prefix = [s if shifted else s + 1 for s in seq]
        assert pos["draft_decode"] == [[RL.draft_positions(p, steps, shifted)[i] for p in prefix
                                        for _ in range(topk)] for i in range(steps - 1)]
        depths = [RT.build_tree(pl, top, topk, steps, ndt)["depth"]
                  for pl, top in zip(r.parent_list, r.top_scores_index)]
        assert pos["target_verify"] == [sum(map(RL.verify_positions, seq, depths), [])]
        assert pos["draft_extend"] == [sum((RL.draft_extend_positions(s, ndt, shifted) for s in seq), [])]


# -- non-vacuity: a corrupted input makes each comparison report a mismatch ---------------------
# bs 2, topk 2, steps 3, ndt 6 (> topk + 1, so some node hangs off a non-root node), page 4.
FIXED = dict(bs=2, topk=2, steps=3, ndt=6, page_size=4, prefix=[6, 13], arbitrary=False, seed=5)


def test_nonvacuous_position_shifted():
    outs, trees, data = run_tree(FIXED, kernels.build_tree_kernel_efficient_ref, kernels.FULL_MASK)
    assert tree_mismatches(outs, trees, *data, 6, kernels.FULL_MASK) == []
    outs = list(outs)
    outs[1] = outs[1].clone()
    outs[1][3] += 1  # verify position of request 0, node 3
    assert any("positions" in m for m in tree_mismatches(outs, trees, *data, 6, kernels.FULL_MASK))
    locs = run_draft_locs(FIXED, kernels.assign_draft_cache_locs_ref)
    assert draft_loc_mismatches(*locs, [p + 1 for p in FIXED["prefix"]], 2, 3, 4)


def test_nonvacuous_slots_swapped():
    out, *rest = run_draft_locs(FIXED, kernels.assign_draft_cache_locs_ref)
    assert draft_loc_mismatches(out, *rest, FIXED["prefix"], 2, 3, 4) == []
    swapped = out.clone()
    swapped[[1, 4]] = out[[4, 1]]
    assert draft_loc_mismatches(swapped, *rest, FIXED["prefix"], 2, 3, 4)
    flat = torch.arange(12)
    rows = RL.per_step_rows(flat, 2, 2, 3)
    rows[0][0], rows[0][1] = rows[0][1], rows[0][0]
    assert per_step_draft_out_cache_loc(flat, 2, 2, 3).tolist() != rows


def test_nonvacuous_parent_changed():
    outs, trees, data = run_tree(FIXED, kernels.build_tree_kernel_efficient_ref, kernels.QLEN_ONLY)
    parent_list, top, _ = draft_tree(FIXED)
    assert tree_mismatches(outs, trees, *data, 6, kernels.QLEN_ONLY) == []
    b, g = next((b, int(g)) for b in range(2) for g in top[b] if int(g) // 2 > 0)
    corrupt = parent_list.clone()
    corrupt[b, g // 2] = -5  # candidate g's parent is no longer the selected node it was
    assert tree_mismatches(outs, ref_trees(corrupt, top, FIXED), *data, 6, kernels.QLEN_ONLY)


def test_nonvacuous_verify_prediction_changed():
    got, results, _ = run_verify(FIXED, kernels.verify_tree_greedy_ref)
    assert verify_mismatches(*got, results, 6) == []
    acc, preds, bonus = results[0]
    wrong = (acc, {**preds, acc[-1]: bonus + 1}, bonus + 1)  # another bonus at the last node
    assert verify_mismatches(*got, [wrong] + results[1:], 6)


def test_nonvacuous_compaction_index_wrong():
    accept_index, args = compaction_case(FIXED)
    x = torch.arange(12, device=DEVICE) + 100
    assert compaction_mismatches(x, accept_index, *args) == []
    wrong = accept_index.clone()
    wrong[1, 0] = 6 + 1  # request 1's root replaced by its node 1
    bad = compaction_mismatches(x, wrong, *args)
    assert any("compacted" in m for m in bad) and any("kv moves" in m for m in bad)


@pytest.mark.parametrize("bs,i", [(1, 1), (3, 1), (2, 4)])
def test_chain_selection_is_the_general_rule_with_one_child(bs, i):
    """topk 1 (a chain): select_top_k_tokens's shortcut gives what contract section 5 asks of
    step i >= 1: the only child is kept (its token, the branch's hidden state), its score is
    the parent's times its probability, and its parent's global index is
    topk*topk*(i-1) + topk + 0 = i. The general rule (topk > 1) is checked on real trees
    above; here every output of the chain case is pinned down."""
    gen = torch.Generator().manual_seed(bs * 10 + i)
    topk_p, scores = torch.rand(bs, 1, generator=gen), torch.rand(bs, 1, generator=gen)
    topk_index = torch.randint(0, VOCAB, (bs, 1), generator=gen)
    hidden = torch.randn(bs, 5, generator=gen)
    ids, h, new_scores, (expand, tokens, parents) = select_top_k_tokens(
        i, topk_p=topk_p, topk_index=topk_index, hidden_states=hidden, scores=scores, topk=1)
    assert torch.equal(ids, topk_index.flatten())
    assert torch.equal(h, hidden)
    assert torch.equal(new_scores, scores * topk_p) and new_scores.shape == (bs, 1)
    assert torch.equal(expand.reshape(bs, 1), scores * topk_p)
    assert torch.equal(tokens, topk_index.view(bs, 1))
    assert parents.dtype == torch.long and parents.tolist() == [[i]] * bs
