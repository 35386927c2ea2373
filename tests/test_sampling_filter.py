"""The sampling_filter law (harness/laws/sampling_filter.py): it holds for the engine's filter
over generated cases, and it is not vacuous: planted mistakes in the filter (the top-p
boundary token kept, the temperature ignored, top-k ties dropped) each fail it; so do
filters that are off yet change something (a tail cut by rounding at top_p = 1 or just
below, a renormalisation that changes bits), on the long flat tails of the "tail" kind,
where the old strategy (exact / random rows, vocabularies up to 100) misses the near-1 cut."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings

from harness.base.failure import OracleFailure
from harness.laws.sampling_filter import (SMALL_VOCABS, TAIL_VOCABS, SamplingFilterCase,
                                          prop_sampling_filter, sampling_filter_cases)
from specdec import sampler

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
RIGHT = sampler.filtered_probs
# The old strategy's reach (kinds exact / random, vocab <= 100), and the new kind's.
OLD_CASES = [SamplingFilterCase(kind, v, 6, seed) for kind in ("exact", "random")
             for v in SMALL_VOCABS for seed in range(10)]
TAIL_CASES = [SamplingFilterCase("tail", v, 3, seed) for v in TAIL_VOCABS for seed in range(10)]


@settings(deadline=None)
@given(case=sampling_filter_cases())
@example(case=SamplingFilterCase("tail", 32000, 3, 9))
@example(case=SamplingFilterCase("tail", 50257, 2, 1))
def test_generated_cases_pass(case):
    prop_sampling_filter(case, DEVICE)


def _boundary_kept(logits, *, temperature, top_k, top_p, **flags):
    return RIGHT(logits, temperature=temperature, top_k=top_k,
                 top_p=torch.where(top_p < 1, top_p + 1e-6, top_p), **flags)


def _temperature_ignored(logits, *, temperature, top_k, top_p, **flags):
    return RIGHT(logits, temperature=torch.ones_like(temperature), top_k=top_k, top_p=top_p,
                 **flags)


def _ties_dropped(logits, *, temperature, top_k, top_p, **flags):
    """Top-k by index (torch.topk): exactly k tokens, a tie with the k-th cut."""
    probs = RIGHT(logits, temperature=temperature, top_k=torch.zeros_like(top_k), top_p=top_p,
                  **flags)
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
    assert _failures(cases, ""), f"{planted.__name__} passed every case"


def _top_p(logits, *, temperature, top_k, top_p, cut_k, cut_p, guard):
    """The engine's top-p as it was: the mass before each token by a float32 cumsum of the
    float32 softmax, compared with top_p (not with top_p times the row's total); the
    top_p < 1 guard kept or not. Renormalises only rows with top_p < 1, so that what fails is
    the cut, not the bits of an uncut row."""
    probs = RIGHT(logits, temperature=temperature, top_k=top_k, top_p=torch.ones_like(top_p),
                  cut_k=cut_k, cut_p=False)
    if not cut_p:
        return probs
    p_sorted, order = torch.sort(probs, dim=-1, descending=True)
    top_p = top_p[:, None, None]
    drop_sorted = (torch.cumsum(p_sorted, -1) - p_sorted) >= top_p
    if guard:
        drop_sorted &= top_p < 1.0
    probs = probs.masked_fill(torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted), 0.0)
    return torch.where(top_p < 1.0, probs / probs.sum(-1, keepdim=True), probs)


def _guard_dropped_fp32_mass(logits, *, temperature, top_k, top_p, cut_k=True, cut_p=True):
    """No top_p < 1 guard, float32 mass: at top_p = 1 a tail whose rounded mass before
    reaches 1.0 is cut."""
    return _top_p(logits, temperature=temperature, top_k=top_k, top_p=top_p, cut_k=cut_k,
                  cut_p=cut_p, guard=False)


def _fp32_mass_near_one(logits, *, temperature, top_k, top_p, cut_k=True, cut_p=True):
    """The guard kept, float32 mass against top_p: at top_p just below 1 (0.9999..0.999999)
    the float32 softmax's error in its own sum over a long tail (up to ~1e-4) cuts tokens
    whose true mass before is well below top_p."""
    return _top_p(logits, temperature=temperature, top_k=top_k, top_p=top_p, cut_k=cut_k,
                  cut_p=cut_p, guard=True)


def _always_renormalised(logits, *, temperature, top_k, top_p, cut_k=True, cut_p=True):
    """probs / probs.sum() on every row, filters off or not: the support and every value
    within 1e-7, but not the plain softmax's bits."""
    probs = RIGHT(logits, temperature=temperature, top_k=top_k, top_p=top_p, cut_k=cut_k,
                  cut_p=cut_p)
    return probs / probs.sum(-1, keepdim=True)


def _failures(cases, check: str, device: str = DEVICE) -> list[SamplingFilterCase]:
    """The cases the law fails, each by the named check (a word of its detail)."""
    failed = []
    for case in cases:
        try:
            prop_sampling_filter(case, device)
        except OracleFailure as exc:
            assert exc.check == "sampling_filter"
            assert check in exc.detail, exc.detail
            failed.append(case)
    return failed


def test_tail_cases_pass():
    for case in TAIL_CASES:
        prop_sampling_filter(case, DEVICE)


@pytest.mark.parametrize("planted,check", [(_guard_dropped_fp32_mass, "support"),
                                           (_fp32_mass_near_one, "support"),
                                           (_always_renormalised, "bit for bit")],
                         ids=["top_p_guard_dropped_fp32_mass", "fp32_mass_near_one",
                              "always_renormalised"])
def test_planted_tail_mistakes_fail(monkeypatch, planted, check):
    """On the CPU: the float32 rounding these mistakes rely on is the CPU softmax's. On an
    H100 the CUDA softmax sums a tail more exactly, and _fp32_mass_near_one cut nothing in
    these cases (2026-11-25); the law is the same Python on either device."""
    monkeypatch.setattr(sampler, "filtered_probs", planted)
    assert _failures(TAIL_CASES, check, "cpu"), f"{planted.__name__} passed every tail case"


def test_old_strategy_misses_the_near_one_cut(monkeypatch):
    """A negative control of the support family that the old strategy misses and the new
    kind catches: _fp32_mass_near_one (the engine's own cut before the fix, less its
    renormalisation of uncut rows) passes every old-kind case; only long flat tails with
    top_p just below 1 expose it. (_guard_dropped_fp32_mass is caught on old kinds too, now
    that the support check exists: random rows have tokens of probability < 1e-7, whose
    rounded mass before reaches 1.0; the old law, with its 1e-5 tolerance, missed both.)"""
    monkeypatch.setattr(sampler, "filtered_probs", _fp32_mass_near_one)
    assert not _failures(OLD_CASES, "support", "cpu")  # the CPU: see the test above
    assert _failures(TAIL_CASES, "support", "cpu")
