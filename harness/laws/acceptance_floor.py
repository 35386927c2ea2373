"""Law acceptance_floor: on held-out text, the trained pair's mean accept length for a
configuration does not fall below the committed baseline for that configuration, beyond what
chance over the rounds run allows.

Observables: per request, its per-round accept lengths (`RequestOutput.accept_lens`); the
trained pair and its held-out prompts (harness.strategies.trained_pair.py); the committed
baselines (acceptance_baselines.json beside this file, written by `python -m harness
acceptance --write-baseline`, one table per device kind and dtype).

The bound. Let X_1..X_n be the accept lengths of the n request-rounds run (each in
[1, num_steps + 1]), with sample mean m and sample standard deviation s. If the
configuration's true mean accept length is still at least the baseline b (no regression),
then by the central limit theorem P(m < b - z_{1-alpha} * s / sqrt(n)) is about alpha. So the
law fails only when m < b - z_{1-alpha} s / sqrt(n): a regression declared at false-alarm rate
alpha = 1e-3 (z = 3.09), with a margin that shrinks as more rounds are run, not a slack tuned
by hand. When the measurement's prompt set differs from the baseline's (another --prompts),
the baseline is an estimate from other text: its own standard error joins the margin,
z * sqrt(s^2/n + s_b^2/n_b) (difference of two independent means). Rounds of one request
are not independent; the same held-out prompts (paired) make the comparison one of
numerics and code, for which the bound is conservative.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from statistics import NormalDist

from harness.base.failure import OracleFailure
from harness.strategies.trained_pair import Measured, measure, trained_pair
from harness.laws.declaration import Law, Slice
from specdec.defaults import PAGE_SIZE

NAME = "acceptance_floor"  # the law whose checks this module raises (OracleFailure)

ALPHA = 1e-3
Z = NormalDist().inv_cdf(1 - ALPHA)
BASELINES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "acceptance_baselines.json")


def device_key(device: str, dtype: str) -> str:
    """'cpu-float32', 'cuda-bfloat16': baselines are per device kind and dtype."""
    return f"{device.split(':')[0]}-{dtype}"


def config_key(drafter: str, topk: int, num_steps: int, ndt: int) -> str:
    return f"{drafter} topk={topk} steps={num_steps} ndt={ndt}"


def parse_config_key(key: str) -> tuple[str, int, int, int]:
    drafter, *rest = key.split()
    vals = dict(r.split("=") for r in rest)
    return drafter, int(vals["topk"]), int(vals["steps"]), int(vals["ndt"])


def load_baselines(path: str = BASELINES) -> dict:
    if not os.path.exists(path):
        return {"alpha": ALPHA, "pair": None, "tables": {}}
    with open(path) as f:
        return json.load(f)


def baseline_table(device: str, dtype: str, path: str = BASELINES, pair=None) -> dict:
    """config key -> {"mean", "std", "rounds", "prompts", "max_new_tokens", "prompt_len"} (0:
    whole prompts) for this device
    kind and dtype. With `pair`, refuses baselines measured on other weights or prompts."""
    doc = load_baselines(path)
    if pair is not None and doc.get("pair") not in (None, pair.identity()):
        raise ValueError(f"{path} was measured on another trained pair ({doc['pair']}), not "
                         f"{pair.identity()}: run `python -m harness acceptance "
                         "--write-baseline` on each device kind")
    return doc["tables"].get(device_key(device, dtype), {})


def lower_bound(m: Measured, base: dict, paired: bool) -> float:
    """The least mean accept length that is not a regression against `base` (see the module
    docstring): b - z * sqrt(s^2/n [+ s_b^2/n_b when not paired])."""
    var = m.std ** 2 / m.rounds + (0.0 if paired else base["std"] ** 2 / base["rounds"])
    return base["mean"] - Z * math.sqrt(var)


@dataclass(frozen=True, kw_only=True)
class FloorConfig:
    """One baselined configuration, measured along one path."""

    drafter: str
    topk: int
    num_steps: int
    ndt: int
    cuda_graph: bool = False
    page_size: int = PAGE_SIZE
    overlap: bool = False
    batch: str = "together"
    graph_bs: tuple = ()
    dtype: str = "float32"
    prompts: int = 0          # > 0: fewer held-out prompts than the baseline (unpaired bound)
    max_new_tokens: int = 0   # > 0: other output lengths than the baseline's (unpaired bound)

    def __post_init__(self) -> None:
        object.__setattr__(self, "graph_bs", tuple(self.graph_bs))

    @property
    def key(self) -> str:
        return config_key(self.drafter, self.topk, self.num_steps, self.ndt)

    @property
    def axes(self) -> tuple:
        return (self.key, self.cuda_graph, self.page_size, self.overlap, self.batch)

    def to_dict(self) -> dict:
        return asdict(self)


def check_floor(cfg: FloorConfig, m: Measured, base: dict, bound: float) -> None:
    """Raises OracleFailure when m's mean is below the bound (lower_bound)."""
    if m.mean < bound:
        raise OracleFailure(NAME, NAME, (
            f"{cfg.key} (graphs={cfg.cuda_graph} page_size={cfg.page_size} overlap="
            f"{cfg.overlap} batch={cfg.batch}): mean accept length {m.mean:.3f} over "
            f"{m.rounds} rounds < {bound:.3f} = baseline {base['mean']:.3f} - z_(1-{ALPHA:g}) "
            f"* standard error (s = {m.std:.3f})"))
    return bound


def measure_against_baseline(pair, *, cfg: FloorConfig, device: str, path: str = BASELINES,
                             n_prompts: int | None = None, max_new_tokens: int | None = None,
                             prompt_len: int | None = None):
    """(measured, baseline entry, bound) of cfg, on the baseline's own prompts and lengths
    unless others are given (then the bound is the unpaired one: the baseline's standard
    error joins the margin)."""
    table = baseline_table(device, cfg.dtype, path, pair)
    if cfg.key not in table:
        raise ValueError(f"no {device_key(device, cfg.dtype)} baseline for {cfg.key} in "
                         f"{path}: run `python -m harness acceptance --write-baseline`")
    base = table[cfg.key]
    n, new = n_prompts or base["prompts"], max_new_tokens or base["max_new_tokens"]
    plen = base["prompt_len"] if prompt_len is None else prompt_len
    m = measure(pair, drafter=cfg.drafter, topk=cfg.topk, num_steps=cfg.num_steps, ndt=cfg.ndt,
                n_prompts=n, max_new_tokens=new, device=device, dtype=cfg.dtype,
                cuda_graph=cfg.cuda_graph, page_size=cfg.page_size, overlap=cfg.overlap,
                graph_bs=cfg.graph_bs, batch=cfg.batch, prompt_len=plen)
    paired = (n, new, plen) == (base["prompts"], base["max_new_tokens"], base["prompt_len"])
    return m, base, lower_bound(m, base, paired)


def prop_acceptance_floor(cfg: FloorConfig, device: str | None = None) -> None:
    """Law (acceptance_floor): on the trained pair's held-out prompts (as many, as long, and
    with as many new tokens as its baseline used, unless cfg asks for fewer: then the
    baseline's own standard error joins the margin), greedy, the mean accept length of cfg's
    configuration along cfg's path (graphs, page size, overlap, batch) is at least baseline
    - z_{1-alpha} * s / sqrt(n), where the baseline is the committed one for that
    configuration on this device kind and dtype, s the sample standard deviation of the n per-round accept lengths,
    alpha = 1e-3. Acceptance is a property of the configuration (acceptance_path_invariant),
    so one baseline serves every path. Chains and trees; the EAGLE head and a standalone
    drafter. SPECDEC_TRAINED_PAIR may name another directory laid out like the fixture."""
    from harness.strategies.runs import default_device
    device = device or default_device()
    pair = trained_pair(os.environ.get("SPECDEC_TRAINED_PAIR"))
    m, base, bound = measure_against_baseline(pair, cfg=cfg, device=device, path=BASELINES,
                                              n_prompts=cfg.prompts or None,
                                              max_new_tokens=cfg.max_new_tokens or None)
    check_floor(cfg, m, base, bound)


def floor_configs(device: str, *, dtype: str, graphs=(False, True), page_sizes=(1, 4, 16),
                  keys: tuple | None = None, buckets=((1, 2, 4), (4, 8))):
    """The baselined configurations of this device kind and dtype, each along a drawn path:
    graphs on or off (captured sizes from `buckets`: below the batch, eager fallback until
    it shrinks; covering it, padded replays), a page size, overlap or sync, all requests at
    once or half of them later."""
    from hypothesis import strategies as st
    table = baseline_table(device, dtype)
    keys = tuple(k for k in (keys or sorted(table)) if k in table)
    if not keys:
        raise ValueError(f"no {device_key(device, dtype)} baselines in {BASELINES}: run "
                         "`python -m harness acceptance --write-baseline`")
    return st.builds(
        lambda key, **kw: FloorConfig(**dict(zip(("drafter", "topk", "num_steps", "ndt"),
                                                 parse_config_key(key))), dtype=dtype, **kw),
        st.sampled_from(keys), cuda_graph=st.sampled_from(graphs),
        page_size=st.sampled_from(page_sizes), overlap=st.booleans(),
        batch=st.sampled_from(("together", "halves")), graph_bs=st.sampled_from(buckets))


# The CPU tier's floors: a chain and a tree per drafter (the gate runs every configuration).
CPU_FLOORS = ("eagle topk=1 steps=3 ndt=4", "eagle topk=4 steps=4 ndt=8",
              "standalone topk=1 steps=3 ndt=4", "standalone topk=2 steps=3 ndt=6")


def floor_space(on_gpu: bool, fixed: dict):
    if on_gpu:
        return floor_configs("cuda", dtype="bfloat16", buckets=((1, 2, 4), (1, 2, 4, 8, 16, 32)))
    return floor_configs("cpu", dtype="float32", keys=CPU_FLOORS)


LAW = Law(
    name="acceptance_floor", rank=210, prop=prop_acceptance_floor, config=FloorConfig,
    summary="the trained pair's mean accept length on held-out text stays above its "
            "committed baseline's bound",
    strategy=floor_space, slices=(Slice(fraction=5),),  # each example runs held-out prompts
    controls=("tests/test_acceptance_laws.py::test_floor_rejects_a_draft_side_fault",))
