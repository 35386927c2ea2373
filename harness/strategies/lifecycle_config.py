"""Request-lifecycle runs (continuous batching): the engine configuration, a deliberately small
KV pool so that retraction happens, and the expected output of one request."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.strategies.configs import shape_fields
from harness.strategies.runs import greedy_baseline
from harness.strategies.vocab_seams import seam_corner, seam_models
from specdec.config import max_draft_tokens
from harness.references.ties import compare_greedy
from specdec import Engine, SpecConfig
from specdec.validate import reserve_margin


@dataclass(frozen=True, kw_only=True)
class LifecycleConfig:
    topk: int
    num_steps: int
    ndt: int
    page_size: int
    draft: str
    cuda_graph: bool
    max_batch: int
    max_prompt_len: int       # requests draw prompts of 1..max_prompt_len tokens
    max_new_tokens: int       # and 1..max_new_tokens outputs
    pool_slack: int           # pool = the largest request's worst case, plus this percent of it
    seed: int = 0             # model weights (a few seeds only: the greedy baselines are cached)
    model: str = "tiny"
    dtype: str = "float32"
    graph_bs: tuple = (1, 2, 4)
    overlap: bool = False     # overlap scheduling (contract section 10)
    prefix_cache: bool = False  # radix prefix cache; the machine then also shares prefixes

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def corners(self) -> tuple:
        """Counted by `harness check`: a model biased toward the vocabulary's seams."""
        return seam_corner(self.model)

    @property
    def spec(self) -> SpecConfig:
        return SpecConfig(topk=self.topk, num_steps=self.num_steps, num_draft_tokens=self.ndt)

    @property
    def num_pages(self) -> int:
        return 1 + self.request_pages + self.request_pages * self.pool_slack // 100

    @property
    def request_pages(self) -> int:
        """Worst-case pages of the largest request this configuration draws."""
        margin = reserve_margin(self.spec, self.page_size, self.overlap)
        return -(-(self.max_prompt_len + self.max_new_tokens + margin) // self.page_size)


def small_spec_shapes(max_topk: int = 3, max_steps: int = 4, max_ndt: int = 8):
    """spec_shapes (harness/strategies/configs.py) bounded for speed, feasible by construction."""
    def with_ndt(ts):
        topk, steps = ts
        if topk == 1:
            return st.just((1, steps, steps + 1))
        return st.integers(2, min(max_draft_tokens(topk, steps), max_ndt)).map(
            lambda n: (topk, steps, n))
    return st.tuples(st.integers(1, max_topk), st.integers(1, max_steps)).flatmap(with_ndt)


def lifecycle_configs(page_sizes=(1, 2, 4, 16), max_prompt_len: int = 12, max_new_tokens: int = 16):
    """Small shapes (the CPU runs tens of 20-step examples); mostly a pool of one to two
    largest requests, so a few running requests outgrow it and retraction happens, sometimes
    one of several; drafts that accept little, everything, or a mix (perturbed)."""
    return st.builds(
        lambda shape, batch, **kw: LifecycleConfig(**shape_fields(shape), max_batch=batch[0],
                                                   graph_bs=batch[1], **kw),
        small_spec_shapes(),
        # Coarse buckets too, up to max_batch (a bucket past it is never captured): batches
        # that shrink and grow inside one captured size replay its graph over rows an
        # earlier, larger batch left behind.
        st.integers(2, 5).flatmap(lambda mb: st.tuples(st.just(mb), st.sampled_from(
            ((1, 2, 4), (mb,), (min(2, mb - 1), mb))))),
        page_size=st.sampled_from(page_sizes),
        draft=st.sampled_from(("eagle", "self", "perturbed")),
        cuda_graph=st.booleans(),
        max_prompt_len=st.integers(1, max_prompt_len),
        max_new_tokens=st.integers(4, max_new_tokens),
        # Mostly a pool of about one request (retraction); sometimes of several, so batches
        # of three or more run, shrink and grow across the coarse buckets above.
        pool_slack=st.integers(0, 40) | st.integers(150, 400),
        seed=st.integers(0, 2),
        overlap=st.booleans(),
        prefix_cache=st.booleans(),
        # Rows reused after a finish, an abort or a retraction, with seam ids generated.
        model=seam_models("tiny"),
    )


def build_lifecycle_engine(cfg: LifecycleConfig, device: str) -> Engine:
    """The context admits requests twice the drawn size (so add_request can be asked for one
    that fits the context but not the pool); the pool holds one largest request plus
    `pool_slack` percent."""
    spec = cfg.spec
    context = (2 * (cfg.max_prompt_len + cfg.max_new_tokens)
               + reserve_margin(spec, cfg.page_size, cfg.overlap))
    return Engine(model=cfg.model, spec=spec, draft=cfg.draft, page_size=cfg.page_size,
                  device=device, dtype=cfg.dtype, seed=cfg.seed, max_batch=cfg.max_batch,
                  max_context=context, num_pages=cfg.num_pages,
                  cuda_graph=cfg.cuda_graph, cuda_graph_bs=list(cfg.graph_bs),
                  overlap=cfg.overlap, prefix_cache=cfg.prefix_cache)


def truncate_at_stop(tokens: list[int], stop: tuple[int, ...]) -> list[int]:
    for i, t in enumerate(tokens):
        if t in stop:
            return tokens[:i + 1]
    return tokens


@dataclass
class Expected:
    """A request's independent greedy output (plain decoding, alone), cut at its stop token."""

    tokens: list[int]
    margins: list[float]   # reference top-2 margins, for the tie rule

    def check(self, rid: int, got: list[int], dtype) -> str:
        ok, what = compare_greedy(got, self.tokens, self.margins, dtype)
        if not ok:
            raise OracleFailure("lifecycle", "lifecycle_output", f"request {rid}: {what}")
        return what


def reference_output(model: str, *, prompt: list[int], max_new_tokens: int, device: str,
                     dtype: str, seed: int) -> tuple[list[int], list[float]]:
    outs, margins = greedy_baseline(model, prompts=[prompt], max_new_tokens=max_new_tokens,
                                    device=device, dtype=dtype, seed=seed)
    return outs[0], margins[0]


def expected(ref: tuple[list[int], list[float]], stop: tuple[int, ...]) -> Expected:
    return Expected(truncate_at_stop(ref[0], stop), ref[1])
