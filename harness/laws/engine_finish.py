"""Law engine_finish, over any adapter (oracle 8 for engines we did not write).

What a request returns when it ends: at most max_new_tokens tokens; a stop token only as the
last token; finish reason "stop" exactly when the last token is a stop token, else "length"
with exactly max_new_tokens tokens; and the output equals the plain continuation of the same
request without stops, cut at its first stop token (kept) or at max_new_tokens, whichever
comes first (greedy: a first divergence only at a tie).

Stops are drawn from everywhere a round's accepted run can reach: tokens of the unstopped
continuation before the cap, tokens whose first occurrence lies past the cap (a round's
accepted drafts can run past it: SGLang #33758), the prompt's own tokens, and tokens that
never occur, one to three at once.

Needs: PLAIN_GREEDY (the reference: greedy requests, the continuation run STOP_PAST_CAP
tokens past each cap), TARGET_LOGITS (ties). With PREFIX_STABLE_SAMPLING as well, sampled requests too,
against the same speculative seeded requests without stops at the same cap."""
from __future__ import annotations

from dataclasses import replace

from harness.adapters.protocol import Observable
from harness.base.failure import OracleFailure
from harness.laws.engine_support import fail, margins
from harness.laws.finish import check_finish
from harness.strategies.engine_runs import drawn_stops, run, unstopped
from harness.strategies.engine_cases import EngineCase, engine_cases, requests_for
from harness.laws.declaration import Law

NAME = "engine_finish"
NEEDS = frozenset({Observable.PLAIN_GREEDY, Observable.TARGET_LOGITS})


def cases(engine: str, device: str):
    from hypothesis import strategies as st
    from harness.adapters.registry import default_adapter
    sampled = Observable.PREFIX_STABLE_SAMPLING in default_adapter(engine, device).observables
    greedy = engine_cases(engine, device=device, law=NAME)
    return st.one_of(greedy, engine_cases(engine, device=device, law=NAME,
                                          sampled=True)) if sampled else greedy


def check(adapter, case: EngineCase) -> dict:
    """The law above for one drawn case; returns which kinds of stop ended requests."""
    reqs = requests_for(case, adapter.vocab_size)
    refs = unstopped(adapter, case, reqs)
    marg = ([margins(adapter, r, c) for r, c in zip(reqs, refs)] if case.temperature == 0
            else None)
    stops = drawn_stops(case, reqs, refs)
    outs = run(adapter, [replace(r, stop_token_ids=s) for r, s in zip(reqs, stops)],
               case.spec_obj)
    try:
        check_finish(outs, max_new=[r.max_new_tokens for r in reqs], stops=stops,
                     references=[c.tokens for c in refs],
                     margins=marg, dtype=adapter.dtype)
    except OracleFailure as exc:
        raise fail(NAME, exc.detail) from None
    past = sum(any(t in c.tokens[r.max_new_tokens:] and t not in c.tokens[:r.max_new_tokens]
                   for t in s) for r, c, s in zip(reqs, refs, stops))
    return {"stopped": sum(o.finish_reason == "stop" for o in outs), "stop_past_cap": past}


LAW = Law(
    name=NAME, rank=310, check=check, cases=cases, needs=NEEDS,
    summary="length, stop position and reason == the plain continuation cut at the stop or the cap",
    controls=("tests/test_adapters_not_vacuous.py::test_dropping_the_last_token_is_rejected",
              "tests/test_adapters_not_vacuous.py::test_emitting_past_a_stop_is_rejected"))
