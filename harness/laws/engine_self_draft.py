"""Law engine_self_draft, over any adapter.

With the drafter set to the target itself, greedy drafting proposes the target's own greedy
continuation, so every draft is accepted: in every round, accepted == drafted. A round may
reject a draft only at a tie (the target's top-2 logit margin at the output position of the
first rejected draft below the dtype's epsilon: the draft and the verify forward computed it
differently and resolved it differently), or where the output ended inside that round (at
its cap or a stop token). And the requests do speculate: a request with at least three
output tokens took part in a round that drafted something.

Needs: SELF_DRAFT, ACCEPT_LENGTHS, TARGET_LOGITS (the margins). Chains (topk 1): in a
tree, the target's greedy path is one branch among several and the accept length is the
depth to which it is present (specdec's white-box self_draft law checks that)."""
from __future__ import annotations

from harness.adapters.protocol import Observable
from harness.strategies.engine_cases import EngineCase, engine_cases, requests_for
from harness.laws.engine_support import fail, margins
from harness.strategies.engine_runs import run
from harness.references.ties import TIE_EPS
from harness.laws.declaration import Law

NAME = "engine_self_draft"
NEEDS = frozenset({Observable.SELF_DRAFT, Observable.ACCEPT_LENGTHS, Observable.TARGET_LOGITS})


def cases(engine: str, device: str):
    return engine_cases(engine, device=device, law=NAME, spec_fixed={"drafter": "self",
                                                                     "topk": 1})


def check(adapter, case: EngineCase) -> dict:
    """The law above for one drawn case; returns the rounds and drafts it saw."""
    reqs = requests_for(case, adapter.vocab_size)
    outs = run(adapter, reqs, case.spec_obj)
    eps, seen = TIE_EPS[adapter.dtype], {"rounds": 0, "drafted": 0, "ties": 0}
    for b, (req, out) in enumerate(zip(reqs, outs)):
        if out.rounds is None:
            raise fail(NAME, f"request {b}: no rounds reported (ACCEPT_LENGTHS declared)")
        m = None
        for n, rnd in enumerate(out.rounds):
            seen["rounds"] += 1
            seen["drafted"] += rnd.drafted
            reject_at = rnd.start + rnd.accepted
            if rnd.accepted > rnd.drafted or rnd.accepted < 0:
                raise fail(NAME, f"request {b} round {n}: {rnd} (accepted outside 0..drafted)")
            if rnd.accepted < rnd.drafted and 0 <= reject_at < len(out.tokens):
                m = margins(adapter, req, out) if m is None else m
                if m[reject_at] >= eps:
                    raise fail(NAME, (
                        f"request {b} (prompt {list(req.prompt)}) round {n} of "
                        f"{len(out.rounds)}: accepted {rnd.accepted} of {rnd.drafted} "
                        f"self-drafts; the target's top-2 margin at output {reject_at} is "
                        f"{m[reject_at]:.3e} >= {eps:.0e} (not a tie); rounds {out.rounds}"))
                seen["ties"] += 1
        if len(out.tokens) >= 3 and not any(r.drafted for r in out.rounds):
            raise fail(NAME, f"request {b}: {len(out.tokens)} tokens and no round drafted "
                             f"anything: {out.rounds}")
    return seen


LAW = Law(
    name=NAME, rank=320, check=check, cases=cases, needs=NEEDS,
    summary="with the target as its own drafter every draft is accepted, ties aside",
    controls=("tests/test_adapters_not_vacuous.py::"
              "test_a_drafter_other_than_the_target_fails_self_draft",))
