"""What the laws found in Hugging Face transformers' assisted generation, kept as
regression examples (docs/findings/, one script each, with its verdict). Each is marked
xfail(strict=True): CI stays green while the violation stands, and the test fails (flips) the
day upstream changes, saying that the finding, its script and the adapter's KNOWN entry (which
the laws draw around) are to be removed."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
import transformers

FINDINGS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "findings"
# The transformers versions each finding was reproduced on. Elsewhere the test is skipped (a
# strict xfail would turn red on a version that never had the bug): run the finding's script
# there (`python docs/findings/<id>.py`, exit 1 = reproduced) and add the version.
VERIFIED = {
    "transformers_assistant_masks_pad_ids": {"5.24.0"},
    "transformers_heuristic_schedule_persists": {"5.24.0"},
}


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


@_on_verified_version("transformers_assistant_masks_pad_ids")
@pytest.mark.xfail(strict=True, reason="bug: the assistant infers its attention mask from "
                   "pad_token_id after generate() drops the caller's all-ones mask, so prompt "
                   "tokens equal to the pad id vanish from the drafter's context (acceptance "
                   "drops, outputs stay right)")
def test_assistant_sees_prompt_tokens_equal_to_the_pad_id():
    ok, what = _finding("transformers_assistant_masks_pad_ids").law_holds()
    assert ok, what


@_on_verified_version("transformers_heuristic_schedule_persists")
@pytest.mark.xfail(strict=True, reason="documented limitation: the heuristic schedule writes "
                   "num_assistant_tokens back to the assistant's generation_config, so a "
                   "seeded request depends on earlier calls")
def test_heuristic_schedule_keeps_seeded_requests_reproducible():
    ok, what = _finding("transformers_heuristic_schedule_persists").law_holds()
    assert ok, what


def test_findings_are_the_adapters_known_list():
    """Every recorded finding the laws draw around has its script here, and vice versa."""
    from harness.adapters.transformers_assisted import KNOWN
    assert sorted(k.id for k in KNOWN) == sorted(p.stem for p in FINDINGS.glob("transformers_*.py"))
    assert sorted(VERIFIED) == sorted(k.id for k in KNOWN)
    assert all((FINDINGS.parents[1] / k.doc).exists() for k in KNOWN)
