"""Is a round's accept length decided at a near-tie? An independent re-derivation, from the
round's recorded logits (specdec/trace.py), of every choice that sets it: the draft's top-k
per row, the tree's top-k of cumulative scores per step and its top-(ndt-1) nodes
(conventions section 5), and the target's greedy argmax along the accepted path (section 6).

Two correct paths (eager and graph, other batch shapes) may compute logits a few ulps apart;
where one of those choices is closer than the tie epsilon, they may pick differently and
accept different lengths, and that is benign (harness.md oracle 6). Everything is in log
space: a logit gap d between two tokens is a log-probability gap d, and cumulative scores
(products of probabilities) are sums of log-probabilities: a score of depth k carries k
rows' rounding, so its gaps are divided by k, and one epsilon (TIE_EPS, logit units) serves
every choice."""
from __future__ import annotations

import torch


def _boundary_gap(values: torch.Tensor, keep: int) -> float:
    """Gap between the keep-th and (keep+1)-th largest of `values` (inf if nothing is cut)."""
    if keep <= 0 or values.numel() <= keep:
        return float("inf")
    top = torch.topk(values.flatten(), keep + 1).values
    return float(top[keep - 1] - top[keep])


def draft_choice_gap(step0_logits: torch.Tensor, decode_rows: list[torch.Tensor], topk: int,
                     ndt: int) -> float:
    """The smallest gap at any cut the draft tree of one request makes in one round.
    step0_logits: [V], the draft-extend row that gave step-0 candidates; decode_rows[i]:
    [topk, V], draft forward i's rows of this request (branch order)."""
    lp0 = torch.log_softmax(step0_logits.double(), -1)
    gaps = [_boundary_gap(lp0, topk)]
    scores = torch.topk(lp0, topk).values                      # [topk] cumulative log-scores
    every = [scores]
    for depth, rows in enumerate(decode_rows, start=2):
        lp = torch.log_softmax(rows.double(), -1)              # [topk, V]
        gaps += [_boundary_gap(r, topk) for r in lp]
        expand = scores[:, None] + torch.topk(lp, topk, -1).values  # [topk, topk], depth
        gaps.append(_boundary_gap(expand, topk) / depth)
        every.append(expand.flatten())
        scores = torch.topk(expand.flatten(), topk).values
    # organize: the top ndt-1 nodes of every depth
    gaps.append(_boundary_gap(torch.cat(every), ndt - 1) / (len(decode_rows) + 1))
    return min(gaps)


def target_path_gap(verify_logits: torch.Tensor, path_nodes: list[int]) -> float:
    """The smallest top-2 gap of the target's verify logits at the nodes of the accepted path
    (each node's argmax picks the next accepted child, or the bonus at the last one).
    verify_logits: [bs*ndt, V]; path_nodes: flat indices b*ndt + node (accept_index)."""
    return min(_boundary_gap(verify_logits[n].double(), 1) for n in path_nodes)
