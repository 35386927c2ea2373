"""chain_speculative_sampling: Triton == reference (bit exact, faults included), the
accept / predict layout and the acceptance rule as a plain-numpy statement, the final token
inside its residual, and the emitted first token distributed exactly as the target (with a
biased rule, threshold_acc = 0.3, as the negative control that the same check must reject)."""
from __future__ import annotations

import math

import kernels._triton_env  # noqa: F401
import faultpoints as faults
import numpy as np
import pytest
import torch
from final_draw_law import check_final_token
from hypothesis import given, settings, strategies as st

from harness.laws.distribution import chi2_critical
from kernels.chain_sampling import (chain_speculative_sampling as kernel,
                                    chain_speculative_sampling_ref as ref)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SENTINEL = -7
BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))  # 1 - 2^-24
VOCABS = [2, 7, 100, 1000, 1024, 8193]  # tiny ones and non-multiples of the 1024 block
FAULTS = (None, "coin_le_cdf_accepts_zero_prob", "recovered_token_out_of_vocab")


def _rows(bs, ndt, vocab, sharp, sparse, gen):
    logits = torch.randn(bs, ndt, vocab, generator=gen) * sharp
    if sparse:  # truncated (top-k / top-p like) rows: exact zeros in the distribution
        logits[torch.rand(bs, ndt, vocab, generator=gen) < 0.5] = -math.inf
        logits[..., int(torch.randint(vocab, (1,), generator=gen))] = 0.0
    return logits.softmax(-1)


def make_inputs(bs, ndt, vocab, seed, sharp, sparse, cand_from):
    """Target rows p, draft rows q, and candidates drawn from q (as a sampling draft does),
    from p (mostly accepted: full depth), or uniformly (p == 0 and q == 0 drafts)."""
    gen = torch.Generator().manual_seed(seed)
    target = _rows(bs, ndt, vocab, sharp, sparse, gen)
    draft = _rows(bs, ndt, vocab, sharp, sparse, gen)
    cand = torch.randint(vocab, (bs, ndt), generator=gen)
    if cand_from != "uniform":
        src = draft if cand_from == "draft" else target
        rows = src[:, :-1].reshape(-1, vocab)
        cand[:, 1:] = torch.multinomial(rows, 1, generator=gen).view(bs, -1)
    special = torch.tensor([0.0, BELOW_ONE])
    uni = torch.rand(bs, ndt, generator=gen)
    uni = torch.where(torch.rand(bs, ndt, generator=gen) < 0.2,
                      special[torch.randint(2, (bs, ndt), generator=gen)], uni)
    fin = torch.where(torch.rand(bs, generator=gen) < 0.5, torch.rand(bs, generator=gen),
                      torch.tensor([0.0, BELOW_ONE, 1.0])[torch.randint(3, (bs,), generator=gen)])
    return [t.to(DEVICE) for t in (cand, uni, fin, target, draft)]


def run_both(ins, threshold_acc=1.0, fns=(kernel, ref)):
    cand, uni, fin, target, draft = ins
    bs, ndt = cand.shape
    res = []
    for fn in fns:
        out = [torch.full((bs * ndt,), SENTINEL, dtype=torch.int32, device=DEVICE),
               torch.full((bs, ndt), SENTINEL, dtype=torch.int32, device=DEVICE),
               torch.full((bs,), SENTINEL, dtype=torch.int32, device=DEVICE)]
        fn(*out, cand, uni, fin, target, draft, threshold_acc)
        res.append([o.cpu() for o in out])
    for g, w in zip(res[0], res[-1]):
        assert torch.equal(g, w)
    return res[-1]


def law_walk(cand, p_rows, q_rows, coins, ta):
    """Accepted drafts: while coin_j * q * threshold_acc < p in fp32 (in that order)."""
    f32 = np.float32
    n = 0
    while n < len(cand) - 1:
        d = cand[n + 1]
        if not f32(f32(f32(coins[n]) * f32(q_rows[n, d])) * f32(ta)) < f32(p_rows[n, d]):
            break
        n += 1
    return n


@settings(deadline=None)
@given(bs=st.integers(1, 6), steps=st.integers(1, 5), vocab=st.sampled_from(VOCABS),
       seed=st.integers(0, 2**31 - 1), sharp=st.sampled_from([1.0, 4.0]), sparse=st.booleans(),
       cand_from=st.sampled_from(["draft", "target", "uniform"]),
       ta=st.sampled_from([1.0, 0.3]), fault=st.sampled_from(FAULTS))
def test_chain_matches_ref_and_law(bs, steps, vocab, seed, sharp, sparse, cand_from, ta, fault):
    ndt = steps + 1
    ins = make_inputs(bs, ndt, vocab, seed, sharp, sparse, cand_from)
    with faults.active(*([fault] if fault else [])):
        predicts, accept_index, accept_num = run_both(ins, ta)
    if fault:  # the reference mirrors every fault bit for bit; the law is for the fixed rule
        return
    cand, uni, fin, target, draft = (t.cpu() for t in ins)
    for b in range(bs):
        p_rows, q_rows = target[b].numpy(), draft[b].numpy()
        n = law_walk(cand[b].tolist(), p_rows, q_rows, uni[b].tolist(), ta)
        assert int(accept_num[b]) == n
        assert accept_index[b].tolist() == [b * ndt + i if i <= n else -1 for i in range(ndt)]
        row = predicts[b * ndt: (b + 1) * ndt].tolist()
        assert row[:n] == cand[b, 1:n + 1].tolist()
        assert all(p_rows[i, row[i]] > 0 for i in range(n))  # an accepted draft has p > 0
        assert row[n + 1:] == [SENTINEL] * (ndt - 1 - n)
        if n < ndt - 1:  # rejection at node n: norm(max(0, p_n - q_n)), fp32 subtraction
            r = np.maximum(p_rows[n] - q_rows[n], np.float32(0)).astype(np.float64)
        else:
            r = p_rows[n].astype(np.float64)
        check_final_token(row[n], r, fin[b], vocab, p_rows[n])


def test_full_depth_samples_from_target_alone():
    # Both drafts certain under target and draft (p == q == one-hot 3: always accepted). The
    # last row's draft equals its target, so only "ignore the draft at full depth" gives 3.
    vocab, ndt = 10, 3
    target = torch.zeros(1, ndt, vocab)
    target[..., 3] = 1.0
    ins = [torch.tensor([[0, 3, 3]]), torch.full((1, ndt), BELOW_ONE), torch.tensor([0.5]),
           target, target.clone()]
    predicts, accept_index, accept_num = run_both([t.to(DEVICE) for t in ins])
    assert accept_num.tolist() == [2] and accept_index.tolist() == [[0, 1, 2]]
    assert predicts.tolist() == [3, 3, 3]


@pytest.mark.parametrize("fault", [False, True])
def test_edges_of_the_rule(fault):
    # Request 0: draft of p = 0 (q = 0.5), coin 0: strict rule rejects (0 < 0 is false);
    # the recovery row has a leading zero and coin 0 must not draw it. Request 1: q == 0 < p
    # with coin BELOW_ONE is accepted; request 2: p = 0.2, q = 0.5, coin 0.4 is exactly the
    # edge 0.4 * 0.5 == 0.2 (fp32): rejected. `coin_le_cdf_accepts_zero_prob` flips all three.
    vocab, ndt, bs = 4, 2, 3
    p = torch.tensor([0.0, 0.0, 0.2, 0.8])
    q = torch.tensor([0.0, 0.5, 0.5, 0.0])
    target, draft = p.expand(bs, ndt, vocab).contiguous(), q.expand(bs, ndt, vocab).contiguous()
    cand = torch.tensor([[0, 1], [0, 3], [0, 2]])
    uni = torch.tensor([[0.0, 0.0], [BELOW_ONE, 0.0], [0.4, 0.0]])
    assert np.float32(0.4) * np.float32(0.5) == np.float32(0.2)
    ins = [t.to(DEVICE) for t in (cand, uni, torch.zeros(bs), target, draft)]
    with faults.active(*(["coin_le_cdf_accepts_zero_prob"] if fault else [])):
        predicts, _, accept_num = run_both(ins)
    if fault:  # request 0: token 1 (p = 0) accepted, then the bonus draw takes token 0 (p = 0)
        assert accept_num.tolist() == [1, 1, 1]
        assert predicts.view(bs, ndt).tolist() == [[1, 0], [3, 0], [2, 0]]
    else:  # rejections draw from max(0, p - q) = token 3; acceptance, from p: token 2 first
        assert accept_num.tolist() == [0, 1, 0]
        assert predicts.view(bs, ndt).tolist() == [[3, SENTINEL], [3, 2], [3, SENTINEL]]


# Distribution law. p and q have zeros on both sides (p = 0 < q at tokens 1 and 5, q = 0 < p
# at token 2). Pearson chi-square over the tokens with p > 0 (df = 3), alpha = 1e-6: a
# correct sampler fails with probability ~1e-6 per seed (fixed seeds, so never in CI); every
# p == 0 token must have count 0 exactly. Negative control, threshold_acc = 0.3 (accept with
# min(1, p / (0.3 q))): the first token follows (0.267, 0, 0.208, 0.167, 0.358, 0), whose
# expected statistic at N = 5000 is ~1400, against the critical value 30.7.
P_ROW = [0.3, 0.0, 0.25, 0.05, 0.4, 0.0]
Q_ROW = [0.1, 0.3, 0.0, 0.35, 0.15, 0.1]
ALPHA = 1e-6


def first_tokens(p, q, n, steps, seed, ta):
    gen = torch.Generator().manual_seed(seed)
    vocab, ndt = p.numel(), steps + 1
    target, draft = p.expand(n, ndt, vocab).contiguous(), q.expand(n, ndt, vocab).contiguous()
    cand = torch.zeros(n, ndt, dtype=torch.int64)
    cand[:, 1:] = torch.multinomial(q, n * steps, replacement=True, generator=gen).view(n, steps)
    ins = [t.to(DEVICE) for t in (cand, torch.rand(n, ndt, generator=gen),
                                  torch.rand(n, generator=gen), target, draft)]
    # The interpreter runs ~40 programs a second: on CPU the reference (bit-equal to the
    # kernel by test_chain_matches_ref_and_law) draws; on a GPU the kernel itself.
    predicts, _, _ = run_both(ins, ta, fns=(kernel,) if DEVICE == "cuda" else (ref,))
    return predicts.view(n, ndt)[:, 0].long()


def chi2_first_token(first, p):
    counts = torch.bincount(first, minlength=p.numel()).double()
    support = p > 0
    assert (counts[~support] == 0).all(), f"tokens of probability 0 emitted: {counts.tolist()}"
    expected = p.double()[support] * first.numel()
    stat = float(((counts[support] - expected) ** 2 / expected).sum())
    return stat, chi2_critical(int(support.sum()) - 1, ALPHA)


@pytest.mark.parametrize("seed", [0, 1])
def test_first_token_distribution_is_target(seed):
    p, q = torch.tensor(P_ROW), torch.tensor(Q_ROW)
    stat, crit = chi2_first_token(first_tokens(p, q, 5000, 2, seed, 1.0), p)
    assert stat < crit, f"chi2 {stat:.1f} >= {crit:.1f} (alpha {ALPHA})"


def test_biased_rule_is_rejected():
    p, q = torch.tensor(P_ROW), torch.tensor(Q_ROW)
    stat, crit = chi2_first_token(first_tokens(p, q, 5000, 2, 0, 0.3), p)
    assert stat > crit, f"negative control passed: chi2 {stat:.1f} <= {crit:.1f}"
