"""Law engine_token_range, over any adapter: every token an engine emits is an id of its
target's vocabulary, [0, V), for greedy and sampled requests, speculative and plain.

An id outside it is a token nobody can detokenize, and the mistakes that make one are
ordinary: a shard offset added twice in a vocabulary-parallel gather, a padding sentinel (-1)
or a placeholder leaking from a round into the output, a recovered token drawn from a row
whose probabilities all vanished, an argmax over a padded vocabulary. The other black-box
laws need observables (plain greedy, logits, seeds) that not every engine offers; this one
needs none, so it runs on every adapter.

Needs: nothing (every adapter serves it)."""
from __future__ import annotations

from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.laws.declaration import Law
from harness.strategies.engine_runs import run
from harness.strategies.engine_cases import EngineCase, engine_cases, requests_for

NAME = "engine_token_range"
NEEDS = frozenset()


def cases(engine: str, device: str):
    """Greedy and sampled cases (every temperature, top-k and top-p the strategy draws)."""
    return st.one_of(engine_cases(engine, device=device, law=NAME),
                     engine_cases(engine, device=device, law=NAME, sampled=True))


def check(adapter, case: EngineCase) -> dict:
    """The law above for one drawn case: its batch speculative, then plain."""
    vocab = adapter.vocab_size
    reqs = requests_for(case, vocab)
    emitted = 0
    for spec, how in ((case.spec_obj, "speculative"), (None, "plain")):
        for b, out in enumerate(run(adapter, reqs, spec)):
            bad = [(i, t) for i, t in enumerate(out.tokens) if not 0 <= t < vocab]
            if bad:
                i, t = bad[0]
                raise OracleFailure(NAME, NAME, f"{how} request {b} (temperature "
                                    f"{reqs[b].temperature}): token {i} is {t}, outside the "
                                    f"vocabulary [0, {vocab}); output {out.tokens}")
            emitted += len(out.tokens)
    return {"tokens": emitted}


LAW = Law(
    name=NAME, rank=350, check=check, cases=cases, needs=NEEDS,
    summary="every emitted token is an id of the target's vocabulary, [0, V), greedy and "
            "sampled, speculative and plain",
    controls=("tests/test_engine_token_range.py::test_ids_past_the_vocabulary_are_rejected",))
