"""harness/laws/confirm.py: a statistical law fails only when a fresh sample is rejected too;
deterministic violations fail at once. The laws' own controls (a biased acceptance rule, a
biased kernel) still fail through it: tests/test_laws_not_vacuous.py,
tests/test_sampling_distribution.py, tests/test_kernel_law_controls.py."""
from __future__ import annotations

import random

import pytest

from harness.base.failure import OracleFailure
from harness.laws.confirm import CONFIRM, StatisticalRejection, confirmed


def _sampler(verdicts):
    calls = []

    def check_sample(k, scale):
        calls.append((k, scale))
        v = verdicts[k]
        if isinstance(v, Exception):
            raise v
        return v
    return check_sample, calls


def test_a_rejection_a_fresh_sample_accepts_passes():
    check, calls = _sampler([StatisticalRejection("law", "law", "first"), {"second": 1}])
    assert confirmed(check) == {"second": 1}
    assert calls == [(0, 1), (1, CONFIRM)]


def test_two_rejections_fail_quoting_both():
    check, calls = _sampler([StatisticalRejection("law", "chi", "first bad"),
                             StatisticalRejection("law", "chi", "second bad")])
    with pytest.raises(StatisticalRejection, match=r"first bad; and on a fresh sample "
                                                   rf"{CONFIRM}x as large: second bad") as e:
        confirmed(check)
    assert (e.value.law, e.value.check) == ("law", "chi")


def test_an_accepted_first_sample_draws_no_second():
    check, calls = _sampler([{"first": 1}])
    assert confirmed(check) == {"first": 1} and calls == [(0, 1)]


def test_a_deterministic_violation_fails_at_once():
    check, calls = _sampler([OracleFailure("law", "support", "probability 0"), {"x": 1}])
    with pytest.raises(OracleFailure, match="probability 0"):
        confirmed(check)
    assert calls == [(0, 1)]


def test_the_gpu_gates_false_alarm_passes():
    """The sample that turned a 2-H100 gate red with nothing wrong (chi2 22.2 > 20.6 at
    p = 1.5e-5; the same draws on a CPU) is rejected alone (the control), and the law passes:
    its fresh sample is accepted."""
    from harness.laws.distribution import (DistConfig, check_pairs, dist_engine,
                                           exact_pair_probs, prop_sampled_distribution,
                                           sample_pairs)
    cfg = DistConfig(cuda_graph=True, draft="eagle", draft_sampling="greedy", greedy_every=0,
                     n=400, seed=214, seeded=False, shape="chain", temperature=0.2, top_k=0,
                     top_p=0.95)
    rng = random.Random(cfg.seed)
    prompt = [rng.randrange(320) for _ in range(rng.randint(3, 8))]
    eng = dist_engine(cfg, "cpu")
    exact = exact_pair_probs(eng.target, prompt=prompt, n=cfg.n, temperature=cfg.temperature,
                             top_k=cfg.top_k, top_p=cfg.top_p)
    pairs, _ = sample_pairs(eng, prompt=prompt, n=cfg.n, temperature=cfg.temperature,
                            top_k=cfg.top_k, top_p=cfg.top_p, seed=None)
    with pytest.raises(StatisticalRejection, match=r"chi2=22.2 > 20.6"):
        check_pairs(pairs, exact, 1e-4)
    stats = prop_sampled_distribution(cfg, "cpu")
    assert stats["n"] == CONFIRM * cfg.n  # the confirming sample's verdict
