"""tree_speculative_sampling_target_only: Triton == reference (bit exact), reference == the
sampling law, the final token distribution == the target's, and no token >= vocab."""
from __future__ import annotations

import math

import kernels._triton_env  # noqa: F401
import numpy as np
import pytest
import torch
from final_draw_law import check_final_token
from hypothesis import given, settings, strategies as st

from harness.strategies.configs import spec_shapes

from kernels.sampling import (tree_speculative_sampling_target_only as kernel,
                              tree_speculative_sampling_target_only_ref as ref)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SENTINEL = -7
BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))  # 1 - 2^-24
# Not multiples of the 1024 block (100, 1000, 8193, 10000) and a few tiny ones.
VOCABS = [2, 7, 100, 1000, 1024, 8193, 10000]


@st.composite
def shapes(draw):
    bs = draw(st.integers(1, 6))
    topk, steps, ndt = draw(spec_shapes())  # feasible by construction, ndt <= 32
    return bs, topk, steps, ndt, draw(st.sampled_from(VOCABS)), draw(st.integers(0, 2**31 - 1))


def random_tree(ndt, topk, steps, gen):
    """Parent array: depth <= steps, <= topk children per node when possible."""
    parent, depth, kids = [-1], [0], [0]
    for i in range(1, ndt):
        ok = [j for j in range(i) if depth[j] < steps and kids[j] < topk]
        ok = ok or [j for j in range(i) if depth[j] < steps]
        j = ok[int(torch.randint(len(ok), (1,), generator=gen))]
        parent.append(j), depth.append(depth[j] + 1), kids.append(0)
        kids[j] += 1
    return parent


def make_inputs(bs, steps, ndt, vocab, seed, topk, sharp, sparse, draft_mass):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(bs, ndt, vocab, generator=gen) * sharp
    if sparse:  # truncated (top-p like) rows: zero tails exercise the residual edges
        logits[torch.rand(bs, ndt, vocab, generator=gen) < 0.5] = -math.inf
        logits[..., 0] = 0.0
    target = logits.softmax(-1)
    draft = torch.rand(bs, ndt, vocab, generator=gen).softmax(-1) * draft_mass
    parents, cand = [], torch.zeros(bs, ndt, dtype=torch.int64)
    nxt, sib = torch.full((bs, ndt), -1), torch.full((bs, ndt), -1)
    for b in range(bs):
        parent = random_tree(ndt, topk, steps, gen)
        parents.append(parent)
        for a in range(ndt):  # draft tokens of a node's children: distinct, drawn from target
            ch = [c for c in range(1, ndt) if parent[c] == a]
            if ch:
                cand[b, ch] = torch.multinomial(target[b, a] + 1e-3, len(ch), replacement=len(ch) > vocab,
                                                generator=gen)
        for i in range(ndt - 1, 0, -1):
            sib[b, i], nxt[b, parent[i]] = nxt[b, parent[i]], i
    uni = torch.rand(bs, ndt, generator=gen)
    special = torch.tensor([0.0, BELOW_ONE, 1.0])
    fin = torch.where(torch.rand(bs, generator=gen) < 0.5, torch.rand(bs, generator=gen),
                      special[torch.randint(3, (bs,), generator=gen)])
    ridx = torch.arange(bs * ndt).view(bs, ndt)
    ins = [cand, ridx, nxt, sib, uni, fin, target, draft]
    return parents, [t.to(DEVICE) for t in ins]


def run_both(ins, bs, ndt, steps, ts, ta):
    cand, ridx, nxt, sib, uni, fin, target, draft = ins
    res = []
    for fn in (kernel, ref):
        out = [torch.full((bs * ndt,), SENTINEL, dtype=torch.int32, device=DEVICE),
               torch.full((bs, steps + 1), -1, dtype=torch.int32, device=DEVICE),
               torch.full((bs,), SENTINEL, dtype=torch.int32, device=DEVICE), draft.clone()]
        fn(*out[:3], cand, ridx, nxt, sib, uni, fin, target, out[3], ts, ta)
        res.append([o.cpu() for o in out])
    for g, w in zip(*res):
        assert torch.equal(g, w)
    return res[1]


def law(parent, cand, q, d0, coins, coin_f, ts, ta, steps):
    """Plain-Python statement over parent lists (children in ascending order), fp32 walk.
    Returns accepted path, draft row after rejections, and the residual used at the end."""
    f32 = np.float32
    node, acc, coin, path, d = 0, f32(0), f32(coins[0]), [0], d0.copy()
    for _ in range(steps):
        took = None
        for c in [c for c in range(1, len(parent)) if parent[c] == node]:
            pt = f32(q[node, cand[c]])
            acc = f32(acc + pt)
            if coin < f32(acc / f32(ta)) or (pt > 0 and pt >= f32(ts)):
                took = c
                break
            d[node, cand[c]] = pt
        if took is None:
            break
        path.append(took)
        node, acc, coin = took, f32(0), f32(coins[took])
    p = d[node] if len(path) - 1 != steps else np.zeros_like(q[node])
    r = np.maximum(q[node] - p, f32(0)).astype(np.float64)  # fp32 subtraction, like the kernel
    return path, d, r


@settings(deadline=None)
@given(shape=shapes(), sharp=st.sampled_from([1.0, 4.0]), sparse=st.booleans(),
       draft_mass=st.sampled_from([0.0, 0.5]), th=st.sampled_from([(1.0, 1.0), (0.3, 0.7)]))
def test_sampling_matches_ref_and_law(shape, sharp, sparse, draft_mass, th):
    bs, topk, steps, ndt, vocab, seed = shape
    parents, ins = make_inputs(bs, steps, ndt, vocab, seed, topk, sharp, sparse, draft_mass)
    predicts, accept_index, accept_num, draft_out = run_both(ins, bs, ndt, steps, *th)
    cand, _, _, _, uni, fin, target, draft = (t.cpu() for t in ins)
    for b in range(bs):
        path, d, r = law(parents[b], cand[b].tolist(), target[b].numpy(), draft[b].numpy(),
                         uni[b].tolist(), float(fin[b]), *th, steps)
        n = len(path) - 1
        assert int(accept_num[b]) == n
        assert accept_index[b].tolist() == [b * ndt + x for x in path] + [-1] * (steps - n)
        assert np.array_equal(draft_out[b].numpy(), d)
        row = predicts[b * ndt: (b + 1) * ndt].tolist()
        for a, c in zip(path, path[1:]):
            assert row[a] == int(cand[b, c])
        assert all(row[t] == SENTINEL for t in range(ndt) if t not in path)
        check_final_token(row[path[-1]], r, fin[b], vocab, target[b, path[-1]].numpy())


@pytest.mark.parametrize("vocab", [100, 8193, 10000])
@pytest.mark.parametrize("coin", [BELOW_ONE, 1.0])
def test_final_token_never_out_of_vocab(vocab, coin):
    # GHSA-8wr5-jm2h-8r4f: with coin ~ 1 an fp32 cumsum can stay <= u and a naive search
    # returns vocab. Rows: mass at the tail, mass only at 0, a residual of all zeros
    # (draft == target), and a dense softmax.
    bs, ndt, steps = 4, 2, 1
    gen = torch.Generator().manual_seed(vocab)
    target = torch.zeros(bs, ndt, vocab)
    target[0, :, -3:] = torch.tensor([0.2, 0.3, 0.5])
    target[1, :, 0] = 1.0
    target[2:] = torch.randn(2, ndt, vocab, generator=gen).softmax(-1)
    draft = torch.zeros_like(target)
    draft[2] = target[2]
    cand = torch.zeros(bs, ndt, dtype=torch.int64)  # token 0: rejected unless it has mass
    cand[1, 1] = 5
    nxt = torch.tensor([[1, -1]] * bs)
    sib = torch.full((bs, ndt), -1)
    uni = torch.full((bs, ndt), 0.999)
    fin = torch.full((bs,), coin)
    ins = [t.to(DEVICE) for t in [cand, torch.arange(bs * ndt).view(bs, ndt), nxt, sib, uni, fin,
                                  target, draft]]
    predicts, _, accept_num, draft_out = run_both(ins, bs, ndt, steps, 1.0, 1.0)
    assert accept_num.tolist() == [0, 0, 0, 0]
    final = predicts.view(bs, ndt)[:, 0].tolist()
    assert all(0 <= t < vocab for t in final)
    r = (target[:, 0] - draft_out[:, 0]).clamp_min(0)
    for b in range(bs):
        check_final_token(final[b], r[b].double().numpy(), coin, vocab,
                          target[b, 0].double().numpy())
    assert final[1] == 0  # all mass on 0
    assert final[2] == vocab - 1  # empty residual: the last token the (dense) target supports
    if coin == 1.0:  # no cumsum exceeds u: the last token with mass
        assert final[0] == vocab - 1


def test_full_depth_samples_from_target_alone():
    # Chain of 2 drafts, both certain under the target (p = 1 >= threshold_single); the
    # leaf's draft row equals its target row, so only "ignore draft at full depth" gives 3.
    vocab, ndt, steps = 10, 3, 2
    target = torch.zeros(1, ndt, vocab)
    target[..., 3] = 1.0
    ins = [torch.tensor([[0, 3, 3]]), torch.arange(ndt).view(1, ndt), torch.tensor([[1, 2, -1]]),
           torch.full((1, ndt), -1), torch.full((1, ndt), 0.5), torch.tensor([0.5]), target,
           target.clone()]
    predicts, accept_index, accept_num, _ = run_both([t.to(DEVICE) for t in ins], 1, ndt, steps, 1.0, 1.0)
    assert accept_num.tolist() == [2] and accept_index.tolist() == [[0, 1, 2]]
    assert predicts.tolist() == [3, 3, 3]


@pytest.mark.parametrize("coin,ts,ta,accepted", [
    (0.6, 1.0, 1.0, 0), (0.6, 1.0, 0.7, 1),  # coin < prob_acc / threshold_acc
    (0.5, 1.0, 1.0, 0),  # strict: coin == prob_acc is a rejection
    (0.99, 1.0, 1.0, 0), (0.99, 0.4, 1.0, 1),  # p >= threshold_single
])
def test_thresholds(coin, ts, ta, accepted):
    vocab, ndt = 8, 2
    target = torch.full((1, ndt, vocab), 0.5 / (vocab - 1))
    target[0, 0, 2] = 0.5
    ins = [torch.tensor([[0, 2]]), torch.arange(ndt).view(1, ndt), torch.tensor([[1, -1]]),
           torch.full((1, ndt), -1), torch.full((1, ndt), coin), torch.tensor([0.3]), target,
           torch.zeros_like(target)]
    _, _, accept_num, _ = run_both([t.to(DEVICE) for t in ins], 1, ndt, 1, ts, ta)
    assert accept_num.tolist() == [accepted]


@settings(deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 3))
def test_first_token_distribution_is_target(seed, k):
    # Single-level tree (root + k distinct drafts), zero draft probs: whatever is accepted,
    # the first emitted token must be distributed as the target row of the root.
    # TV bound: P(TV >= eps) <= (2^V - 2) exp(-2 N eps^2) (Weissman et al. 2003) ~ 3e-8 here.
    vocab, n, eps = 6, 3000, 0.06
    gen = torch.Generator().manual_seed(seed)
    q = (torch.randn(vocab, generator=gen) * 1.5).softmax(-1)
    target = q.expand(n, k + 1, vocab).contiguous()
    cand = torch.cat([torch.zeros(n, 1, dtype=torch.int64),
                      torch.randperm(vocab, generator=gen)[:k].expand(n, k)], 1)
    nxt = torch.full((n, k + 1), -1)
    nxt[:, 0] = 1
    sib = torch.full((n, k + 1), -1)
    sib[:, 1:k] = torch.arange(2, k + 1)
    ins = [cand, torch.arange(n * (k + 1)).view(n, k + 1), nxt, sib,
           torch.rand(n, k + 1, generator=gen), torch.rand(n, generator=gen), target,
           torch.zeros_like(target)]
    fn = kernel if DEVICE == "cuda" else ref  # the interpreter is too slow for 3000 programs
    predicts = torch.full((n * (k + 1),), SENTINEL, dtype=torch.int32, device=DEVICE)
    fn(predicts, torch.full((n, 2), -1, dtype=torch.int32, device=DEVICE),
       torch.zeros(n, dtype=torch.int32, device=DEVICE), *[t.to(DEVICE) for t in ins])
    first = predicts.view(n, k + 1)[:, 0].cpu()
    assert (first >= 0).all() and (first < vocab).all()
    emp = torch.bincount(first.long(), minlength=vocab).double() / n
    assert 0.5 * (emp - q.double()).abs().sum() < eps


@pytest.mark.parametrize("fault", [False, True])
def test_coin_zero_never_takes_zero_probability(fault):
    # Contract section 12: coins lie in [0, 1), comparisons are strict. Coin 0 with a
    # draft of target probability 0 (and a leading zero in the row) must neither accept the
    # draft nor draw token 0; `coin_le_cdf_accepts_zero_prob` (SGLang #35798) does both.
    import faultpoints as faults
    vocab, ndt = 8, 2
    target = torch.zeros(1, ndt, vocab)
    target[0, :, 3:] = 0.2
    ins = [torch.tensor([[0, 1]]), torch.arange(ndt).view(1, ndt), torch.tensor([[1, -1]]),
           torch.full((1, ndt), -1), torch.zeros(1, ndt), torch.tensor([0.0]), target,
           torch.zeros_like(target)]
    ins = [t.to(DEVICE) for t in ins]
    with faults.active(*(["coin_le_cdf_accepts_zero_prob"] if fault else [])):
        predicts, accept_index, accept_num, _ = run_both(ins, 1, ndt, 1, 1.0, 1.0)
    if fault:  # token 1 (p = 0) accepted, then the bonus draw takes token 0 (p = 0)
        assert accept_num.tolist() == [1] and predicts.tolist() == [1, 0]
    else:
        assert accept_num.tolist() == [0] and predicts.tolist() == [3, SENTINEL]
