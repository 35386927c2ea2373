"""Greedy tree verification (SGLang's VerifyTreeGreedy), contract section 6.

Per request: walk from the root; at each depth take the first child, in sibling order,
whose token equals the target's greedy prediction at the last accepted node. Every write is
in place; accept_index entries past the accepted path are left as the caller filled them.
The sibling scan is bounded by ndt steps so that a malformed (cyclic) sibling list cannot
hang the GPU; on a valid tree (chains shorter than ndt) the bound never binds.
"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401  (must precede the triton import)
import triton
import triton.language as tl


@triton.jit
def _verify_tree_greedy_kernel(predicts, accept_index, accept_num, candidates, r_index,
                               r_next, r_sib, target_predict, ndt, num_spec):
    # One program per request; a sequential scalar walk (trees are tiny, work is latency).
    bx = tl.program_id(0).to(tl.int64)
    row = bx * ndt
    last = tl.load(r_index + row)
    tl.store(accept_index + bx * num_spec, last.to(tl.int32))
    n = tl.zeros([], dtype=tl.int32)
    cur = tl.zeros([], dtype=tl.int64)
    alive = cur == 0
    j = tl.full([], 1, dtype=tl.int32)
    # `while`, not `for j in range(1, num_spec)`: the Triton 3.6 interpreter rejects runtime
    # range bounds under numpy >= 2.4. Stopping once the walk dies is SGLang's `break`.
    while alive & (j < num_spec):
        cur = tl.load(r_next + row + cur, mask=alive, other=-1)
        target = tl.load(target_predict + last)
        searching = alive & (cur != -1)
        steps = tl.zeros([], dtype=tl.int32)
        while searching:  # Triton has no `break`: the loop condition carries it
            tok = tl.load(candidates + row + cur)
            hit = tok == target
            didx = tl.load(r_index + row + cur)
            tl.store(predicts + last, target.to(tl.int32), mask=hit)
            n += hit.to(tl.int32)
            tl.store(accept_index + bx * num_spec + n, didx.to(tl.int32), mask=hit)
            last = tl.where(hit, didx, last)
            cur = tl.where(hit, cur, tl.load(r_sib + row + cur, mask=~hit, other=-1))
            steps += 1
            searching = (~hit) & (cur != -1) & (steps < ndt)
        alive = alive & (cur != -1)
        j += 1
    tl.store(accept_num + bx, n)
    # The bonus: the target's own prediction after the last accepted node.
    tl.store(predicts + last, tl.load(target_predict + last).to(tl.int32))


def verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrieve_index,
                       retrieve_next_token, retrieve_next_sibling, target_predict):
    bs, ndt = candidates.shape
    if bs == 0:
        return
    for t in (predicts, accept_index, accept_token_num):
        assert t.is_contiguous(), "in-place outputs must be contiguous"
    _verify_tree_greedy_kernel[(bs,)](
        predicts, accept_index, accept_token_num, candidates.contiguous(),
        retrieve_index.contiguous(), retrieve_next_token.contiguous(),
        retrieve_next_sibling.contiguous(), target_predict.contiguous(), ndt, accept_index.shape[1])


def verify_tree_greedy_ref(predicts, accept_index, accept_token_num, candidates, retrieve_index,
                           retrieve_next_token, retrieve_next_sibling, target_predict):
    """Plain-Python transcription of SGLang's VerifyTreeGreedy (plus the same ndt bound)."""
    bs, ndt = candidates.shape
    num_spec = accept_index.shape[1]
    cand, ridx = candidates.tolist(), retrieve_index.tolist()
    nxt, sib = retrieve_next_token.tolist(), retrieve_next_sibling.tolist()
    tp = target_predict.reshape(-1).tolist()
    pred_w, acc_w, num_w = {}, {}, {}
    for bx in range(bs):
        last = ridx[bx][0]
        acc_w[(bx, 0)] = last
        n, cur = 0, 0
        for _j in range(1, num_spec):
            cur = nxt[bx][cur]
            steps = 0
            while cur != -1 and steps < ndt:
                steps += 1
                if cand[bx][cur] == tp[last]:
                    pred_w[last] = tp[last]
                    n += 1
                    acc_w[(bx, n)] = ridx[bx][cur]
                    last = ridx[bx][cur]
                    break
                cur = sib[bx][cur]
            if cur == -1:
                break
        num_w[bx] = n
        pred_w[last] = tp[last]
    for k, v in pred_w.items():
        predicts[k] = v
    for (bx, j), v in acc_w.items():
        accept_index[bx, j] = v
    for bx, v in num_w.items():
        accept_token_num[bx] = v
