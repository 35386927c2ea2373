"""Random streams (contract section 12): the engine's draft noise, acceptance coins and
final coins, as `specdec.sampler.batch_sampling` builds them for a round.

Observables: the noise and coins batch_sampling draws for a batch. Reference: the uniform
distribution (chi-square, harness/laws/distribution.py chi2_critical). Strategy:
stream_configs, here."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

import numpy as np
from hypothesis import strategies as st

from harness.laws.distribution import chi2_critical
from harness.base.failure import OracleFailure
from specdec.request import Req
from specdec.sampler import batch_sampling
from specdec.sampling_params import SamplingParams
from harness.laws.declaration import Law
from harness.strategies.tiers import fixed_strategy

NAME = "random_streams"  # the law whose checks this module raises (OracleFailure)

ALPHA = 1e-6
GRID = 8


@dataclass(frozen=True)
class StreamConfig:
    engine_seed: int
    num_steps: int
    ndt: int
    seed: int          # request seeds and positions are drawn from it
    n: int = 2048      # requests

    def to_dict(self) -> dict:
        return asdict(self)


def stream_configs():
    return st.builds(StreamConfig, st.integers(0, 2**31 - 1), st.integers(1, 5),
                     st.integers(2, 8), st.integers(0, 2**31 - 1))


def _independence(x: np.ndarray, y: np.ndarray, what: str) -> float:
    """Chi-square test of independence of two [0, 1) samples on a GRID x GRID table."""
    if np.array_equal(x, y):
        raise OracleFailure(NAME, NAME, f"{what}: the two streams drew identical coins")
    table = np.zeros((GRID, GRID))
    np.add.at(table, (np.minimum(x * GRID, GRID - 1).astype(int),
                      np.minimum(y * GRID, GRID - 1).astype(int)), 1)
    expect = np.outer(table.sum(1), table.sum(0)) / table.sum()
    stat = float(((table - expect) ** 2 / np.maximum(expect, 1e-12)).sum())
    crit = chi2_critical((GRID - 1) ** 2, ALPHA)
    if stat > crit:
        raise OracleFailure(NAME, NAME, f"{what}: chi2 {stat:.1f} > {crit:.1f} "
                                              f"(df {(GRID - 1) ** 2}, alpha {ALPHA}, n {len(x)})")
    return stat


def _uniform(x: np.ndarray, what: str) -> float:
    """Chi-square goodness of fit of a sample to the uniform law on [0, 1), GRID^2 bins."""
    bins = GRID * GRID
    if x.min() < 0 or x.max() >= 1:
        raise OracleFailure(NAME, NAME, f"{what}: a coin outside [0, 1)")
    counts = np.bincount(np.minimum(x * bins, bins - 1).astype(int), minlength=bins)
    e = len(x) / bins
    stat = float(((counts - e) ** 2 / e).sum())
    crit = chi2_critical(bins - 1, ALPHA)
    if stat > crit:
        raise OracleFailure(NAME, NAME, f"{what}: not uniform, chi2 {stat:.1f} > {crit:.1f}")
    return stat


def _unseeded(cfg: StreamConfig) -> None:
    reqs = [Req(i, [1], 1, SamplingParams(1.0)) for i in range(cfg.n)]
    position = random.Random(cfg.seed).randrange(1, 1 << 20)
    other_seed = (cfg.engine_seed + 1 + cfg.seed % 1000) % 2**31
    coins = [batch_sampling(reqs, engine_seed=s, positions=[position] * cfg.n, n_accept=cfg.ndt,
                            device="cpu").final_coins.numpy()
             for s in (cfg.engine_seed, other_seed)]
    _uniform(coins[0], f"final coins of {cfg.n} unseeded requests at one position")
    _independence(coins[0], coins[1], f"unseeded requests' final coins under engine seeds "
                                      f"{cfg.engine_seed} and {other_seed}")


def prop_random_streams(cfg: StreamConfig, device: str | None = None) -> None:
    """Draft noise, acceptance coins and final coins are pairwise independent: over N requests
    with distinct seeds at drawn positions, every pair of streams (and draft coin i against
    acceptance coin i) passes a chi-square independence test at alpha 1e-6 (identical draws
    fail outright); each stream is uniform on [0, 1) (chi-square goodness of fit); and a request's coins do not depend on the batch it is in (the batch reversed
    gives each request the same coins).

    Requests that name no seed: their streams are keyed by the engine seed and the request
    id. At one shared position, N unseeded requests' final coins are uniform over the
    requests (so the id is in the key), and independent of the same requests' coins under
    another engine seed (so the engine seed is in the key)."""
    rng = random.Random(cfg.seed)
    reqs = [Req(i, [1], 1, SamplingParams(1.0, seed=rng.randrange(2**62))) for i in range(cfg.n)]
    positions = [rng.randrange(1, 1 << 20) for _ in reqs]
    bs = batch_sampling(reqs, engine_seed=cfg.engine_seed, positions=positions, n_accept=cfg.ndt,
                        device="cpu", n_draft=cfg.num_steps)
    draft, accept = bs.draft_coins.numpy(), bs.accept_coins.numpy()
    final = bs.final_coins.numpy()
    pairs = [(draft[:, 0], accept[:, 0], "draft coin 0 vs acceptance coin 0"),
             (accept[:, 0], final, "acceptance coin 0 vs final coin"),
             (draft[:, 0], final, "draft coin 0 vs final coin")]
    pairs += [(draft[:, i], accept[:, i], f"draft coin {i} vs acceptance coin {i}")
              for i in range(1, min(cfg.num_steps, cfg.ndt))]
    for x, y, what in pairs:
        _independence(x, y, what)
    for x, what in ((draft, "draft coins"), (accept, "acceptance coins"), (final, "final coins")):
        _uniform(x.reshape(-1), what)
    back = batch_sampling(reqs[::-1], engine_seed=cfg.engine_seed, positions=positions[::-1],
                          n_accept=cfg.ndt, device="cpu",
                          n_draft=cfg.num_steps)
    for name in ("draft_coins", "accept_coins", "final_coins"):
        if not np.array_equal(getattr(back, name).numpy()[::-1], getattr(bs, name).numpy()):
            raise OracleFailure(NAME, NAME, f"{name}: a request's coins depend on its "
                                                  "place in the batch")
    _unseeded(cfg)


LAW = Law(
    name="random_streams", rank=130, prop=prop_random_streams, config=StreamConfig,
    summary="the three random streams: independent, uniform, batch invariant, keyed by engine "
            "seed and request id when a request names no seed (section 12)",
    strategy=fixed_strategy(stream_configs),
    controls=("tests/test_laws_not_vacuous.py::test_streams_law_rejects_a_shared_stream",
              "cases/draft_noise_shares_accept_stream"))
