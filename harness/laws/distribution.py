"""Law sampled_distribution (oracle 7), sampled lossless: the speculative engine's sampled
tokens follow the target's exact (temperature / top-k / top-p filtered) distribution.

Law. For one prompt and N runs with distinct seeds, the pair (t1, t2) of the first two
generated tokens is distributed as p(t1) * p(t2 | t1), where p is softmax(logits / T) of the
dense reference (harness/references/dense.py) filtered by top-k then top-p and
renormalised. t1 comes from prefill, t2 from the first speculative round (accepted draft or
recovered / bonus token), so the pair exercises the acceptance rule whatever the draft
proposes.

Test. Pearson chi-square, three ways (check_pairs): the cells (t1, t2) with expected count
N*p >= 5 (the rest pooled), t1 by probability-quantile group, and t2 by its quantile group
within p(. | t1), so that flat distributions (high temperature), where no pair cell reaches
5, are tested too. Bins expecting < 5 are merged. Bins depend on the exact probabilities
only, never on the data. A sample is rejected when a statistic exceeds the chi-square
critical value at alpha / 3 (alpha default 1e-4), i.e. with probability ~alpha for a correct
engine (asymptotic chi-square); the law fails when a fresh sample twice as large is rejected
too (harness/laws/confirm.py): ~alpha^2. A pair whose exact probability is 0 (outside
top-k / top-p) fails at once. Everything is computed in float64, independently of
specdec/sampler.py.

Drawn (prop_sampled_distribution, the suite law): a cell of temperature in {0.2, 0.7, 1.0,
1.8} (below 0.3 and above 1.5), top_k in {0 (the whole vocabulary), 1, 5}, top_p in {1.0,
0.3 (a cut inside the head), 0.95 (inside the tail)}; drafts eagle (accepts little), self
(accepts nearly all), perturbed (in between); chain or tree; greedy or probabilistic
drafting (probabilistic applies to chains); CUDA graphs (the CPU stand-in) or eager.
alpha = 1e-4 per check; N = 400 pairs on the ci / dev / gpu profiles, 2000 on nightly.
Observables: the first two output tokens of N seeded runs of one prompt. Reference:
harness/references/dense.py. Value sets: harness/strategies/configs.py.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np
import torch
from hypothesis import settings
from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.laws.chi2 import chi2_isf
from harness.laws.confirm import StatisticalRejection, confirmed
from harness.references.dense import reference_prefill
from harness.strategies.configs import TEMPERATURES, TOP_KS, TOP_PS
from harness.strategies.runs import default_device
from specdec import Engine, SpecConfig
from specdec.sampling_params import SamplingParams
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import graphs_of

NAME = "sampled_distribution"  # the law whose checks this module raises (OracleFailure)

MIN_EXPECTED = 5.0
QUANTILES = 8


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


def exact_pair_probs(model, *, prompt: list[int], n: int, temperature: float, top_k: int = 0,
                     top_p: float = 1.0, device="cpu") -> dict[int, np.ndarray]:
    """t1 -> p(t1) * p(. | t1) for every t1 of probability > 0; the marginal p(t1) under
    key -1. (One reference prefill per possible t1: the harness samples the tiny model.)"""
    logits = reference_prefill(model, prompt, device)[0][-1]
    p1 = filtered_probs(logits, temperature, top_k, top_p)
    out = {-1: p1}
    for t1 in np.nonzero(p1 > 0)[0].tolist():
        nxt = reference_prefill(model, prompt + [t1], device)[0][-1]
        out[t1] = p1[t1] * filtered_probs(nxt, temperature, top_k, top_p)
    return out


GREEDY_ROWS = 8  # greedy requests interleaved into a sampled batch (greedy_every)


def sample_pairs(engine, *, prompt: list[int], n: int, temperature: float, top_k: int = 0,
                 top_p: float = 1.0, seed: int | None = 0, greedy_every: int = 0):
    """N seeded runs, batched max_batch at a time (a seed's tokens do not depend on the batch);
    seed None: no request names a seed, the engine derives each one's. greedy_every > 0: in
    the first batch, the positions that are multiples of it (GREEDY_ROWS of them at most) hold
    greedy requests of the same prompt, so the sampled requests are not a prefix of their
    batch. Returns (sampled pairs, greedy pairs with their batch positions)."""
    pairs, greedy = [], []
    done = 0
    while done < n:
        kinds = []  # per batch position: None (greedy) or the sampled request's index
        for b in range(engine.max_batch):
            if (greedy_every and not pairs and b % greedy_every == 0
                    and b // greedy_every < GREEDY_ROWS):
                kinds.append(None)
            elif done < n:
                kinds.append(done)
                done += 1
        while kinds and kinds[-1] is None:  # a batch ends on a sampled request
            kinds.pop()
        params = [SamplingParams() if i is None else
                  SamplingParams(temperature, top_k, top_p, None if seed is None else seed + i)
                  for i in kinds]
        outs = engine.generate([list(prompt)] * len(kinds), max_new_tokens=2, sampling=params)
        for b, (i, o) in enumerate(zip(kinds, outs)):
            if i is None:
                greedy.append((b, (o[0], o[1])))
            else:
                pairs.append((o[0], o[1]))
    return pairs, greedy


def chi2_critical(df: int, alpha: float) -> float:
    """Exact (harness/laws/chi2.py): the same threshold on every machine, scipy or not."""
    return chi2_isf(alpha, df)


def _chi2(observed: list[float], expected: list[float], alpha: float, what: str,
          labels: list) -> dict:
    """Pearson chi-square; bins expecting < 5 are folded into the smallest bin. A single bin
    tests nothing (df 0) and passes."""
    obs, exp, lab = list(observed), list(expected), list(labels)
    while len(exp) > 1 and min(exp) < MIN_EXPECTED:
        i = int(np.argmin(exp))
        o, e, name = obs.pop(i), exp.pop(i), lab.pop(i)
        j = int(np.argmin(exp))
        obs[j] += o
        exp[j] += e
        lab[j] = f"{lab[j]}+{name}"
    e, o = np.asarray(exp, dtype=np.float64), np.asarray(obs, dtype=np.float64)
    df = len(e) - 1
    if df < 1:
        return {"chi2": 0.0, "critical": float("inf"), "df": 0}
    stat = float(((o - e) ** 2 / e).sum())
    crit = chi2_critical(df, alpha)
    if stat > crit:
        worst = np.argsort(-(o - e) ** 2 / e)[:3]
        detail = ", ".join(f"{lab[i]}: {int(o[i])} vs {e[i]:.1f}" for i in worst)
        raise StatisticalRejection(NAME, NAME,
                            f"{what}: chi2={stat:.1f} > {crit:.1f} (df={df}, alpha={alpha:.1e}, "
                            f"n={int(o.sum())}); worst bins {detail}")
    return {"chi2": stat, "critical": crit, "df": df}


def quantile_groups(row: np.ndarray, k: int = QUANTILES) -> np.ndarray:
    """Group of every token of a probability row: tokens sorted by probability (descending,
    ties by id), token in group floor(k * mass strictly before it). Depends on the row only."""
    order = np.argsort(-row, kind="stable")
    before = np.cumsum(row[order]) - row[order]
    g = np.empty(len(row), dtype=np.int64)
    g[order] = np.minimum((before * k).astype(np.int64), k - 1)
    return g


def check_pairs(pairs: list[tuple[int, int]], exact: dict[int, np.ndarray], alpha: float = 1e-4,
                what: str = "") -> dict:
    """Raises OracleFailure when the pairs do not follow `exact`; returns the statistics.

    Three chi-square tests at alpha / 3 each, bins fixed by the exact law alone: (1) the pair
    cells (t1, t2) expecting >= 5, the rest pooled; (2) t1 by probability quantile group of
    p(t1); (3) t2 by its quantile group in p(. | t1), pooled over t1 (expected count of group
    g: N * sum over t1 of p(t1) * mass of g in p(. | t1)). (2) and (3) keep their power when
    the distribution is too flat for (1) to have cells (high temperature)."""
    n, p1 = len(pairs), exact[-1]
    counts = Counter(pairs)
    for (t1, t2), c in counts.items():
        if p1[t1] == 0 or exact[t1][t2] == 0:
            raise OracleFailure(NAME, NAME,
                                f"{what}: ({t1}, {t2}) drawn {c} times, exact probability 0")
    cells = [(t1, t2) for t1, row in exact.items() if t1 >= 0
             for t2 in np.nonzero(n * row >= MIN_EXPECTED)[0].tolist()]
    e_cells = [n * exact[t1][t2] for t1, t2 in cells]
    o_cells = [counts.get(c, 0) for c in cells]
    pairs_test = _chi2(o_cells + [n - sum(o_cells)], e_cells + [n - sum(e_cells)], alpha / 3,
                       f"{what} pairs", cells + ["rest"])
    g1 = quantile_groups(p1)
    e1 = [n * p1[g1 == g].sum() for g in range(QUANTILES)]
    o1 = np.bincount([g1[t1] for t1, _ in pairs], minlength=QUANTILES).tolist()
    first = _chi2(o1, e1, alpha / 3, f"{what} t1 quantile groups", list(range(QUANTILES)))
    groups = {t1: quantile_groups(row / p1[t1]) for t1, row in exact.items() if t1 >= 0}
    e2 = [n * sum(row[groups[t1] == g].sum() for t1, row in exact.items() if t1 >= 0)
          for g in range(QUANTILES)]
    o2 = np.bincount([groups[t1][t2] for t1, t2 in pairs], minlength=QUANTILES).tolist()
    second = _chi2(o2, e2, alpha / 3, f"{what} t2 quantile groups", list(range(QUANTILES)))
    return {"n": n, "pairs": pairs_test, "t1": first, "t2": second}


def check_sampled_distribution(engine, *, prompt: list[int], n: int, temperature: float,
                               top_k: int = 0, top_p: float = 1.0, seed: int | None = 0,
                               alpha: float = 1e-4, greedy_every: int = 0) -> dict:
    """The oracle: sample N pairs from `engine`, compare with the dense reference's law; the
    greedy requests sharing their batches (greedy_every) emit the reference's greedy pair.
    A rejection by the chi-square tests stands only if a fresh sample of CONFIRM * N pairs
    (seeds after the first N's; unseeded, the engine's next request ids) is rejected too
    (harness/laws/confirm.py)."""
    what = f"T={temperature} top_k={top_k} top_p={top_p} spec={engine.spec}"
    exact = exact_pair_probs(engine.target, prompt=prompt, n=n, temperature=temperature,
                             top_k=top_k, top_p=top_p, device=engine.device)
    t1 = int(np.argmax(exact[-1]))
    want = (t1, int(np.argmax(exact[t1])))  # filters keep the top token: the greedy path

    def sample(k: int, scale: int) -> dict:
        pairs, greedy = sample_pairs(engine, prompt=prompt, n=n * scale, temperature=temperature,
                                     top_k=top_k, top_p=top_p,
                                     seed=None if seed is None else seed + k * n,
                                     greedy_every=greedy_every)
        for b, got in greedy:
            if got != want:
                raise OracleFailure(NAME, NAME, f"{what}: the greedy request at batch "
                                    f"position {b} emitted {got}, the greedy path is {want}")
        return check_pairs(pairs, exact, alpha, what)
    return confirmed(sample)


# The suite law: the pair law over a drawn cell of the sampling space.
ALPHA = 1e-4
SHAPES = {"chain": dict(topk=1, num_steps=3, num_draft_tokens=4),
          "tree": dict(topk=2, num_steps=3, num_draft_tokens=5)}
GRAPH_BATCH = 64  # graphs: the samples run in batches of one captured size


@dataclass(frozen=True, kw_only=True)
class DistConfig:
    draft: str
    shape: str
    draft_sampling: str
    temperature: float
    top_k: int
    top_p: float
    cuda_graph: bool
    seed: int
    n: int = 400
    seeded: bool = True  # False: the requests name no seed; the engine derives them
    greedy_every: int = 0  # > 0: greedy requests at the batch positions it divides

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def corners(self) -> tuple:
        """Counted by `harness check`: greedy requests interleaved with the sampled ones."""
        return ("mixed_rows",) if self.greedy_every else ()


def distribution_configs(graphs=(False, True)):
    n = 2000 if settings._current_profile == "nightly" else 400
    return st.builds(DistConfig, draft=st.sampled_from(("eagle", "self", "perturbed")),
                     shape=st.sampled_from(tuple(SHAPES)),
                     draft_sampling=st.sampled_from(("greedy", "probabilistic")),
                     temperature=st.sampled_from(TEMPERATURES), top_k=st.sampled_from(TOP_KS),
                     top_p=st.sampled_from(TOP_PS), cuda_graph=st.sampled_from(graphs),
                     seed=st.integers(0, 2**31 - 1), n=st.just(n), seeded=st.booleans(),
                     greedy_every=st.sampled_from((0, 2, 4)))


def dist_engine(cfg: DistConfig, device: str) -> Engine:
    spec = SpecConfig(**SHAPES[cfg.shape], draft_sampling=cfg.draft_sampling)
    batch = GRAPH_BATCH if cfg.cuda_graph else cfg.n
    return Engine(model="tiny", spec=spec, draft=cfg.draft, device=device, max_batch=batch,
                  max_context=32, cuda_graph=cfg.cuda_graph, cuda_graph_bs=[GRAPH_BATCH],
                  seed=cfg.seed % 97)


def prop_sampled_distribution(cfg: DistConfig, device: str | None = None) -> dict:
    """Sampled speculative decoding is lossless in distribution: the first two tokens of N
    runs of one prompt follow p(t1) p(t2 | t1) of the dense reference's filtered target
    distribution (chi-square, alpha 1e-4), and no pair of probability 0 is drawn, in every
    drawn cell of the matrix; whether each request names its seed or the engine derives
    them (N requests with no seed are N independent draws, not one draw N times); and where
    greedy requests share the sampled ones' batch (at every 2nd or 4th batch position of the
    first), those emit the reference's greedy pair."""
    device = device or default_device()
    rng = random.Random(cfg.seed)
    prompt = [rng.randrange(320) for _ in range(rng.randint(3, 8))]
    return check_sampled_distribution(dist_engine(cfg, device), prompt=prompt, n=cfg.n,
                                      temperature=cfg.temperature,
                                      top_k=cfg.top_k, top_p=cfg.top_p,
                                      seed=cfg.seed if cfg.seeded else None, alpha=ALPHA,
                                      greedy_every=cfg.greedy_every)


LAW = Law(
    name="sampled_distribution", rank=120, prop=prop_sampled_distribution, config=DistConfig,
    summary="sampled tokens follow the filtered target distribution (oracle 7)",
    strategy=lambda on_gpu, fixed: distribution_configs(graphs_of(fixed)),
    slices=grid(2, cuda_graph=(False, True)),
    controls=("tests/test_laws_not_vacuous.py::test_distribution_rejects_biased_probabilistic_rule",
              "tests/test_sampling_distribution.py::test_biased_acceptance_is_caught",
              "cases/final_coin_reused"))
