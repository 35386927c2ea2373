"""Chain speculative sampling: the rule of Leviathan et al. / Chen et al., as vLLM's
rejection sampler implements it, for chain drafts (topk == 1) sampled from the draft's q.

Node 0 of `candidates` is the root (the pending bonus token), node j+1 the child of node j.
For j = 0 .. ndt-2, with d = candidates[b, j+1], p = target_probs[b, j, d] and
q = draft_probs[b, j, d]: accept iff `coin_j * q * threshold_acc < p` (fp32, multiplied in
that order), i.e. with probability min(1, p / q); p == 0 is never accepted (coins lie in
[0, 1), contract section 12), q == 0 < p always is. The walk stops at the first
rejection; n = accepted drafts. The final token is drawn from norm(max(0, p_n - q_n)) (the
rows of node n) after a rejection, from the target row ndt-1 alone when all were accepted,
with the fixed-point two-pass draw of kernels/sampling.py (`_final_draw`: same
quantisation, same clamp into the vocabulary, same faults).

Outputs, as verify_tree_greedy: accept_token_num[b] = n; accept_index[b, i] = b*ndt + i for
i <= n, else -1 (the whole row is written); predicts[b*ndt + i] = candidates[b, i+1] for
i < n and predicts[b*ndt + n] = the final token (the token written at an accepted node is
the next one); entries past n are left untouched.

Faults: `coin_le_cdf_accepts_zero_prob` (acceptance `<=`, final scan `>=`) and
`recovered_token_out_of_vocab` (no clamp), read at launch as in the tree kernel.
threshold_acc exists only for negative-control tests (a biased rule must be caught).
"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401  (must precede the triton import)
import torch
import triton
import triton.language as tl

from kernels.sampling import (BLOCK_V, FIXED_SCALE, _final_draw, _final_draw_ref, _le_fault,
                              _oov_fault)


# The draft's shape is a runtime value: each specialization class of it was a kernel compiled
# anew (docs/kernels.md, compiled variants).
@triton.jit(do_not_specialize=("ndt",))
def _chain_sampling_kernel(predicts, accept_index, accept_num, candidates, uniform,
                           uniform_final, target_probs, draft_probs, threshold_acc, ndt, vocab,
                           BLOCK: tl.constexpr, BLOCK_N: tl.constexpr,
                           OOV_FAULT: tl.constexpr, LE_FAULT: tl.constexpr):
    bx = tl.program_id(0).to(tl.int64)
    row = bx * ndt
    n = tl.zeros([], dtype=tl.int64)
    alive = n == 0
    # A `while` loop, as in kernels/sampling.py; the condition carries the stop.
    while alive & (n < ndt - 1):
        d = tl.load(candidates + row + n + 1)
        off = (row + n) * vocab + d
        p = tl.load(target_probs + off)
        q = tl.load(draft_probs + off)
        scaled = tl.load(uniform + row + n) * q * threshold_acc
        alive = (scaled <= p) if LE_FAULT else (scaled < p)  # coin_le_cdf_accepts_zero_prob
        n += alive.to(tl.int64)
    tl.store(accept_num + bx, n.to(tl.int32))
    # Outputs as blocks (block comparisons only, no scalar masks): the -1 padded path and
    # the accepted tokens, each written at the node before it.
    cols = tl.arange(0, BLOCK_N).to(tl.int64)
    tl.store(accept_index + row + cols, tl.where(cols <= n, row + cols, -1).to(tl.int32),
             mask=cols < ndt)
    toks = tl.load(candidates + row + 1 + cols, mask=cols < n, other=0)
    tl.store(predicts + row + cols, toks.to(tl.int32), mask=cols < n)

    # After a rejection at node n: max(0, p_n - q_n); all accepted: the target row alone.
    q_len = tl.where(n < ndt - 1, vocab, 0)
    coin_f = tl.load(uniform_final + bx)
    sampled = _final_draw(target_probs, draft_probs, (row + n) * vocab, q_len, coin_f, vocab,
                          BLOCK, OOV_FAULT, LE_FAULT)
    tl.store(predicts + row + n, sampled.to(tl.int32))


def chain_speculative_sampling(predicts, accept_index, accept_token_num, candidates,
                               uniform_samples, uniform_samples_for_final_sampling, target_probs,
                               draft_probs, threshold_acc=1.0):
    """In place; see the module docstring. predicts int32 [bs*ndt], accept_index int32
    [bs, ndt], accept_token_num int32 [bs], candidates int64 [bs, ndt], uniform_samples fp32
    [bs, ndt], uniform_samples_for_final_sampling fp32 [bs], target_probs / draft_probs fp32
    [bs, ndt, V]."""
    bs, ndt = candidates.shape
    vocab = target_probs.shape[-1]
    if bs == 0:
        return
    assert accept_index.shape == (bs, ndt), "accept_index is [bs, num_steps + 1]"
    for t in (predicts, accept_index, accept_token_num):
        assert t.is_contiguous(), "in-place outputs must be contiguous"
    assert vocab * FIXED_SCALE < 2.0 ** 63, "vocab too large for the fixed-point sampler"
    _chain_sampling_kernel[(bs,)](
        predicts, accept_index, accept_token_num, candidates.contiguous(),
        uniform_samples.contiguous(), uniform_samples_for_final_sampling.contiguous(),
        target_probs.contiguous(), draft_probs.contiguous(), float(threshold_acc), ndt, vocab,
        BLOCK=min(BLOCK_V, triton.next_power_of_2(vocab)), BLOCK_N=triton.next_power_of_2(ndt),
        OOV_FAULT=_oov_fault(), LE_FAULT=_le_fault())


def chain_speculative_sampling_ref(predicts, accept_index, accept_token_num, candidates,
                                   uniform_samples, uniform_samples_for_final_sampling,
                                   target_probs, draft_probs, threshold_acc=1.0):
    """The same law in torch: fp32 scalars via 0-d float32 tensors, `_final_draw_ref`."""
    bs, ndt = candidates.shape
    if bs == 0:
        return
    cand = candidates.long()
    tp, dp = target_probs.float(), draft_probs.float()
    # The probabilities of each request's drafts under the row that proposed them: [bs, ndt-1].
    p_d = tp[:, :-1].gather(2, cand[:, 1:, None])[..., 0].cpu()
    q_d = dp[:, :-1].gather(2, cand[:, 1:, None])[..., 0].cpu()
    coins = uniform_samples.float().cpu()
    t_acc = torch.tensor(threshold_acc, dtype=torch.float32)
    le_fault = _le_fault()
    tokens = cand.cpu().tolist()
    for b in range(bs):
        n = 0
        while n < ndt - 1:
            p, scaled = p_d[b, n], coins[b, n] * q_d[b, n] * t_acc
            ok = scaled <= p if le_fault else scaled < p  # coin_le_cdf_accepts_zero_prob
            if not bool(ok):
                break
            n += 1
        accept_token_num[b] = n
        accept_index[b] = torch.tensor([b * ndt + i if i <= n else -1 for i in range(ndt)],
                                       dtype=accept_index.dtype)
        for i in range(n):
            predicts[b * ndt + i] = tokens[b][i + 1]
        p = tp[b, n]
        q = dp[b, n] if n < ndt - 1 else torch.zeros_like(p)
        predicts[b * ndt + n] = _final_draw_ref(p, q, uniform_samples_for_final_sampling[b].float())
