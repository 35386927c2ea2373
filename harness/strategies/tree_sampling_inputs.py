"""What the tree-sampling laws draw (TREE_SAMPLING): draft trees as SGLang's
organize_draft_results makes them (kernel_inputs.draft_tree: topk 1-4, depth 1-5, ndt up to
12, parent-closed), the candidate token of every node, distinct among siblings (a draft's
top-k), and the target distribution p at every node.

Corners: exact zeros in p (drafts the target cannot produce), ties, children that carry all
of their parent's mass (one of them must then be accepted), children drawn from p's support
or from anywhere. Every distribution is dyadic (weights summing to a power of two), so p and
each partial sum of it are exact in float32: "the children carry all the mass" is exact for
the kernel too, whatever order it sums in. An explicit example (a law's EXAMPLES) carries
its rows under "rows" instead of drawing them."""
from __future__ import annotations

import random

import torch
from hypothesis import strategies as st

from harness.references import tree as T
from harness.strategies.kernel_inputs import KernelCase, draft_tree, tree_knobs


@st.composite
def tree_sampling_knobs(draw, accepts: dict, max_bs: int = 6, max_steps: int = 5) -> dict:
    t = draw(tree_knobs({**accepts, "orphan_nodes": False, "tree_mask_modes": (1,)}, max_bs))
    steps = min(t["spec_steps"], max_steps)
    cap = 1 + t["topk"] + (steps - 1) * t["topk"] ** 2
    return {"bs": t["bs"], "topk": t["topk"], "spec_steps": steps, "ndt": min(t["ndt"], cap),
            # Siblings are distinct tokens: at least topk of them.
            "vocab": draw(st.integers(max(2, t["topk"]), 8)),
            "zeros": draw(st.sampled_from([0.0, 0.3, 0.6])),
            "cover": draw(st.sampled_from([0.0, 0.3, 1.0])),
            "follow": draw(st.sampled_from([0.0, 0.7, 1.0]))}


def dyadic(rng: random.Random, support: list[int], vocab: int, zeros: float) -> list[float]:
    """A distribution over `support` (some entries zero, never all) whose weights sum to a
    power of two: every probability and partial sum is exact in float32."""
    w = [0] * vocab
    while sum(w) == 0:
        for t in support:
            w[t] = 0 if rng.random() < zeros else rng.choice([1, 1, 2, 3, 5, 8])
    total = 1 << (sum(w) - 1).bit_length()
    w[rng.choice([t for t in support if w[t]])] += total - sum(w)
    return [x / total for x in w]


def draw_row(rng: random.Random, k: dict) -> dict:
    """One request: {parents, cand, p} (p[t] the target distribution at node t)."""
    V = k["vocab"]
    pl, sel = draft_tree(rng, k["topk"], k["spec_steps"], k["ndt"], False)
    parents = T.build_tree(pl, sel, k["topk"], k["spec_steps"], k["ndt"])["parents"]
    cand, p = [rng.randrange(V)] + [0] * (k["ndt"] - 1), []
    for node in range(k["ndt"]):
        kids = [c for c in range(1, k["ndt"]) if parents[c] == node]
        covered = bool(kids) and rng.random() < k["cover"]
        tokens = rng.sample(range(V), len(kids))
        row = dyadic(rng, tokens if covered else list(range(V)), V, k["zeros"])
        if not covered and rng.random() < k["follow"]:
            # Children drawn from p's support first (likely acceptances), the rest anywhere.
            sup = [t for t in range(V) if row[t] > 0]
            rng.shuffle(sup)
            tokens = (sup + [t for t in range(V) if t not in sup])[:len(kids)]
            rng.shuffle(tokens)
        for c, tok in zip(kids, tokens):
            cand[c] = tok
        p.append(row)
    return {"parents": parents, "cand": cand, "p": p}


def tree_rows(case: KernelCase) -> list[dict]:
    k = case.knobs
    if "rows" in k:
        return k["rows"]
    rng = case.rng()
    return [draw_row(rng, k) for _ in range(k["bs"])]


def tree_batch(rows: list[dict]) -> dict:
    """The harness-side tensors of rows sharing one ndt and vocabulary."""
    ndt = len(rows[0]["parents"])
    lk = [T.child_links(r["parents"]) for r in rows]
    t64 = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    return {"candidates": t64([r["cand"] for r in rows]),
            "retrieve_index": t64([[b * ndt + t for t in range(ndt)] for b in range(len(rows))]),
            "next_token": t64([n for n, _ in lk]), "next_sibling": t64([s for _, s in lk]),
            "target_probs": torch.tensor([r["p"] for r in rows], dtype=torch.float32)}
