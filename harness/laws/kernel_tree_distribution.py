"""Law kernel_tree_distribution, over any kernel adapter with TREE_SAMPLING: tree
speculative sampling is lossless. For N rows that share one draft tree, its candidates and
its target rows p_t, the first emitted token (the first accepted child's, or the token
drawn at the root when every child is rejected) follows p_root, and among the rows whose
first accepted node is c (the most frequent such node) the second emitted token follows
p_c. (Siblings are distinct tokens and a rejected child's token leaves the residual, so the
first token names the first accepted node: the split does not bias the second.)

Test: N = 200 rows on CPU, 100,000 on a GPU, all in one kernel call; Pearson chi-square per
position, bins expecting < 5 folded, at alpha 1e-4 each (kernel_chain_distribution's test),
and a token of target probability 0 fails at once. Every random choice is seeded.
Drawn: trees as the draft makes them (topk 1-4, depth 1-3, ndt up to 12), vocabulary up to
8, zeros and ties in p, children that cover p's support or that p cannot produce."""
from __future__ import annotations

from collections import Counter

import torch

from harness.adapters.kernel_protocol import Component
from harness.laws import kernel_chain_distribution as chain
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.strategies.kernel_inputs import KernelCase, kernel_cases
from harness.strategies.tree_sampling_inputs import tree_batch, tree_rows, tree_sampling_knobs

NAME = "kernel_tree_distribution"
NEEDS = frozenset({Component.TREE_SAMPLING})
# The interpreter runs a CPU row in ~30 ms (specdec's kernel), a GPU all at once: there as
# many as the chain law's, so that a TV bias of about 1 % is seen (docs/adapters.md).
ROWS = {"cpu": 200, "gpu": 100_000}
CONTROLS = "tests/test_kernel_controls_tree_sampling.py::"


def cases(kernels):
    rows = ROWS["cpu" if kernels.device == "cpu" else "gpu"]
    knobs = tree_sampling_knobs(kernels.accepts, max_bs=1, max_steps=3)
    return kernel_cases(NAME, kernels, knobs.map(lambda k: {**k, "rows_n": rows}))


def chi_square(tokens: list[int], p: torch.Tensor, what: str) -> float:
    """kernel_chain_distribution's test, its failures named after this law."""
    try:
        return chain.chi_square(tokens, p, what)
    except OracleFailure as exc:
        raise OracleFailure(NAME, exc.check, exc.detail) from None


def check(kernels, case: KernelCase) -> dict:
    row = tree_rows(case)[0]
    n_rows = case.knobs["rows_n"]
    t = {k: v.expand(n_rows, *v.shape[1:]).contiguous()
         for k, v in tree_batch([row]).items()}
    ndt = len(row["parents"])
    t["retrieve_index"] = torch.arange(n_rows * ndt, dtype=torch.int64).reshape(n_rows, ndt)
    got = kernels.tree_sampling(t["candidates"], retrieve_index=t["retrieve_index"],
                                next_token=t["next_token"],
                                next_sibling=t["next_sibling"], target_probs=t["target_probs"],
                                seed=case.seed,
                                num_steps=case.knobs["spec_steps"])
    tokens = torch.as_tensor(got["tokens"]).long().tolist()
    num = torch.as_tensor(got["accept_len"]).long().reshape(-1).tolist()
    acc = torch.as_tensor(got["accept_index"]).long().tolist()
    p = torch.tensor(row["p"], dtype=torch.float64)
    stats = {"first": chi_square([r[0] for r in tokens], p[0], "first token ~ p_root")}
    firsts = Counter(a[1] - b * ndt for b, (a, n) in enumerate(zip(acc, num)) if n >= 1)
    if firsts:
        c, count = firsts.most_common(1)[0]
        second = [r[1] for b, (r, a, n) in enumerate(zip(tokens, acc, num))
                  if n >= 1 and a[1] - b * ndt == c]
        if count >= 2 * chain.MIN_EXPECTED and 0 < c < ndt:
            stats["second"] = chi_square(second, p[c], f"second token ~ p_{c} over the "
                                         f"{count} rows whose first accepted node is {c}")
    return stats


LAW = Law(
    name=NAME, rank=642, check=check, cases=cases, needs=NEEDS, door="kernels", fraction=2,
    summary="tree speculative sampling is lossless: the first emitted token follows p_root "
            "and, after a given first accepted node c, the second follows p_c (chi-square)",
    controls=(CONTROLS + "test_recovered_token_from_p_is_rejected",
              CONTROLS + "test_accepting_without_a_coin_is_rejected"))
