"""Law engine_lossless_greedy, over any adapter.

Greedy speculative decoding is lossless: for every request, the adapter's speculative output
equals its own plain (non-speculative) greedy output token for token, whatever the drafter
and knobs; a first divergence is allowed only at a tie (the reference's top-2 logit margin at
that position below the dtype's epsilon, harness ties), which ends that comparison.

Needs: PLAIN_GREEDY (the reference), TARGET_LOGITS (the margins). Draws the adapter's whole
knob space, batches up to its max_batch, ragged prompts and max_new_tokens, no stops."""
from __future__ import annotations

from harness.adapters.protocol import Observable
from harness.strategies.engine_cases import EngineCase, engine_cases, requests_for
from harness.laws.engine_support import fail, margins
from harness.strategies.engine_runs import run
from harness.references.ties import compare_greedy
from harness.laws.declaration import Law

NAME = "engine_lossless_greedy"
NEEDS = frozenset({Observable.PLAIN_GREEDY, Observable.TARGET_LOGITS})


def cases(engine: str, device: str):
    return engine_cases(engine, device=device, law=NAME)


def check(adapter, case: EngineCase) -> dict:
    """The law above for one drawn case; returns {"ties": benign ties seen}."""
    reqs = requests_for(case, adapter.vocab_size)
    spec_out = run(adapter, reqs, case.spec_obj)
    plain = run(adapter, reqs, None)
    ties = 0
    for b, (req, got, ref) in enumerate(zip(reqs, spec_out, plain)):
        ok, what = compare_greedy(got.tokens, ref.tokens, margins(adapter, req, ref),
                                  adapter.dtype)
        if not ok:
            raise fail(NAME, f"request {b} (prompt {list(req.prompt)}, max_new_tokens "
                             f"{req.max_new_tokens}) speculative {got.tokens} vs plain "
                             f"{ref.tokens}: {what}")
        ties += what != "identical"
    return {"ties": ties}


LAW = Law(
    name=NAME, rank=300, check=check, cases=cases, needs=NEEDS,
    summary="speculative greedy == the engine's own plain greedy, ties aside",
    controls=("tests/test_adapters_not_vacuous.py::test_dropping_the_last_token_is_rejected",))
