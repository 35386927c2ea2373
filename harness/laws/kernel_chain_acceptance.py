"""Law kernel_chain_acceptance, over any kernel adapter with CHAIN_SAMPLING: whatever the
random draws, a speculative sampler's output for a chain obeys the rules that make it
lossless (Leviathan et al. 2023, Chen et al. 2023; docs/contract.md section 12):

- shape: row b emits its first n accepted drafts, then exactly one more token, then -1 to
  width K+1; 0 <= n <= num_drafts[b];
- a sampled row never accepts a draft the target gives probability 0;
- the ratio rule (the adapter's `ratio_variants`: accept with probability min(1, p/q)):
  a draft with q(x) <= p(x) is always accepted (its acceptance probability
  min(1, p/q) is 1); a deterministic draft (q one-hot) is accepted with probability p(x);
- after a rejection at n the token is drawn from norm(max(0, p_n - q_n)): it has p_n > q_n;
  after all num_drafts accepted, the bonus is drawn from p_{num_drafts}: it has p > 0;
  variants lossless by another rule (block verification, a target sample compared with the
  draft) are held to the support rules per token (p > 0 for every emitted token) and to
  kernel_chain_distribution;
- a greedy row is exact: it accepts drafts while they are the target's argmax, then emits
  the argmax at the first mismatch (or the bonus position).

Every example is drawn in one of the input classes a serving engine's sampler metadata makes
(harness/strategies/chain_inputs.py: one-token rows, masked drafts, full chains, a batch of
one, mixed greedy and sampled rows, rows without drafts); the rules above are their policy:
never an id outside [0, V) nor a placeholder, never a token of target probability 0.

The distribution these rules produce is the kernel_chain_distribution law's."""
from __future__ import annotations


from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.strategies.chain_inputs import chain_batch, chain_knobs
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_chain_acceptance"
NEEDS = frozenset({Component.CHAIN_SAMPLING})


# Explicit examples, run before the drawn ones on every adapter. A uniform coin of exactly 0.0
# (float32 coins are multiples of 2^-24, so 0 comes once in 2^24 draws) meets a draft whose
# target probability is 0: the draft must still be rejected. Seed 5528393 makes torch's
# CPU generator draw 0.0 first, and every adapter seeds request b's coins from seed + b (found by
# a search over torch's Mersenne Twister; docs/findings/vllm_0_9_zero_coin_accepts_zero_prob.py).
EXAMPLES = (
    {"seed": 5528393, "knobs": {
        "variant": "classic", "ratio_rule": True, "bs": 1, "k": 1, "vocab": 2, "ragged": False,
        "greedy": "none", "deterministic": False, "zeros": 0.0, "close": 0.0,
        "batch": {"draft_ids": [[1]], "num_drafts": [1], "draft_probs": [[[0.5, 0.5]]],
                  "target_probs": [[[1.0, 0.0], [0.5, 0.5]]], "greedy": [False]}}},
)


def cases(kernels):
    return kernel_cases(NAME, kernels, chain_knobs(kernels.accepts))


def run(kernels, case: KernelCase, batch: dict, seed: int):
    return kernels.chain_sampling(batch["draft_ids"], num_drafts=batch["num_drafts"],
                                  draft_probs=batch["draft_probs"],
                                  target_probs=batch["target_probs"], greedy=batch["greedy"],
                                  seed=seed,
                                  variant=case.knobs["variant"])


def _greedy_row(d: list[int], nd: int, p) -> list[int]:
    out = []
    for i in range(nd):
        best = int(p[i].argmax())
        out.append(best)
        if d[i] != best:
            return out
    return out + [int(p[nd].argmax())]


def check_row(b: int, row: list[int], batch: dict, ratio_rule: bool) -> int:
    """The rules above for row b; returns its accepted drafts."""
    d = batch["draft_ids"][b].tolist()
    nd = int(batch["num_drafts"][b])
    p, q = batch["target_probs"][b], batch["draft_probs"]
    q = None if q is None else q[b]
    where = f"row {b}: drafts {d[:nd]} ({nd} of {len(d)}), output {row}"
    m = next((i for i, t in enumerate(row) if t == -1), len(row))
    if not 1 <= m <= nd + 1 or any(t != -1 for t in row[m:]):
        raise OracleFailure(NAME, "shape", f"expected 1 to {nd + 1} tokens then -1; {where}")
    n = m - 1
    if row[:n] != d[:n]:
        raise OracleFailure(NAME, "accepted_prefix", f"the first {n} tokens are not the "
                            f"drafts; {where}")
    if bool(batch["greedy"][b]):
        want = _greedy_row(d, nd, p)
        if row[:m] != want:
            raise OracleFailure(NAME, "greedy", f"greedy row: expected {want}; {where}")
        return n
    for i in range(n):
        if float(p[i, d[i]]) == 0.0:
            raise OracleFailure(NAME, "accepts_zero_prob", f"draft {i} (token {d[i]}) has "
                                f"target probability 0 and was accepted; {where}")
    last, pl = row[n], p[n].tolist()
    if not 0 <= last < len(pl) or pl[last] == 0.0:
        raise OracleFailure(NAME, "support", f"token {last} at position {n} has target "
                            f"probability 0 (row {[round(x, 4) for x in pl]}); {where}")
    if not ratio_rule or n == nd:
        return n
    qn = [1.0 if t == d[n] else 0.0 for t in range(len(pl))] if q is None else q[n].tolist()
    if pl[d[n]] >= qn[d[n]]:
        raise OracleFailure(NAME, "rejects_certain", f"draft {n} (token {d[n]}) has p "
                            f"{pl[d[n]]:.4g} >= q {qn[d[n]]:.4g}, so min(1, p/q) = 1, and "
                            f"was rejected; {where}")
    if pl[last] <= qn[last]:
        raise OracleFailure(NAME, "recovered_support", f"recovered token {last} has p "
                            f"{pl[last]:.4g} <= q {qn[last]:.4g}: outside norm(max(0, p - q)); "
                            f"{where}")
    return n


def check(kernels, case: KernelCase) -> dict:
    batch = chain_batch(case)
    out = run(kernels, case, batch, case.seed).tolist()
    accepted = sum(check_row(b, row, batch, case.knobs["ratio_rule"])
                   for b, row in enumerate(out))
    return {"accepted": accepted}


LAW = Law(
    name=NAME, rank=630, check=check, cases=cases, needs=NEEDS, door="kernels", examples=EXAMPLES,
    summary="chain speculative sampling: accepted drafts then one token then -1; never accept "
            "p = 0, always accept p >= q, recovered tokens from max(0, p - q), bonus from p, "
            "greedy rows exact",
    controls=("tests/test_kernel_law_controls.py::test_recovered_token_from_p_is_rejected",
              "tests/test_kernel_law_controls.py::test_rejecting_certain_drafts_is_rejected",
              "tests/test_chain_input_classes.py::test_a_mistake_of_the_class_is_caught_in_it"))
