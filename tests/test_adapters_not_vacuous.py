"""Negative controls of the black-box laws: a deliberately wrong adapter, wrapping the
transformers or the specdec adapter, is rejected by each law that should reject it (a law
that never fails proves nothing), and the same case passes on the adapter it wraps.

The wrong adapters: one drops the last token of every speculative completion; one emits past
its stop tokens; one samples the drafter's distribution instead of the target's; one ignores
drafter="self"; one lets its seeds drift from call to call."""
from __future__ import annotations

from dataclasses import replace

import pytest

from harness.adapters.protocol import Spec
from harness.adapters.registry import get_adapter
from harness.strategies.engine_cases import EngineCase
from harness.base.failure import OracleFailure
from harness.runners.engine_suite import ENGINE_LAWS

SETTINGS = {"transformers": {"dtype": "float32", "model_seed": 0, "pad_token_id": None},
            "specdec": {"dtype": "float32", "page_size": 4, "cuda_graph": False,
                        "overlap": False}}
SPECS = {"transformers": Spec("perturbed:0.002", 4, None, (("schedule", "constant"),
                                                           ("confidence", 0.0))),
         "specdec": Spec("perturbed", 3, 1, (("ndt", 4), ("draft_sampling", "greedy")))}
SELF = {"transformers": replace(SPECS["transformers"], drafter="self"),
        "specdec": replace(SPECS["specdec"], drafter="self")}
ENGINES = ("transformers", "specdec")


class Wrapped:
    """An adapter that forwards everything to `inner` except what a subclass breaks."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


class DropsLastToken(Wrapped):
    def generate(self, requests, spec):
        outs = self.inner.generate(requests, spec)
        if spec is None:
            return outs
        return [replace(c, tokens=c.tokens[:-1]) for c in outs]


class EmitsPastStop(Wrapped):
    """Ignores stop tokens: runs each request to its cap."""

    def generate(self, requests, spec):
        return self.inner.generate([replace(r, stop_token_ids=()) for r in requests], spec)


class IgnoresSelfDraft(Wrapped):
    """Asked for the target as drafter, drafts with another model."""

    def generate(self, requests, spec):
        if spec is not None and spec.drafter == "self":
            spec = replace(spec, drafter="perturbed:0.01" if self.inner.name == "transformers"
                           else "perturbed")
        return self.inner.generate(requests, spec)


class DriftingSeeds(Wrapped):
    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.calls = 0

    def generate(self, requests, spec):
        self.calls += 1
        return self.inner.generate([replace(r, seed=r.seed + self.calls) if r.seed is not None
                                    else r for r in requests], spec)


class SamplesDraft(Wrapped):
    """Speculative sampled requests come out of the drafter alone (transformers): tokens
    follow the draft's distribution, the target's logits are still reported."""

    def generate(self, requests, spec):
        if spec is None or all(r.greedy for r in requests):
            return self.inner.generate(requests, spec)
        target, self.inner.target = self.inner.target, self.inner.drafter(spec.drafter)
        try:
            return self.inner.generate(requests, None)
        finally:
            self.inner.target = target


def _case(engine, spec, seed, **kw) -> EngineCase:
    return EngineCase(engine=engine, settings=SETTINGS[engine], spec=spec.to_dict(), seed=seed,
                      **kw)


def _rejects(law: str, wrong, case: EngineCase) -> None:
    ENGINE_LAWS[law].check(wrong.inner, case)  # the adapter it wraps passes
    with pytest.raises(OracleFailure) as info:
        ENGINE_LAWS[law].check(wrong, case)
    assert info.value.check == law, info.value


def _adapter(engine):
    return get_adapter(engine, "cpu", SETTINGS[engine])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("law", ["engine_lossless_greedy", "engine_finish"])
def test_dropping_the_last_token_is_rejected(engine, law):
    case = _case(engine, SPECS[engine], 7, batch_size=1, max_prompt_len=8, max_new_tokens=10)
    _rejects(law, DropsLastToken(_adapter(engine)), case)


@pytest.mark.parametrize("engine", ENGINES)
def test_emitting_past_a_stop_is_rejected(engine):
    # The first seed whose drawn stops end a request before its cap (the law reports it).
    case = next(c for c in (_case(engine, SPECS[engine], s, batch_size=1, max_prompt_len=8,
                                  max_new_tokens=12) for s in range(40))
                if ENGINE_LAWS["engine_finish"].check(_adapter(engine), c)["stopped"])
    _rejects("engine_finish", EmitsPastStop(_adapter(engine)), case)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_drafter_other_than_the_target_fails_self_draft(engine):
    case = _case(engine, SELF[engine], 3, batch_size=1, max_prompt_len=8, max_new_tokens=12)
    _rejects("engine_self_draft", IgnoresSelfDraft(_adapter(engine)), case)


@pytest.mark.parametrize("engine", ENGINES)
def test_drifting_seeds_fail_seeded_determinism(engine):
    case = _case(engine, SPECS[engine], 5, batch_size=1, max_prompt_len=8, max_new_tokens=8,
                 temperature=1.0)
    _rejects("engine_seeded_determinism", DriftingSeeds(_adapter(engine)), case)


def test_sampling_the_drafts_distribution_is_rejected():
    spec = replace(SPECS["transformers"], drafter="other")
    case = _case("transformers", spec, 2, temperature=1.0, n=400)
    wrong = SamplesDraft(_adapter("transformers"))
    _rejects("engine_sampled_distribution", wrong, case)
    for law in ("engine_lossless_greedy", "engine_finish"):  # greedy: it is the target
        ENGINE_LAWS[law].check(wrong, replace(case, temperature=0.0, n=0))


def test_dropping_the_last_token_breaks_the_distribution_law():
    case = _case("specdec", SPECS["specdec"], 4, temperature=0.7, n=40)
    with pytest.raises(OracleFailure, match="max_new_tokens 2"):
        ENGINE_LAWS["engine_sampled_distribution"].check(DropsLastToken(_adapter("specdec")),
                                                        case)
