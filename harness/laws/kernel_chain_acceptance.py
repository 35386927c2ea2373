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

A fully masked row (NaN after the softmax over all -inf) defines no distribution: at a
position whose target row is masked, or whose draft row is masked when its draft is rejected
(max(0, p - q) is NaN there), the policy is an id in [0, V), never a placeholder; every other
position keeps every rule above (a draft of target probability 0 is never accepted, whatever
its q).

Every example runs its batch through every variant the adapter has (the drawn one first) and
is drawn in one of the input classes a serving engine's sampler metadata makes
(harness/strategies/chain_inputs.py: one-token rows, masked drafts, full chains, a batch of
one, mixed greedy and sampled rows, rows without drafts); the rules above are their policy:
never an id outside [0, V) nor a placeholder, never a token of target probability 0.

The distribution these rules produce is the kernel_chain_distribution law's."""
from __future__ import annotations


from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.base.known import drawn_around
from harness.laws.declaration import Law
from harness.strategies.chain_inputs import chain_batch, chain_knobs
from harness.strategies.kernel_inputs import KernelCase, kernel_cases

NAME = "kernel_chain_acceptance"
NEEDS = frozenset({Component.CHAIN_SAMPLING})


EDGE_SEED = 29  # a draw whose float32 running sums end below u times their total

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
    # The coins at both ends where the caller hands them over (input class edge_coins): 0.0
    # at drafts of target probability 0, and the largest float32 below 1.0 elsewhere and at
    # the final draw, which must not run a search past the row's last token of p > 0.
    {"seed": EDGE_SEED, "knobs": {
        "variant": "classic", "ratio_rule": True, "bs": 6, "k": 2, "vocab": 8, "ragged": False,
        "greedy": "none", "deterministic": False, "zeros": 0.3, "close": 1.0,
        "input_class": "edge_coins"}},
)


def cases(kernels):
    return kernel_cases(NAME, kernels, chain_knobs(kernels.accepts))


def run(kernels, batch: dict, seed: int, variant: str):
    # The edge_coins class hands its coins over (adapters with accepts["coin_inputs"]).
    coins = {n: batch[n] for n in ("coins", "final_coins")
             if n in batch and kernels.accepts.get("coin_inputs")}
    return kernels.chain_sampling(batch["draft_ids"], num_drafts=batch["num_drafts"],
                                  draft_probs=batch["draft_probs"],
                                  target_probs=batch["target_probs"], greedy=batch["greedy"],
                                  seed=seed, variant=variant, **coins)


def variants(kernels, case: KernelCase, law: str = NAME) -> tuple:
    """Every variant the adapter has, the drawn one first: an example's batch goes through
    each (V1's kernel and its public entry, MRV2's samplers), so a few examples reach all.
    A recorded finding of this release (accepts["known"]: its law, variant and input class,
    docs/findings/) is drawn around unless SPECDEC_KNOWN_FINDINGS=include (`--with-known`)."""
    have = tuple(kernels.accepts.get("variants", ("classic",)))
    first = case.knobs["variant"]
    skip = {k["variant"] for k in drawn_around(kernels.accepts, law=law)
            if k["input_class"] == case.knobs.get("input_class", "plain")}
    return tuple(v for v in (first,) + tuple(v for v in have if v != first) if v not in skip)


def _greedy_row(d: list[int], nd: int, p) -> list[int]:
    out = []
    for i in range(nd):
        best = int(p[i].argmax())
        out.append(best)
        if d[i] != best:
            return out
    return out + [int(p[nd].argmax())]


def _finite(rows) -> list[bool]:
    return [bool(r.isfinite().all()) for r in rows]


def check_row(b: int, row: list[int], batch: dict, ratio_rule: bool) -> int:
    """The rules above for row b; returns its accepted drafts. A fully masked (NaN) row
    defines no distribution: at its position the law asks only for an id in [0, V), and a
    greedy row's walk is exact up to a masked target row."""
    d = batch["draft_ids"][b].tolist()
    nd = int(batch["num_drafts"][b])
    p, q = batch["target_probs"][b], batch["draft_probs"]
    q = None if q is None else q[b]
    p_ok, q_ok = _finite(p), [True] * len(d) if q is None else _finite(q)
    vocab = p.shape[-1]
    where = f"row {b}: drafts {d[:nd]} ({nd} of {len(d)}), output {row}"
    m = next((i for i, t in enumerate(row) if t == -1), len(row))
    if not 1 <= m <= nd + 1 or any(t != -1 for t in row[m:]):
        raise OracleFailure(NAME, "shape", f"expected 1 to {nd + 1} tokens then -1; {where}")
    n = m - 1
    if row[:n] != d[:n]:
        raise OracleFailure(NAME, "accepted_prefix", f"the first {n} tokens are not the "
                            f"drafts; {where}")
    if not 0 <= row[n] < vocab:
        raise OracleFailure(NAME, "token_range", f"token {row[n]} at position {n} is outside "
                            f"[0, {vocab}); {where}")
    if bool(batch["greedy"][b]):
        masked = next((i for i in range(nd + 1) if not p_ok[i]), None)
        want = _greedy_row(d, nd, p)
        if masked is not None and len(want) > masked:  # the walk reaches a masked row
            if row[:masked] != want[:masked]:
                raise OracleFailure(NAME, "greedy", f"greedy row: expected {want[:masked]} "
                                    f"before the masked row at {masked}; {where}")
        elif row[:m] != want:
            raise OracleFailure(NAME, "greedy", f"greedy row: expected {want}; {where}")
        return n
    for i in range(n):
        if p_ok[i] and float(p[i, d[i]]) == 0.0:
            raise OracleFailure(NAME, "accepts_zero_prob", f"draft {i} (token {d[i]}) has "
                                f"target probability 0 and was accepted; {where}")
    if not p_ok[n] or (n < nd and not q_ok[n]):  # no distribution to draw from there
        return n
    last, pl = row[n], p[n].tolist()
    if pl[last] == 0.0:
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
    ratio = kernels.accepts.get("ratio_variants", ("classic",))
    accepted = 0
    for variant in variants(kernels, case):
        out = run(kernels, batch, case.seed, variant).tolist()
        try:
            accepted += sum(check_row(b, row, batch, variant in ratio)
                            for b, row in enumerate(out))
        except OracleFailure as exc:
            raise OracleFailure(NAME, exc.check, f"variant {variant}: {exc.detail}") from None
    return {"accepted": accepted}


LAW = Law(
    name=NAME, rank=630, check=check, cases=cases, needs=NEEDS, door="kernels", examples=EXAMPLES,
    summary="chain speculative sampling: accepted drafts then one token then -1; never accept "
            "p = 0, always accept p >= q, recovered tokens from max(0, p - q), bonus from p, "
            "greedy rows exact",
    controls=("tests/test_kernel_law_controls.py::test_recovered_token_from_p_is_rejected",
              "tests/test_kernel_law_controls.py::test_rejecting_certain_drafts_is_rejected",
              "tests/test_chain_input_classes.py::test_a_mistake_of_the_class_is_caught_in_it"))
