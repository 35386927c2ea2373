"""Oracle 7 (harness/laws/distribution.py): sampled speculative decoding is lossless in
distribution, for chain and tree drafts, with and without top-k / top-p; and the oracle is
not vacuous: a biased acceptance rule (threshold_acc = 0.3) fails it.

ci/dev/gpu profiles: 400 samples per case (seconds on CPU). nightly: 4000 samples and every
draft x shape x filter combination. Each check fails a correct engine with probability ~1e-4.
"""
from __future__ import annotations

import pytest
from hypothesis import settings

from harness.laws.distribution import check_sampled_distribution
from harness.base.failure import OracleFailure
from harness.strategies.runs import default_device
from specdec import Engine, SpecConfig

NIGHTLY = settings._current_profile == "nightly"
N = 4000 if NIGHTLY else 400
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
SHAPES = {"chain": SpecConfig(topk=1, num_steps=3),
          "tree": SpecConfig(topk=2, num_steps=3, num_draft_tokens=5)}
FILTERS = [(1.0, 8, 1.0), (1.0, 0, 0.9), (1.5, 0, 1.0)]  # (temperature, top_k, top_p)
CHEAP = [("eagle", "chain", FILTERS[0]), ("self", "tree", FILTERS[1]),
         ("eagle", "tree", FILTERS[2]), ("self", "chain", FILTERS[2])]
CASES = ([(d, s, f) for d in ("eagle", "self") for s in SHAPES for f in FILTERS]
         if NIGHTLY else CHEAP)


def engine(draft: str, shape: str) -> Engine:
    # The target drafting for itself proposes the target's own top tokens: acceptance is high,
    # so both the accept and the recovered-token branches carry mass.
    return Engine(model="tiny", spec=SHAPES[shape], draft=draft, device=default_device(),
                  max_batch=min(N, 500), max_context=32)


@pytest.mark.parametrize("draft,shape,filt", CASES)
def test_sampled_tokens_follow_target(draft, shape, filt):
    temperature, top_k, top_p = filt
    check_sampled_distribution(engine(draft, shape), prompt=PROMPT, n=N, temperature=temperature,
                               top_k=top_k, top_p=top_p,
                               seed=1000)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_biased_acceptance_is_caught(shape):
    eng = engine("self", shape)
    check_sampled_distribution(eng, prompt=PROMPT, n=N, temperature=1.0, top_k=8,
                               seed=2000)  # unbiased: passes
    eng.rounds.verifier.threshold_acc = 0.3  # accepts a draft when coin <= q / 0.3
    with pytest.raises(OracleFailure, match="sampled_distribution"):
        check_sampled_distribution(eng, prompt=PROMPT, n=N, temperature=1.0, top_k=8, seed=2000)
