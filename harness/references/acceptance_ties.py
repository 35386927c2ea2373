"""Is a round's accept length decided at a near-tie? An independent re-derivation, from the
round's recorded logits (specdec/trace.py), of every choice that sets it: the draft's top-k
per row, the tree's top-k of cumulative scores per step and its top-(ndt-1) nodes
(contract section 5), and the target's greedy argmax along the accepted path (section 6).

Two correct paths (eager and graph, other batch shapes) may compute logits a few ulps apart;
where one of those choices is closer than the tie epsilon, they may pick differently and
accept different lengths, and that is benign (oracle 6, docs/contract.md). Everything is in log
space: a logit gap d between two tokens is a log-probability gap d, and cumulative scores
(products of probabilities) are sums of log-probabilities: a score of depth k carries k
rows' rounding, so its gaps are divided by k, and one epsilon (TIE_EPS, logit units) serves
every choice."""
from __future__ import annotations

from dataclasses import dataclass

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


def _inclusion(values: torch.Tensor, i: int, keep: int) -> tuple[bool, float]:
    """Whether values[i] is among the top `keep` (torch.topk's choice, as the engine's) and
    how far it is from the other side of that cut: above the largest value left out when
    it is kept, below the smallest value kept when it is not."""
    if keep >= values.numel():
        return True, float("inf")
    chosen = set(torch.topk(values, keep).indices.tolist())
    ranked = torch.sort(values, descending=True).values
    if i in chosen:
        return True, float(values[i] - ranked[keep])
    return False, float(ranked[keep - 1] - values[i])


@dataclass
class _DraftTree:
    """One request's draft tree, re-derived from the round's recorded rows."""
    nodes: list[tuple[tuple[int, ...], float]]  # (path, cumulative log-score), engine order
    rows: dict          # path -> the log-softmax row that expands it
    carry_cut: dict     # path -> (carried?, margin) at its depth (>= 2)

    def __post_init__(self) -> None:
        self.every = torch.tensor([s for _, s in self.nodes], dtype=torch.float64)
        self.index = {path: j for j, (path, _) in enumerate(self.nodes)}
        self.score_of = dict(self.nodes)


def _rederive_tree(step0_logits: torch.Tensor, decode_rows: list[torch.Tensor],
                   decode_inputs: list[torch.Tensor], topk: int) -> _DraftTree | None:
    """The draft tree the engine built from these rows, or None when the branches it
    recorded expanding (decode_inputs) are not the ones re-derived here."""
    lp0 = torch.log_softmax(step0_logits.double(), -1)
    top0 = torch.topk(lp0, topk)
    carried = [((int(t),), float(v)) for v, t in zip(top0.values, top0.indices)]
    nodes = list(carried)
    rows = {(): lp0}
    carry_cut = {}
    for i, logits in enumerate(decode_rows):
        if [p[-1] for p, _ in carried] != [int(t) for t in decode_inputs[i].tolist()]:
            return None
        lp = torch.log_softmax(logits.double(), -1)
        children = []
        for c, (path, score) in enumerate(carried):
            rows[path] = lp[c]
            tv = torch.topk(lp[c], topk)
            children += [(path + (int(t),), score + float(v))
                         for v, t in zip(tv.values, tv.indices)]
        scores = torch.tensor([s for _, s in children], dtype=torch.float64)
        for j, (path, _) in enumerate(children):
            carry_cut[path] = _inclusion(scores, j, topk)
        nodes += children
        carried = [children[j] for j in torch.topk(scores, topk).indices.tolist()]
    return _DraftTree(nodes, rows, carry_cut)


def _node_cuts(tree: _DraftTree, *, committed: list[int], j: int, topk: int, ndt: int,
               steps: int) -> tuple[torch.Tensor | None, list[tuple[bool, float]]]:
    """The cuts (passed?, margin), in order, that put the node committed[:j] in the tree,
    and the row that expands its parent (None: the parent was never expanded)."""
    path, parent = tuple(committed[:j]), tuple(committed[:j - 1])
    cuts = []
    if j >= 3:  # a depth-1 parent is carried by its own row cut, checked at j - 1
        kept, m = tree.carry_cut.get(parent, (False, 0.0))
        cuts.append((kept, m / (j - 1)))
    row = tree.rows.get(parent) if all(kept for kept, _ in cuts) else None
    if row is not None:
        cuts.append(_inclusion(row, committed[j - 1], topk))
        if path in tree.index:
            kept, m = _inclusion(tree.every, tree.index[path], ndt - 1)
        else:  # not in its row's top-k: where its score would have ranked
            score = tree.score_of.get(parent, 0.0) + float(row[committed[j - 1]])
            kept, m = _inclusion(torch.cat([tree.every, tree.every.new_tensor([score])]),
                                 len(tree.nodes), ndt - 1)
        cuts.append((kept, m / steps))  # scores of any depth up to steps meet here
    return row, cuts


def accept_decision_gap(step0_logits: torch.Tensor, *, decode_rows: list[torch.Tensor],
                        decode_inputs: list[torch.Tensor], topk: int, ndt: int,
                        committed: list[int]) -> float | None:
    """The smallest gap at a cut that decides this round's accept length, or None when the
    recorded branches disagree with the re-derivation (the caller then takes
    draft_choice_gap, which looks at every cut).

    The accept length depends on the draft tree only through the target's greedy
    continuation g_1, g_2, ... (the round's committed tokens: its accepted drafts, then the
    bonus): it is 1 + the number of leading g_j whose path g_1..g_j is a node of the tree.
    So only the cuts that put those nodes in (or kept the first missing one out) matter:
    for a node, its token's place in its parent's per-row top-k, its parent's place among
    the branches carried to the next depth, and its cumulative score's place among the
    tree's top ndt-1. A kept node's gap is its margin above each cut; the first missing
    node's is the largest margin of the cuts it failed (another path must flip all of
    them; a cut past one whose branch was never expanded cannot be re-derived and counts
    as a tie). A near-tie elsewhere, between candidates off that path, moves no accept
    length and excuses nothing. Score gaps are divided by depth, as in draft_choice_gap.
    step0_logits: [V]; decode_rows[i]: [topk, V], draft forward i's rows of this request;
    decode_inputs[i]: [topk], that forward's input tokens (the branches it expanded)."""
    tree = _rederive_tree(step0_logits, decode_rows, decode_inputs, topk)
    if tree is None:
        return None
    steps, accepted = len(decode_rows) + 1, len(committed) - 1
    gaps = []
    for j in range(1, min(accepted + 1, steps) + 1):
        row, cuts = _node_cuts(tree, committed=committed, j=j, topk=topk, ndt=ndt, steps=steps)
        in_tree = row is not None and all(kept for kept, _ in cuts)
        if in_tree != (j <= accepted):
            return None  # the re-derived tree is not the one the engine verified
        if in_tree:
            gaps += [m for _, m in cuts]
            continue
        # The first missing node: another path must flip every cut it failed.
        failed = [m for kept, m in cuts if not kept]
        gaps.append(max(failed) if row is not None else failed[0])
    return min(gaps, default=float("inf"))
