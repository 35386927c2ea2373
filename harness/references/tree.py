"""Independent reference for the verify tree, greedy acceptance and compaction
(contract sections 5, 6 and 7).

Plain Python over ONE request at a time: ints, lists, dicts and loops, re-derived from
docs/contract.md. Nothing here imports or calls `specdec` or `kernels`. Node 0 is
the root (the pending bonus token); node i >= 1 is global candidate `top_scores_index[i-1]`.
Every index here is LOCAL to the request (0 .. ndt-1), never the kernels' flat b*ndt + t.
"""
from __future__ import annotations


def _as_list(x) -> list:
    """Accept a list or a tensor (torch only to convert)."""
    return x.tolist() if hasattr(x, "tolist") else list(x)


# -- tree (section 5 index space, section 6 build_tree_kernel_efficient) ----------------------
def build_tree(parent_list_row, top_scores_index_row, topk: int, spec_steps: int,
               ndt: int) -> dict:
    """The verify tree of one request.

    Laws:
    - parent of global candidate g: the root when `g // topk == 0`, else the candidate
      `parent_list[g // topk]` (a slot outside parent_list counts as "not selected");
    - `parents[0] = -1`; `parents[i]` = the node holding the parent candidate, 0 for the root,
      None when that candidate is not among the selected ones;
    - `depth[t]` = number of non-root nodes on the walk t -> root (a walk stops at a missing
      parent and takes at most spec_steps steps); the root has depth 0;
    - `mask[t][j]` is True iff j is t, an ancestor of t on that walk, or the root;
    - children of a node are linked in ascending node order: `next_token[p]` = its smallest
      child, `next_sibling[c]` = the next larger child of the same parent; -1 where none. A
      node with parent None has no incoming link.
    """
    sel = [int(g) for g in _as_list(top_scores_index_row)]
    plist = [int(g) for g in _as_list(parent_list_row)]
    if len(sel) != ndt - 1:
        raise ValueError(f"{len(sel)} selected candidates, expected ndt-1 = {ndt - 1}")
    node_of = {}
    for i, g in enumerate(sel):
        node_of.setdefault(g, i + 1)

    parents: list = [-1]
    for g in sel:
        slot = g // topk
        if slot == 0:
            parents.append(0)
        elif slot < len(plist) and plist[slot] in node_of:
            parents.append(node_of[plist[slot]])
        else:
            parents.append(None)

    depth, mask = [], []
    for t in range(ndt):
        row = [False] * ndt
        row[0] = True
        d, cur, steps = 0, t, 0
        while cur != 0 and steps < spec_steps:
            row[cur] = True
            d += 1
            steps += 1
            if parents[cur] is None:
                break
            cur = parents[cur]
        depth.append(d)
        mask.append(row)

    next_token, next_sibling = child_links(parents)
    return {"parents": parents, "depth": depth, "mask": mask,
            "next_token": next_token, "next_sibling": next_sibling}


def child_links(parents: list) -> tuple[list[int], list[int]]:
    """next_token / next_sibling of a parent list: each node's first child, each child's next
    sibling, children in ascending node order."""
    ndt = len(parents)
    next_token, next_sibling = [-1] * ndt, [-1] * ndt
    for p in range(ndt):
        kids = [c for c in range(1, ndt) if parents[c] == p]
        if kids:
            next_token[p] = kids[0]
            for a, b in zip(kids, kids[1:]):
                next_sibling[a] = b
    return next_token, next_sibling


def full_mask_flat(masks: list, seq_lens, ndt: int) -> list[bool]:
    """FULL_MASK over a batch: request b contributes ndt rows of seq_len_b + ndt columns each
    (prefix columns all True, then that row of its tree mask), requests concatenated; total
    `sum(seq_lens)*ndt + bs*ndt*ndt`."""
    out: list[bool] = []
    for mask, seq_len in zip(masks, _as_list(seq_lens)):
        for t in range(ndt):
            out.extend([True] * int(seq_len))
            out.extend(bool(v) for v in mask[t])
    return out


def qlen_mask_flat(masks: list) -> list[bool]:
    """QLEN_ONLY over a batch: `[bs, ndt, ndt]` flattened."""
    return [bool(v) for mask in masks for row in mask for v in row]


def packed_mask_rows(masks: list) -> list[int]:
    """QLEN_ONLY_BITPACKING over a batch, as non-negative ints: bit j of row t = column j."""
    return [sum(1 << j for j, v in enumerate(row) if v) for mask in masks for row in mask]


# -- greedy verify (section 6 verify_tree_greedy) --------------------------------------------
def verify_greedy(candidates_row, parents: list, target_predict_row,
                  num_steps: int) -> tuple[list[int], dict, int]:
    """Greedy acceptance for one request.

    Law: start with last = root. For up to num_steps depths, among the children of `last` (the
    nodes whose parent is `last`) in ascending node order take the first whose candidate token
    equals the target's prediction at `last`; accept it (record predicts[last] = that
    prediction) and continue from it; stop at the first depth with no match. Finally
    predicts[last] = target prediction at the last accepted node: that is the new bonus.
    Returns (accepted nodes root first, predicts {node: token}, bonus token).
    """
    cand = [int(t) for t in _as_list(candidates_row)]
    target = [int(t) for t in _as_list(target_predict_row)]
    ndt = len(cand)
    accepted, predicts, last = [0], {}, 0
    for _ in range(num_steps):
        want = target[last]
        hit = None
        for c in range(1, ndt):
            if parents[c] == last and cand[c] == want:
                hit = c
                break
        if hit is None:
            break
        predicts[last] = want
        accepted.append(hit)
        last = hit
    predicts[last] = target[last]
    return accepted, predicts, target[last]


# -- compaction (section 7) ------------------------------------------------------------------
def compact(values_rows, accept_nodes: list[int], width: int) -> list:
    """One request's compacted rows.

    Law: with n = len(accept_nodes) (the accepted path, root first) and w = min(width, ndt)
    (width = num_steps + 1, the accept_index width): entry j < n becomes values[accept_nodes[j]];
    entry n <= j < w becomes values[0] (the -1 padding clamps to node 0; never read); entries
    j >= w are untouched.
    """
    vals = _as_list(values_rows)
    out = list(vals)
    for j in range(min(width, len(vals))):
        node = accept_nodes[j] if j < len(accept_nodes) else 0
        out[j] = vals[node if node >= 0 else 0]
    return out


def accepted_kv_moves(seq_len: int, accept_nodes: list[int]) -> list[tuple[int, int]]:
    """(target_position, source_position) per accepted node j: the target KV of accepted node
    `accept_nodes[j]` (written by verify at seq_len + node) moves to seq_len + j."""
    return [(seq_len + j, seq_len + int(node)) for j, node in enumerate(accept_nodes)]
