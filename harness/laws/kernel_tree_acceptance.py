"""Law kernel_tree_acceptance, over any kernel adapter with TREE_SAMPLING: whatever the
random draws, a tree speculative sampler's output obeys the rules that make it lossless.
The rule (SpecInfer's multi-candidate rejection, Miao et al. 2024; EAGLE's and SGLang's
tree sampling) for drafts proposed deterministically (a draft's top-k, distinct among
siblings): at an accepted node u, with p = p_u, its children are tried in sibling order;
child x is accepted with probability r(x) / sum(r), r = p with the tokens of the siblings
tried before it removed (SGLang draws one coin per node and accepts the first child whose
cumulative p passes it: the same law); when every child is rejected, or u is at depth
num_steps, one token is drawn from r (the residual: p without the tried children), else
from p, and the walk ends. So for each row b, with n = accept_len[b]:

- shape: 0 <= n <= num_steps; accept_index[b] holds n + 1 flat ids b*ndt + node, then -1;
  tokens[b] holds n + 1 tokens, then -1 (width num_steps + 1);
- path: accept_index starts at the root and each accepted node is a child of the one
  before it (the nodes form a root-to-node path following the links), and tokens[b][i] is
  the candidate of the (i+1)-th accepted node;
- an accepted node's token has target probability > 0 at its parent;
- the final token y, drawn at the last accepted node u, has p_u(y) > 0;
- when u has children and n < num_steps, all of them were tried and rejected: y is none of
  their tokens (it lies in the residual's support), and if they carry all of p_u's mass
  (the residual is empty) one of them is accepted with certainty: the walk cannot end at u.

The distribution these rules produce is the kernel_tree_distribution law's. Drawn: trees of
every shape the draft makes (topk 1-4, depth 1-5, ndt up to 12), zeros and ties in p,
children that cover p's support, children p cannot produce; every draft is deterministic
(the component's form: target-only sampling reads no q)."""
from __future__ import annotations

import torch

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.strategies.kernel_inputs import KernelCase, kernel_cases
from harness.strategies.tree_sampling_inputs import tree_batch, tree_rows, tree_sampling_knobs

NAME = "kernel_tree_acceptance"
NEEDS = frozenset({Component.TREE_SAMPLING})
CONTROLS = "tests/test_kernel_controls_tree_sampling.py::"

# Explicit examples, run before the drawn ones. A coin of exactly 0.0 at the root meets a
# first child of target probability 0: it must still be rejected (SGLang #35798 compared
# `coin <= cdf`). Seed 5528393 makes torch's generator draw 0.0 first (see
# kernel_chain_acceptance), the root's coin in an adapter that draws a coin per node.
EXAMPLES = (
    {"seed": 5528393, "knobs": {
        "bs": 1, "topk": 2, "spec_steps": 1, "ndt": 3, "vocab": 2, "zeros": 0.0,
        "cover": 1.0, "follow": 0.0,
        "rows": [{"parents": [-1, 0, 0], "cand": [1, 0, 1],
                  "p": [[0.0, 1.0], [0.5, 0.5], [0.5, 0.5]]}]}},
)


def cases(kernels):
    return kernel_cases(NAME, kernels, tree_sampling_knobs(kernels.accepts))


def run(kernels, case: KernelCase, rows: list[dict]) -> dict:
    t = tree_batch(rows)
    got = kernels.tree_sampling(t["candidates"], retrieve_index=t["retrieve_index"],
                                next_token=t["next_token"],
                                next_sibling=t["next_sibling"], target_probs=t["target_probs"],
                                seed=case.seed,
                                num_steps=case.knobs["spec_steps"])
    return {k: torch.as_tensor(v).long().tolist() for k, v in got.items()}


def _shape(b: int, *, n: int, acc: list, tok: list, num_steps: int, ndt: int, where: str):
    """The accepted nodes (local ids, root first) once the padding and ranges hold."""
    width = num_steps + 1
    if not 0 <= n <= num_steps or len(acc) != width or len(tok) != width:
        raise OracleFailure(NAME, "shape", f"accept_len {n}, widths {len(acc)} / {len(tok)}: "
                            f"expected 0 <= n <= {num_steps}, width {width}; {where}")
    if -1 in acc[:n + 1] + tok[:n + 1] or any(x != -1 for x in acc[n + 1:] + tok[n + 1:]):
        raise OracleFailure(NAME, "shape", f"expected {n + 1} entries then -1; {where}")
    nodes = [a - b * ndt for a in acc[:n + 1]]
    if nodes[0] != 0 or not all(0 < v < ndt for v in nodes[1:]):
        raise OracleFailure(NAME, "accept_index", f"accepted nodes {nodes}: expected the root "
                            f"then nodes 1..{ndt - 1} of request {b}; {where}")
    return nodes


def check_row(b: int, *, n: int, acc: list, tok: list, row: dict, num_steps: int) -> int:
    """The rules above for request b; returns its accepted drafts."""
    parents, cand, p = row["parents"], row["cand"], row["p"]
    where = (f"request {b}: parents {parents}, candidates {cand}, accept_index {acc}, "
             f"tokens {tok}")
    nodes = _shape(b, n=n, acc=acc, tok=tok, num_steps=num_steps, ndt=len(parents), where=where)
    for i in range(1, n + 1):
        u, v = nodes[i - 1], nodes[i]
        if parents[v] != u:
            raise OracleFailure(NAME, "path", f"node {v} accepted after {u}, but its parent "
                                f"is {parents[v]}; {where}")
        if tok[i - 1] != cand[v]:
            raise OracleFailure(NAME, "tokens", f"token {i - 1} is {tok[i - 1]}, node {v}'s "
                                f"candidate is {cand[v]}; {where}")
        if p[u][cand[v]] == 0.0:
            raise OracleFailure(NAME, "accepts_zero_prob", f"node {v} (token {cand[v]}) has "
                                f"target probability 0 at node {u} and was accepted; {where}")
    u, y, pu = nodes[-1], tok[n], p[nodes[-1]]
    if not 0 <= y < len(pu) or pu[y] == 0.0:
        raise OracleFailure(NAME, "support", f"final token {y} has target probability 0 at "
                            f"node {u} (p {pu}); {where}")
    tried = {cand[c] for c in range(1, len(parents)) if parents[c] == u}
    if n == num_steps or not tried:
        return n
    if all(pu[t] == 0.0 for t in range(len(pu)) if t not in tried):
        raise OracleFailure(NAME, "rejects_certain", f"the children of node {u} (tokens "
                            f"{sorted(tried)}) carry all of p {pu}, so one is accepted with "
                            f"certainty, yet the walk ended there; {where}")
    if y in tried:
        raise OracleFailure(NAME, "recovered_support", f"final token {y} at node {u} is a "
                            f"child's token, tried and rejected (tokens {sorted(tried)}): "
                            f"outside the residual; {where}")
    return n


def check(kernels, case: KernelCase) -> dict:
    rows = tree_rows(case)
    got = run(kernels, case, rows)
    steps = case.knobs["spec_steps"]
    accepted = sum(check_row(b, n=got["accept_len"][b], acc=got["accept_index"][b],
                             tok=got["tokens"][b],
                             row=row, num_steps=steps) for b, row in enumerate(rows))
    return {"accepted": accepted}


LAW = Law(
    name=NAME, rank=632, check=check, cases=cases, needs=NEEDS, door="kernels",
    examples=EXAMPLES,
    summary="tree speculative sampling: the accepted nodes form a root-to-node path, then one "
            "token, -1 padded; never accept p = 0; the final token has p > 0 and, after the "
            "children were tried, lies outside their tokens; children carrying all of p are "
            "never all rejected",
    controls=(CONTROLS + "test_recovered_token_from_p_is_rejected",
              CONTROLS + "test_rejecting_certain_children_is_rejected",
              CONTROLS + "test_target_rows_one_node_off_are_rejected",
              CONTROLS + "test_zero_coin_accepting_a_zero_probability_child_is_rejected"))
