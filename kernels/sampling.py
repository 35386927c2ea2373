"""Tree speculative sampling, target only (SGLang's TreeSpeculativeSamplingTargetOnly).

Walk: as SGLang, in fp32 (prob_acc accumulates fp32; the division is round-to-nearest so
GPU and reference agree bit for bit). Rows of target_probs/draft_probs are node local:
row (b, node). A candidate is accepted iff `coin < prob_acc / threshold_acc` (strict: coins
lie in [0, 1), so a candidate of target probability 0 is never taken, contract section
12) or `p >= threshold_single` with p > 0. A rejected sibling's draft prob is overwritten
with its target prob, so the final residual relu(p - q) excludes tokens already tried.
The fault `coin_le_cdf_accepts_zero_prob` (SGLang #35798) compares `<=` here and `>=` in
the final scan below, so coin 0 takes a leading token of probability 0.

Final sampling, the one place we deviate in arithmetic: the residual r = relu(p - q),
clamped to [0, 1] (NaN -> 0), is quantised to fixed point, R_i = trunc(r_i * 2^40) (int64),
and u = trunc(coin * float64(sum R)). The token is the first i with cumsum(R)_i > u. Integer
sums are exact in any order, so the Triton block reductions/scans and the reference give
the same token on every backend (fp32 cumsums differ in the last ulp between reduction
orders). Cost: a token with r < 2^-40 cannot be drawn, a distortion below vocab * 2^-40 in
total variation. Overflow needs vocab >= 2^23. If u >= sum R (coin >= 1.0, or an all-zero
residual) no index qualifies: we take the last index with R > 0, else the last index the
target row supports (an empty residual after fp32 rounding rejected the whole support),
else 0, so the token is always < vocab and never of probability 0 (the out-of-vocab bug of vLLM GHSA-8wr5-jm2h-8r4f; the fault
`recovered_token_out_of_vocab` skips this clamp and returns the scan's `vocab`).

Names, here and in kernels/chain_sampling.py: p is the target's probability, q the draft's.

Sibling scans are bounded by ndt steps (a malformed cyclic list cannot hang the GPU).
`deterministic` is accepted for signature compatibility: this kernel is always deterministic.
"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401  (must precede the triton import)
import faultpoints as faults
import torch
import triton
import triton.language as tl

FIXED_SCALE = 2.0 ** 40
BLOCK_V = 1024


@triton.jit
def _residual_fixed(target_probs, draft_probs, base, idx, vocab, q_len):
    """relu(p - q) (target - draft) of one row in 2^-40 fixed point; draft entries at or past
    q_len read as 0 (q_len = vocab, or 0 to sample from the target row alone). Both masks are
    block comparisons: a scalar boolean folded into a block mask (`inb & use_p`) is int data
    under the Triton 3.9 interpreter, whose loads reject it ('mask has unsupported dtype')."""
    p = tl.load(target_probs + base + idx, mask=idx < vocab, other=0.0)
    q = tl.load(draft_probs + base + idx, mask=idx < q_len, other=0.0)
    r = p - q
    r = tl.where(r > 0, r, 0.0)  # relu; NaN -> 0
    r = tl.where(r < 1.0, r, 1.0)
    return (r * 1099511627776.0).to(tl.int64)  # * 2^40, exact; truncation toward zero


@triton.jit
def _final_draw(target_probs, draft_probs, base, q_len, coin_f, vocab, BLOCK: tl.constexpr,
                OOV_FAULT: tl.constexpr, LE_FAULT: tl.constexpr):
    """The fixed-point two-pass draw (module docstring) from relu(target - draft) of the row
    at `base` (draft entries at or past q_len read as 0): the first index whose cumsum
    exceeds u = trunc(coin_f * total), clamped into the vocabulary. Returns it as int64."""
    total = tl.zeros([], dtype=tl.int64)
    last_nz = tl.full([], -1, dtype=tl.int64)
    last_p = tl.full([], -1, dtype=tl.int64)
    start = tl.zeros([], dtype=tl.int64)
    while start < vocab:  # pass 1: total mass, the last index with mass, with target mass
        idx = start + tl.arange(0, BLOCK).to(tl.int64)
        rf = _residual_fixed(target_probs, draft_probs, base, idx, vocab, q_len)
        total += tl.sum(rf, axis=0)
        last_nz = tl.maximum(last_nz, tl.max(tl.where(rf > 0, idx, -1), axis=0))
        p = tl.load(target_probs + base + idx, mask=idx < vocab, other=0.0)
        last_p = tl.maximum(last_p, tl.max(tl.where(p > 0, idx, -1), axis=0))
        start += BLOCK
    u = (coin_f.to(tl.float64) * total.to(tl.float64)).to(tl.int64)
    sampled = tl.zeros([], dtype=tl.int64) + vocab
    running = tl.zeros([], dtype=tl.int64)
    start = tl.zeros([], dtype=tl.int64)
    while (start < vocab) & (sampled == vocab):  # pass 2: first index with cumsum > u
        idx = start + tl.arange(0, BLOCK).to(tl.int64)
        rf = _residual_fixed(target_probs, draft_probs, base, idx, vocab, q_len)
        cum = running + tl.cumsum(rf, axis=0)
        hit = (cum >= u) if LE_FAULT else (cum > u)  # coin_le_cdf_accepts_zero_prob
        sampled = tl.minimum(sampled, tl.min(tl.where((idx < vocab) & hit, idx, vocab), axis=0))
        running += tl.sum(rf, axis=0)
        start += BLOCK
    if not OOV_FAULT:  # the fault: no clamp, an all-zero / NaN residual yields `vocab`
        # An empty residual (every supported sibling rejected: fp32 rounding at a coin just
        # below 1) falls back to a token the target supports, never to one of probability 0.
        fallback = tl.where(last_nz >= 0, last_nz, tl.where(last_p >= 0, last_p, 0))
        sampled = tl.where(sampled < vocab, sampled, fallback)
    return sampled


# The draft's shape is a runtime value: each specialization class of it was a kernel compiled
# anew (docs/kernels.md, compiled variants).
@triton.jit(do_not_specialize=("ndt", "num_spec"))
def _tree_sampling_kernel(predicts, accept_index, accept_num, candidates, r_index, r_next,
                          r_sib, uniform, uniform_final, target_probs, draft_probs,
                          threshold_single, threshold_acc, ndt, num_spec, vocab,
                          BLOCK: tl.constexpr, OOV_FAULT: tl.constexpr, LE_FAULT: tl.constexpr):
    bx = tl.program_id(0).to(tl.int64)
    row = bx * ndt
    coin = tl.load(uniform + row)
    last = tl.load(r_index + row)
    tl.store(accept_index + bx * num_spec, last.to(tl.int32))
    n = tl.zeros([], dtype=tl.int32)
    cur = tl.zeros([], dtype=tl.int64)
    cur_node = tl.zeros([], dtype=tl.int64)
    prob_acc = tl.zeros([], dtype=tl.float32)
    alive = cur == 0
    j = tl.full([], 1, dtype=tl.int32)
    # `while` loops throughout: the Triton 3.6 interpreter rejects runtime `range` bounds
    # under numpy >= 2.4; they compile to the same scf loops.
    while alive & (j < num_spec):
        cur = tl.load(r_next + row + cur, mask=alive, other=-1)
        searching = alive & (cur != -1)
        steps = tl.zeros([], dtype=tl.int32)
        while searching:  # Triton has no `break`: the loop condition carries it
            tok = tl.load(candidates + row + cur)
            off = (row + cur_node) * vocab + tok
            p = tl.load(target_probs + off)
            prob_acc += p
            ratio = tl.math.div_rn(prob_acc, threshold_acc)
            hit = (coin <= ratio) if LE_FAULT else (coin < ratio)  # coin_le_cdf_accepts_zero_prob
            acc = hit | ((p > 0) & (p >= threshold_single))
            tl.store(draft_probs + off, p, mask=~acc)
            didx = tl.load(r_index + row + cur)
            tl.store(predicts + last, tok.to(tl.int32), mask=acc)
            n += acc.to(tl.int32)
            tl.store(accept_index + bx * num_spec + n, didx.to(tl.int32), mask=acc)
            last = tl.where(acc, didx, last)
            prob_acc = tl.where(acc, 0.0, prob_acc)
            cur_node = tl.where(acc, cur, cur_node)
            coin = tl.where(acc, tl.load(uniform + row + cur, mask=acc, other=0.0), coin)
            cur = tl.where(acc, cur, tl.load(r_sib + row + cur, mask=~acc, other=-1))
            steps += 1
            searching = (~acc) & (cur != -1) & (steps < ndt)
        alive = alive & (cur != -1)
        j += 1
    tl.store(accept_num + bx, n)
    # The final pass re-reads draft_probs rows this program just wrote (scalar stores by
    # one thread, vector loads by all): make those writes visible block-wide.
    tl.debug_barrier()

    # Full depth accepted: sample from the target row alone (no draft entry is read).
    q_len = tl.where(n != num_spec - 1, vocab, 0)
    coin_f = tl.load(uniform_final + bx)
    sampled = _final_draw(target_probs, draft_probs, (row + cur_node) * vocab, q_len, coin_f,
                          vocab, BLOCK, OOV_FAULT, LE_FAULT)
    tl.store(predicts + last, sampled.to(tl.int32))


def tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates,
                                          retrieve_index, retrieve_next_token,
                                          retrieve_next_sibling, uniform_samples,
                                          uniform_samples_for_final_sampling, target_probs,
                                          draft_probs, threshold_single=1.0, threshold_acc=1.0,
                                          deterministic=True):
    bs, ndt = candidates.shape
    vocab = target_probs.shape[-1]
    if bs == 0:
        return
    for t in (predicts, accept_index, accept_token_num, draft_probs):
        assert t.is_contiguous(), "in-place outputs must be contiguous"
    assert vocab * FIXED_SCALE < 2.0 ** 63, "vocab too large for the fixed-point sampler"
    _tree_sampling_kernel[(bs,)](
        predicts, accept_index, accept_token_num, candidates.contiguous(),
        retrieve_index.contiguous(), retrieve_next_token.contiguous(),
        retrieve_next_sibling.contiguous(), uniform_samples.contiguous(),
        uniform_samples_for_final_sampling.contiguous(), target_probs.contiguous(), draft_probs,
        float(threshold_single), float(threshold_acc), ndt, accept_index.shape[1], vocab,
        BLOCK=min(BLOCK_V, triton.next_power_of_2(vocab)), OOV_FAULT=_oov_fault(),
        LE_FAULT=_le_fault())


def _oov_fault() -> bool:
    return faults.on("recovered_token_out_of_vocab")


def _le_fault() -> bool:
    return faults.on("coin_le_cdf_accepts_zero_prob")


def _fixed_residual_ref(p, q):
    r = p - q
    r = torch.where(r > 0, r, torch.zeros_like(r))
    r = torch.where(r < 1.0, r, torch.ones_like(r))
    return (r * FIXED_SCALE).to(torch.int64)


def _final_draw_ref(p, q, coin) -> int:
    """`_final_draw` in torch: p the target row, q the draft row (zeros: the target alone),
    coin the final coin (a 0-d tensor or float)."""
    rf = _fixed_residual_ref(p, q)
    total = int(rf.sum())
    u = int(float(coin) * float(total))
    cum = torch.cumsum(rf, 0)
    hits = torch.nonzero(cum >= u if _le_fault() else cum > u)  # coin_le_cdf_accepts_zero_prob
    if hits.numel():
        return int(hits[0, 0])
    if _oov_fault():  # the fault: the unclamped scan result
        return rf.shape[0]
    # coin >= 1 or an empty residual: never past the vocabulary, never a token without mass
    nz = torch.nonzero(rf > 0)
    if nz.numel():
        return int(nz[-1, 0])
    np_ = torch.nonzero(p.float() > 0)
    return int(np_[-1, 0]) if np_.numel() else 0


def tree_speculative_sampling_target_only_ref(predicts, accept_index, accept_token_num,
                                              candidates, retrieve_index, retrieve_next_token,
                                              retrieve_next_sibling, uniform_samples,
                                              uniform_samples_for_final_sampling, target_probs,
                                              draft_probs, threshold_single=1.0,
                                              threshold_acc=1.0, deterministic=True):
    """Transcription of SGLang's loop; fp32 scalars via 0-d float32 tensors."""
    bs, ndt = candidates.shape
    num_spec = accept_index.shape[1]
    cand, ridx = candidates.tolist(), retrieve_index.tolist()
    nxt, sib = retrieve_next_token.tolist(), retrieve_next_sibling.tolist()
    f32 = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    t_single, t_acc = f32(threshold_single), f32(threshold_acc)
    tp = target_probs.float()
    le_fault = _le_fault()
    for bx in range(bs):
        prob_acc, cur_node = f32(0.0), 0
        coin = uniform_samples[bx, 0].float().cpu()
        last = ridx[bx][0]
        accept_index[bx, 0] = last
        n, cur = 0, 0
        for _j in range(1, num_spec):
            cur = nxt[bx][cur]
            steps = 0
            while cur != -1 and steps < ndt:
                steps += 1
                tok = cand[bx][cur]
                p = tp[bx, cur_node, tok].cpu()
                prob_acc = prob_acc + p
                ratio = prob_acc / t_acc
                hit = coin <= ratio if le_fault else coin < ratio  # coin_le_cdf_accepts_zero_prob
                if bool(hit) or (bool(p > 0) and bool(p >= t_single)):
                    prob_acc, cur_node = f32(0.0), cur
                    coin = uniform_samples[bx, cur].float().cpu()
                    predicts[last] = tok
                    n += 1
                    accept_index[bx, n] = ridx[bx][cur]
                    last = ridx[bx][cur]
                    break
                draft_probs[bx, cur_node, tok] = target_probs[bx, cur_node, tok]
                cur = sib[bx][cur]
            if cur == -1:
                break
        accept_token_num[bx] = n
        p = tp[bx, cur_node]
        q = draft_probs[bx, cur_node].float() if n != num_spec - 1 else torch.zeros_like(p)
        predicts[last] = _final_draw_ref(p, q, uniform_samples_for_final_sampling[bx].float())
