"""Configurations of the structure_under_churn law: a speculative engine with CUDA graphs
(or the CPU stand-in) over coarse captured buckets, and the batch size of each step."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from hypothesis import strategies as st

from harness.strategies.configs import shape_fields
from harness.strategies.lifecycle_config import small_spec_shapes
from harness.strategies.vocab_seams import seam_corner, seam_models


@dataclass(frozen=True, kw_only=True)
class ChurnConfig:
    topk: int
    num_steps: int
    ndt: int
    page_size: int
    draft: str
    max_batch: int
    graph_bs: tuple       # captured batch sizes (coarse: batches pad inside them)
    sizes: tuple          # the running batch size at each step, in order
    overlap: bool
    seed: int
    max_prompt_len: int = 8
    model: str = "tiny"
    dtype: str = "float32"

    def __post_init__(self) -> None:  # JSON (repro --config) gives lists
        object.__setattr__(self, "graph_bs", tuple(self.graph_bs))
        object.__setattr__(self, "sizes", tuple(self.sizes))

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def corners(self) -> tuple:
        """Counted by `harness check`: a model biased toward the vocabulary's seams."""
        return seam_corner(self.model)


def churn_configs(max_batch: int = 6, max_steps: int = 10):
    """Batch sizes that go down and up again, across captured sizes that pad: mostly two
    levels (a small size and max_batch), else the powers of two to 4 or max_batch alone.
    Long sequences: the pattern that matters (a batch above the small size, one within it,
    then one between the two) needs a few turns."""
    def with_batch(mb: int):
        two = (min(2, mb - 1), mb)
        buckets = st.sampled_from((two, two, tuple(b for b in (1, 2, 4) if b <= mb), (mb,)))
        sizes = st.lists(st.integers(1, mb), min_size=5, max_size=max_steps).map(tuple)
        return st.builds(
            lambda shape, **kw: ChurnConfig(**shape_fields(shape), max_batch=mb, **kw),
            small_spec_shapes(), page_size=st.sampled_from((1, 4, 16)),
            draft=st.sampled_from(("eagle", "self", "perturbed")), graph_bs=buckets,
            sizes=sizes, overlap=st.booleans(), seed=st.integers(0, 2**16),
            model=seam_models("tiny"))
    return st.integers(3, max_batch).flatmap(with_batch)
