"""Law kernel_greedy_verify, over any kernel adapter with GREEDY_TREE_VERIFY: greedy tree
acceptance walks the tree from the root, at each depth taking the first child (ascending
node order) whose token is the target's prediction at the current node, and stops at the
first depth with none or at num_steps accepted (docs/contract.md section 6,
harness/references/tree.py `verify_greedy`). The kernel's outputs then hold:

- accept_len[b] = the accepted drafts; accept_index[b] = the flat ids b*ndt + node of the
  root and each accepted node, then -1 to width num_steps + 1;
- predicts at each accepted node but the last = the next accepted token, and at the last
  = the target's prediction there (the new bonus).

Drawn: trees as a draft makes them (kernel_inputs), a small vocabulary so that matches are
common, target predictions that follow a drawn path with high probability, duplicate tokens
among siblings (the first in node order wins); each example in one of the tree input
classes (kernel_inputs.TREE_CLASSES)."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.references import tree as T
from harness.strategies.kernel_inputs import (KernelCase, kernel_cases, tree_class_knobs,
                                              tree_inputs)

NAME = "kernel_greedy_verify"
NEEDS = frozenset({Component.GREEDY_TREE_VERIFY})


def cases(kernels):
    knobs = st.builds(lambda t, vocab, follow: {**t, "vocab": vocab, "follow": follow},
                      tree_class_knobs({**kernels.accepts, "orphan_nodes": False,
                                  "tree_mask_modes": (1,)}),
                      st.integers(2, 6), st.sampled_from([0.0, 0.5, 0.9, 1.0]))
    return kernel_cases(NAME, kernels, knobs)


def verify_inputs(case: KernelCase):
    """Per request: the reference tree's parents and links, candidates, target predictions."""
    k = case.knobs
    rng = case.rng()
    rows = []
    for pl, sel in zip(*tree_inputs(case)[:2]):
        tree = T.build_tree(pl, sel, k["topk"], k["spec_steps"], k["ndt"])
        cand = [rng.randrange(k["vocab"]) for _ in range(k["ndt"])]
        target = [rng.randrange(k["vocab"]) for _ in range(k["ndt"])]
        for node in range(k["ndt"]):  # follow a child's token with probability `follow`
            kids = [c for c in range(1, k["ndt"]) if tree["parents"][c] == node]
            if kids and rng.random() < k["follow"]:
                target[node] = cand[rng.choice(kids)]
        rows.append((tree, cand, target))
    return rows


def check(kernels, case: KernelCase) -> dict:
    k = case.knobs
    ndt, bs, steps = k["ndt"], k["bs"], k["spec_steps"]
    rows = verify_inputs(case)
    t64 = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    got = kernels.greedy_tree_verify(
        t64([c for _, c, _ in rows]),
        retrieve_index=t64([[b * ndt + t for t in range(ndt)] for b in range(bs)]),
        next_token=t64([tr["next_token"] for tr, _, _ in rows]),
        next_sibling=t64([tr["next_sibling"] for tr, _, _ in rows]),
        target_predict=t64([tg for _, _, tg in rows]), num_steps=steps)
    pred = torch.as_tensor(got["predicts"]).reshape(-1).tolist()
    acc = torch.as_tensor(got["accept_index"]).tolist()
    num = torch.as_tensor(got["accept_len"]).reshape(-1).tolist()
    accepted = 0
    for b, (tree, cand, target) in enumerate(rows):
        nodes, predicts, _ = T.verify_greedy(cand, tree["parents"], target, steps)
        want_idx = [b * ndt + n for n in nodes] + [-1] * (steps + 1 - len(nodes))
        where = (f"request {b}: parents {tree['parents']}, candidates {cand}, "
                 f"target {target}, num_steps {steps}")
        if num[b] != len(nodes) - 1:
            raise OracleFailure(NAME, "accept_len", f"accept_len {num[b]}, reference "
                                f"{len(nodes) - 1} (path {nodes}); {where}")
        if acc[b] != want_idx:
            raise OracleFailure(NAME, "accept_index", f"accept_index {acc[b]}, reference "
                                f"{want_idx}; {where}")
        for node, token in predicts.items():
            if pred[b * ndt + node] != token:
                raise OracleFailure(NAME, "predicts", f"predicts at node {node} = "
                                    f"{pred[b * ndt + node]}, reference {token} (path "
                                    f"{nodes}); {where}")
        accepted += len(nodes) - 1
    return {"accepted": accepted}


LAW = Law(
    name=NAME, rank=610, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="greedy tree verify accepts the reference's path (first matching child in node "
            "order, depth-bounded) and writes its accept index, length and predictions",
    controls=("tests/test_kernel_law_controls.py::test_verify_one_depth_short_is_rejected",))
