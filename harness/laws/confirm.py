"""A statistical law fails on two independent samples, not one (docs/contract.md, Oracles).

A chi-square test at level alpha rejects a correct engine with probability alpha. The gate
draws hundreds of such examples a run, on fresh seeds every run, so a correct engine turned
it red now and then: on 2 H100s (2026-11-26) sampled_distribution's pairs test gave chi2 22.2
against 20.6 (p = 1.5e-5) on a cell whose next 39 samples of 400 followed the binomial,
and the same sample fails on a CPU. A rejection is therefore put to a fresh, independent
sample CONFIRM times as large before the law fails:
- a correct engine fails with probability alpha * alpha: never, at these alphas;
- a wrong one fails about as often as the first sample alone would fail it, since the larger
  sample rejects a bias at least as surely as the first did;
- the failure quotes both verdicts.
Only statistical rejections are put to a second sample: a draw of probability 0, a greedy
request off the greedy path, any deterministic violation fails at once."""
from __future__ import annotations

from typing import Callable, TypeVar

from harness.base.failure import OracleFailure

CONFIRM = 2  # the confirming sample's size, in multiples of the first's

R = TypeVar("R")


class StatisticalRejection(OracleFailure):
    """A statistical test's rejection at its alpha (as opposed to a violation no sample of a
    correct engine can show)."""


def confirmed(check_sample: Callable[[int, int], R]) -> R:
    """check_sample(k, scale) draws sample k (0: the example's own; 1: the confirming one,
    independent of it) of `scale` times the example's size and tests it, raising
    StatisticalRejection when the test rejects. The first sample's result, or, when the first
    is rejected and the confirming one is not, the confirming one's; both rejected: a
    StatisticalRejection quoting both."""
    try:
        return check_sample(0, 1)
    except StatisticalRejection as first:
        try:
            return check_sample(1, CONFIRM)
        except StatisticalRejection as second:
            raise StatisticalRejection(
                second.law, second.check,
                f"{first.detail}; and on a fresh sample {CONFIRM}x as large: "
                f"{second.detail}") from None
