"""The sampling_filter law (harness/laws/sampling_filter.py): it holds for the engine's filter
over generated cases, and it is not vacuous: planted mistakes in the filter (the top-p
boundary token kept, the temperature ignored, top-k ties dropped) each fail it."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from harness.laws.common import OracleFailure
from harness.laws.sampling_filter import (SamplingFilterCase, prop_sampling_filter,
                                          sampling_filter_cases)
from specdec import sampler

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
RIGHT = sampler.filtered_probs


@settings(deadline=None)
@given(case=sampling_filter_cases())
def test_generated_cases_pass(case):
    prop_sampling_filter(case, DEVICE)


def _boundary_kept(logits, temperature, top_k, top_p, *flags):
    return RIGHT(logits, temperature, top_k, torch.where(top_p < 1, top_p + 1e-6, top_p), *flags)


def _temperature_ignored(logits, temperature, top_k, top_p, *flags):
    return RIGHT(logits, torch.ones_like(temperature), top_k, top_p, *flags)


def _ties_dropped(logits, temperature, top_k, top_p, *flags):
    """Top-k by index (torch.topk): exactly k tokens, a tie with the k-th cut."""
    probs = RIGHT(logits, temperature, torch.zeros_like(top_k), top_p, *flags)
    k = torch.where(top_k > 0, top_k, logits.shape[-1]).clamp(max=logits.shape[-1])
    rank = torch.argsort(torch.argsort(logits, dim=-1, descending=True, stable=True), dim=-1)
    probs = probs.masked_fill(rank >= k[:, None, None], 0.0)
    return probs / probs.sum(-1, keepdim=True)


@pytest.mark.parametrize("planted,kind", [(_boundary_kept, "exact"),
                                          (_temperature_ignored, "random"),
                                          (_ties_dropped, "exact")],
                         ids=["top_p_boundary_kept", "temperature_ignored", "top_k_ties_dropped"])
def test_planted_mistakes_fail(monkeypatch, planted, kind):
    cases = [SamplingFilterCase(kind, 8, 6, seed) for seed in range(20)]
    for case in cases:
        prop_sampling_filter(case, DEVICE)
    monkeypatch.setattr(sampler, "filtered_probs", planted)
    failed = []
    for case in cases:
        try:
            prop_sampling_filter(case, DEVICE)
        except OracleFailure as exc:
            assert exc.oracle == "sampling_filter"
            failed.append(case.seed)
    assert failed, f"{planted.__name__} passed every case"
