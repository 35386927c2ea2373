"""Oracle 7, sampled lossless: the speculative engine's sampled tokens follow the target's
exact (temperature / top-k / top-p filtered) distribution.

Law. For one prompt and N runs with distinct seeds, the pair (t1, t2) of the first two
generated tokens is distributed as p(t1) * p(t2 | t1), where p is softmax(logits / T) of the
dense reference (harness/reference.py) filtered by top-k then top-p and renormalised. t1 comes
from prefill, t2 from the first speculative round (accepted draft or recovered / bonus
token), so the pair exercises the acceptance rule whatever the draft proposes.

Test. Pearson chi-square over the cells (t1, t2) with expected count N*p >= 5; every other
cell is pooled into one bin, merged into the smallest bin when its own expectation is < 5.
Bins depend on the exact probabilities only, never on the data. The run fails when the
statistic exceeds the chi-square critical value at alpha (default 1e-4), i.e. a correct
engine fails with probability ~alpha per check (asymptotic chi-square; the >= 5 rule keeps
the approximation good). A pair whose exact probability is 0 (outside top-k / top-p) fails
at once. Everything is computed in float64, independently of specdec/sampler.py.
"""
from __future__ import annotations

import math
from collections import Counter
from statistics import NormalDist

import numpy as np
import torch

from harness.oracles import OracleFailure
from harness.reference import reference_prefill
from specdec.sampling_params import SamplingParams

MIN_EXPECTED = 5.0


def filtered_probs(logits: torch.Tensor, temperature: float, top_k: int,
                   top_p: float) -> np.ndarray:
    """softmax(logits / T), keep the top_k largest logits (ties with the k-th kept), then the
    smallest prefix by descending prob whose mass before the last kept token is < top_p."""
    x = logits.double().cpu().numpy() / temperature
    if top_k:
        x = np.where(x < np.sort(x)[::-1][top_k - 1], -np.inf, x)
    p = np.exp(x - x.max())
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        before = np.cumsum(p[order]) - p[order]
        p[order[before >= top_p]] = 0.0
        p /= p.sum()
    return p


def exact_pair_probs(model, prompt: list[int], n: int, temperature: float, top_k: int = 0,
                     top_p: float = 1.0, device="cpu") -> dict[int, np.ndarray]:
    """t1 -> p(t1) * p(. | t1), for each t1 that can hold a cell with N*p >= 5; the marginal
    p(t1) of every t1 under key -1 (the rest is pooled from it)."""
    logits = reference_prefill(model, prompt, device)[0][-1]
    p1 = filtered_probs(logits, temperature, top_k, top_p)
    out = {-1: p1}
    for t1 in np.nonzero(n * p1 >= MIN_EXPECTED)[0].tolist():
        nxt = reference_prefill(model, prompt + [t1], device)[0][-1]
        out[t1] = p1[t1] * filtered_probs(nxt, temperature, top_k, top_p)
    return out


def sample_pairs(engine, prompt: list[int], n: int, temperature: float, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0) -> list[tuple[int, int]]:
    """N seeded runs, batched max_batch at a time (a seed's tokens do not depend on the batch)."""
    pairs = []
    for start in range(0, n, engine.max_batch):
        m = min(engine.max_batch, n - start)
        params = [SamplingParams(temperature, top_k, top_p, seed + start + i) for i in range(m)]
        outs = engine.generate([list(prompt)] * m, max_new_tokens=2, sampling=params)
        pairs += [(o[0], o[1]) for o in outs]
    return pairs


def chi2_critical(df: int, alpha: float) -> float:
    try:
        from scipy.stats import chi2
        return float(chi2.isf(alpha, df))
    except ImportError:  # Wilson-Hilferty: within a few percent for df >= 1 at these alphas
        z = NormalDist().inv_cdf(1.0 - alpha)
        return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def check_pairs(pairs: list[tuple[int, int]], exact: dict[int, np.ndarray], alpha: float = 1e-4,
                what: str = "") -> dict:
    """Raises OracleFailure when the pairs do not follow `exact`; returns the statistic."""
    n, p1 = len(pairs), exact[-1]
    counts = Counter(pairs)
    cells, expected = [], []
    for t1, row in exact.items():
        if t1 >= 0:
            for t2 in np.nonzero(n * row >= MIN_EXPECTED)[0].tolist():
                cells.append((t1, t2))
                expected.append(n * row[t2])
    for (t1, t2), c in counts.items():
        if p1[t1] == 0 or (t1 in exact and exact[t1][t2] == 0):
            raise OracleFailure("sampled_distribution",
                                f"{what}: ({t1}, {t2}) drawn {c} times, exact probability 0")
    observed = [counts.get(c, 0) for c in cells]
    rest_e, rest_o = n - sum(expected), n - sum(observed)
    if rest_e >= MIN_EXPECTED or not cells:
        expected.append(rest_e)
        observed.append(rest_o)
    else:  # too little pooled mass for its own bin: fold it into the smallest one
        i = int(np.argmin(expected))
        expected[i] += rest_e
        observed[i] += rest_o
    e, o = np.asarray(expected), np.asarray(observed, dtype=np.float64)
    stat = float(((o - e) ** 2 / e).sum())
    df = len(e) - 1
    if df < 1:  # (almost) all mass on one pair: only the zero-probability check above applies
        return {"chi2": 0.0, "critical": float("inf"), "df": 0, "n": n}
    crit = chi2_critical(df, alpha)
    if stat > crit:
        worst = np.argsort(-(o - e) ** 2 / e)[:3]
        detail = ", ".join(f"{cells[i] if i < len(cells) else 'rest'}: {int(o[i])} vs "
                           f"{e[i]:.1f}" for i in worst)
        raise OracleFailure("sampled_distribution",
                            f"{what}: chi2={stat:.1f} > {crit:.1f} (df={df}, alpha={alpha}, "
                            f"n={n}); worst cells {detail}")
    return {"chi2": stat, "critical": crit, "df": df, "n": n}


def check_sampled_distribution(engine, prompt: list[int], n: int, temperature: float,
                               top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                               alpha: float = 1e-4) -> dict:
    """The oracle: sample N pairs from `engine`, compare with the dense reference's law."""
    exact = exact_pair_probs(engine.target, prompt, n, temperature, top_k, top_p, engine.device)
    pairs = sample_pairs(engine, prompt, n, temperature, top_k, top_p, seed)
    what = f"T={temperature} top_k={top_k} top_p={top_p} spec={engine.spec}"
    return check_pairs(pairs, exact, alpha, what)
