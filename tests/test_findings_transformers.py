"""What the laws found in Hugging Face transformers' assisted generation, kept as
regression examples (docs/findings/, one script each, with its verdict). Each is marked
xfail(strict=True): CI stays green while the violation stands, and the test fails (flips) the
day upstream changes, saying that the finding, its script and the adapter's KNOWN entry (which
the laws draw around) are to be removed. Findings hold on some transformers versions only:
each test runs on the versions its KNOWN entry names."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
import transformers

from harness.adapters.transformers_assisted import KNOWN, TransformersAdapter

FINDINGS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "findings"
# The transformers versions each finding was reproduced on (its KNOWN entry's, one source).
# Elsewhere the test is skipped (a strict xfail would turn red on a version that never had the
# bug, or has it fixed): run the finding's script there (`python docs/findings/<id>.py`, exit
# 1 = reproduced) and add the version to the entry's `versions`.
VERIFIED = {k.id: k.versions for k in KNOWN}


def _on_verified_version(name: str):
    return pytest.mark.skipif(
        transformers.__version__ not in VERIFIED[name],
        reason=f"{name} was reproduced on transformers {sorted(VERIFIED[name])}, this is "
               f"{transformers.__version__}: run docs/findings/{name}.py and record the result")


def _finding(name: str):
    spec = importlib.util.spec_from_file_location(f"finding_{name}", FINDINGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Each finding's verdict, the strict xfail's reason (its test flips when upstream changes).
VERDICTS = {
    "transformers_assistant_masks_pad_ids":
        "bug: the assistant infers its attention mask from pad_token_id after generate() drops "
        "the caller's all-ones mask, so prompt tokens equal to the pad id vanish from the "
        "drafter's context (acceptance drops, outputs stay right)",
    "transformers_heuristic_schedule_persists":
        "documented limitation: the heuristic schedule writes num_assistant_tokens back to the "
        "assistant's generation_config, so a seeded request depends on earlier calls",
    "transformers_prompt_ending_in_stop_id_emits_nothing":
        "bug (fixed by 5.24): a round that drafts nothing checks the stopping criteria on the "
        "prompt, whose last token is an eos id, sets n_matches = 0 - 1 and commits "
        "n_matches + 1 = 0 tokens: an empty output",
}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[_on_verified_version(name),
                              pytest.mark.xfail(strict=True, reason=reason)], id=name)
    for name, reason in VERDICTS.items()])
def test_finding_still_reproduces(name):
    """The finding's law, on its recorded case: fails while upstream keeps the behaviour."""
    ok, what = _finding(name).law_holds()
    assert ok, what


def test_findings_are_the_adapters_known_list():
    """Every recorded finding the laws draw around has its script here, and vice versa, and
    each names the versions it was reproduced on."""
    assert sorted(k.id for k in KNOWN) == sorted(p.stem for p in FINDINGS.glob("transformers_*.py"))
    assert all((FINDINGS.parents[1] / k.doc).exists() for k in KNOWN)
    assert all(k.versions for k in KNOWN), [k.id for k in KNOWN if not k.versions]
    assert sorted(VERDICTS) == sorted(k.id for k in KNOWN)  # each has its regression test


def test_the_adapter_draws_around_only_this_versions_findings():
    """On a version where a finding was not reproduced the laws draw its cases again."""
    ids = [k.id for k in TransformersAdapter("cpu").known]
    assert ids == [k.id for k in KNOWN if transformers.__version__ in k.versions]


def test_the_empty_output_finding_draws_around_its_cases_only():
    """Its predicate matches the recorded case (a stop id ends the prompt, nothing drafted)
    and not the same case with room for a draft, nor with the prompt's token not a stop."""
    from dataclasses import replace

    from harness.strategies.engine_cases import EngineCase, requests_for
    from harness.strategies.engine_runs import CaseDraws
    name = "transformers_prompt_ending_in_stop_id_emits_nothing"
    known = next(k for k in KNOWN if k.id == name)
    case = EngineCase.from_dict(_finding(name).CASE)
    adapter = TransformersAdapter("cpu")
    roomy = next(c for c in (replace(case, max_new_tokens=m, seed=s) for s in range(1, 50)
                             for m in (4, 8))
                 if all(r.max_new_tokens > 1 for r in requests_for(c, adapter.vocab_size)))
    # max_new_tokens 1 alone is not enough: some seeds draw no stop equal to the prompt's end
    def matches(c):
        return known.matches(adapter, c, CaseDraws(adapter, c, requests_for(c, adapter.vocab_size)))

    other_seed = next(replace(case, seed=s) for s in range(2, 200)
                      if not matches(replace(case, seed=s)))
    assert matches(case)
    assert not matches(roomy)
    assert requests_for(other_seed, adapter.vocab_size)[0].max_new_tokens == 1
