"""verify_tree_greedy: Triton == reference, and reference == the greedy-path law."""
from __future__ import annotations

import kernels._triton_env  # noqa: F401
import torch
from hypothesis import given, settings, strategies as st

from harness.strategies.configs import spec_shapes

from kernels.verify import verify_tree_greedy, verify_tree_greedy_ref

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SENTINEL = -7  # predicts entries the kernel must not touch keep this value


@st.composite
def shapes(draw):
    bs = draw(st.integers(1, 6))
    topk, steps, ndt = draw(spec_shapes())  # feasible by construction, ndt <= 32
    return bs, topk, steps, ndt, draw(st.integers(0, 2**31 - 1))


def random_tree(ndt, topk, steps, gen):
    """Parent array of a draft-shaped tree: depth <= steps, at most topk children per node
    (when possible), parents precede children."""
    parent, depth, kids = [-1], [0], [0]
    for i in range(1, ndt):
        ok = [j for j in range(i) if depth[j] < steps and kids[j] < topk]
        ok = ok or [j for j in range(i) if depth[j] < steps]
        j = ok[int(torch.randint(len(ok), (1,), generator=gen))]
        parent.append(j)
        depth.append(depth[j] + 1)
        kids[j] += 1
        kids.append(0)
    return parent


def links(parent, ndt):
    nxt, sib = [-1] * ndt, [-1] * ndt
    for i in range(ndt - 1, 0, -1):  # ascending sibling order
        sib[i], nxt[parent[i]] = nxt[parent[i]], i
    return nxt, sib


def make_inputs(bs, topk, steps, ndt, seed, vocab=20):
    gen = torch.Generator().manual_seed(seed)
    parents, cands, nxts, sibs, tpred = [], [], [], [], []
    for _ in range(bs):
        parent = random_tree(ndt, topk, steps, gen)
        nxt, sib = links(parent, ndt)
        # Siblings carry distinct tokens (they are a top-k), so the greedy path is unique.
        cand = [int(torch.randint(vocab, (1,), generator=gen))]
        for i in range(1, ndt):
            used = {cand[c] for c in range(1, i) if parent[c] == parent[i]}
            cand.append(next(t for t in torch.randperm(vocab, generator=gen).tolist() if t not in used))
        # The target agrees with some child most of the time, so paths get long.
        pred = []
        for t in range(ndt):
            ch = [c for c in range(1, ndt) if parent[c] == t]
            if ch and float(torch.rand(1, generator=gen)) < 0.75:
                pred.append(cand[ch[int(torch.randint(len(ch), (1,), generator=gen))]])
            else:
                pred.append(int(torch.randint(vocab, (1,), generator=gen)))
        parents.append(parent), cands.append(cand), nxts.append(nxt), sibs.append(sib), tpred.append(pred)
    t = lambda x: torch.tensor(x, dtype=torch.int64, device=DEVICE)  # noqa: E731
    ridx = torch.arange(bs * ndt, device=DEVICE).view(bs, ndt)
    return parents, t(cands), ridx, t(nxts), t(sibs), t(tpred).flatten()


def outputs(bs, ndt, steps):
    return (torch.full((bs * ndt,), SENTINEL, dtype=torch.int32, device=DEVICE),
            torch.full((bs, steps + 1), -1, dtype=torch.int32, device=DEVICE),
            torch.full((bs,), SENTINEL, dtype=torch.int32, device=DEVICE))


def greedy_law(parent, cand, pred, steps, b, ndt):
    """Longest root path whose every node's token is the target's prediction at its parent
    (at most `steps` drafts). Returns the accepted node list, root first."""
    path = [0]
    while len(path) <= steps:
        nxt = [c for c in range(1, ndt) if parent[c] == path[-1] and cand[c] == pred[b * ndt + path[-1]]]
        if not nxt:
            break
        path.append(nxt[0])
    return path


@settings(deadline=None)
@given(shape=shapes())
def test_verify_greedy_matches_ref_and_law(shape):
    bs, topk, steps, ndt, seed = shape
    parents, cand, ridx, nxt, sib, tpred = make_inputs(bs, topk, steps, ndt, seed)
    got, want = outputs(bs, ndt, steps), outputs(bs, ndt, steps)
    verify_tree_greedy(*got, cand, ridx, nxt, sib, tpred)
    verify_tree_greedy_ref(*want, cand, ridx, nxt, sib, tpred)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w.cpu())

    predicts, accept_index, accept_num = (w.cpu() for w in want)
    c, p = cand.cpu().tolist(), tpred.cpu().tolist()
    for b in range(bs):
        path = greedy_law(parents[b], c[b], p, steps, b, ndt)
        n = len(path) - 1
        assert int(accept_num[b]) == n
        assert accept_index[b].tolist() == [b * ndt + x for x in path] + [-1] * (steps - n)
        # Every accepted node (bonus included) holds the target's token; nothing else is written.
        row = predicts[b * ndt: (b + 1) * ndt].tolist()
        assert row == [p[b * ndt + t] if t in path else SENTINEL for t in range(ndt)]
        for a, child in zip(path, path[1:]):  # accepted drafts are what the target predicted
            assert row[a] == c[b][child]


def test_chain_all_accepted_and_none_accepted():
    # topk == 1 chain of 3 drafts: a target that agrees everywhere accepts all three.
    ndt, steps = 4, 3
    cand = torch.tensor([[9, 1, 2, 3]], device=DEVICE)
    ridx = torch.arange(ndt, device=DEVICE).view(1, ndt)
    nxt = torch.tensor([[1, 2, 3, -1]], device=DEVICE)
    sib = torch.full((1, ndt), -1, device=DEVICE)
    for tpred, n in [([1, 2, 3, 4], 3), ([5, 2, 3, 4], 0)]:
        tpred = torch.tensor(tpred, device=DEVICE)
        got, want = outputs(1, ndt, steps), outputs(1, ndt, steps)
        verify_tree_greedy(*got, cand, ridx, nxt, sib, tpred)
        verify_tree_greedy_ref(*want, cand, ridx, nxt, sib, tpred)
        for g, w in zip(got, want):
            assert torch.equal(g.cpu(), w.cpu())
        assert int(got[2][0]) == n and int(got[0][n]) == int(tpred[n])
