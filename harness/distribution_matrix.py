"""Oracle 7 over the sampling space: the chi-square pair law of harness/distribution.py for a
drawn cell of temperature x top-k x top-p x drafting x draft shape x graphs.

Drawn: temperature in {0.2, 0.7, 1.0, 1.8} (below 0.3 and above 1.5), top_k in {0 (the whole
vocabulary), 1, 5}, top_p in {1.0, 0.3 (a cut inside the head), 0.95 (inside the tail)};
drafts eagle (accepts little), self (accepts nearly all), perturbed (in between); chain or
tree; greedy or probabilistic drafting (probabilistic applies to chains); CUDA graphs (the
CPU stand-in) or eager. alpha = 1e-4 per check; N = 400 pairs on the ci / dev / gpu
profiles, 2000 on nightly."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from hypothesis import settings
from hypothesis import strategies as st

from harness.distribution import check_sampled_distribution
from harness.runs import default_device
from harness.strategies import TEMPERATURES, TOP_KS, TOP_PS
from specdec import Engine, SpecConfig

ALPHA = 1e-4
SHAPES = {"chain": (1, 3, 4), "tree": (2, 3, 5)}
GRAPH_BATCH = 64  # graphs: the samples run in batches of one captured size


@dataclass(frozen=True)
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

    def to_dict(self) -> dict:
        return asdict(self)


def distribution_configs(graphs=(False, True)):
    n = 2000 if settings._current_profile == "nightly" else 400
    return st.builds(DistConfig, st.sampled_from(("eagle", "self", "perturbed")),
                     st.sampled_from(tuple(SHAPES)), st.sampled_from(("greedy", "probabilistic")),
                     st.sampled_from(TEMPERATURES), st.sampled_from(TOP_KS),
                     st.sampled_from(TOP_PS), st.sampled_from(graphs),
                     st.integers(0, 2**31 - 1), st.just(n))


def dist_engine(cfg: DistConfig, device: str) -> Engine:
    spec = SpecConfig(*SHAPES[cfg.shape], draft_sampling=cfg.draft_sampling)
    batch = GRAPH_BATCH if cfg.cuda_graph else cfg.n
    return Engine(model="tiny", spec=spec, draft=cfg.draft, device=device, max_batch=batch,
                  max_context=32, cuda_graph=cfg.cuda_graph, cuda_graph_bs=[GRAPH_BATCH],
                  seed=cfg.seed % 97)


def prop_sampled_distribution(cfg: DistConfig, device: str | None = None) -> dict:
    """Sampled speculative decoding is lossless in distribution: the first two tokens of N
    seeded runs of one prompt follow p(t1) p(t2 | t1) of the dense reference's filtered
    target distribution (chi-square, alpha 1e-4), and no pair of probability 0 is drawn,
    in every drawn cell of the matrix."""
    device = device or default_device()
    rng = random.Random(cfg.seed)
    prompt = [rng.randrange(320) for _ in range(rng.randint(3, 8))]
    return check_sampled_distribution(dist_engine(cfg, device), prompt, cfg.n, cfg.temperature,
                                      cfg.top_k, cfg.top_p, seed=cfg.seed, alpha=ALPHA)
