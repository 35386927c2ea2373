"""Hypothesis strategies over the engine's configuration space. They draw configurations and
a seed, never tensors; infeasible combinations are excluded by construction (flatmap)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from hypothesis import strategies as st

from specdec.config import max_draft_tokens


@dataclass(frozen=True)
class RunConfig:
    """One engine run: everything needed to replay it exactly."""

    topk: int
    num_steps: int
    ndt: int
    page_size: int
    draft: str
    batch_size: int
    max_prompt_len: int
    max_new_tokens: int
    seed: int
    dtype: str = "float32"
    model: str = "tiny"
    cuda_graph: bool = False
    graph_bs: tuple = (1, 2, 3, 4, 6, 8)  # captured sizes: the rest pad up or fall back

    def __post_init__(self) -> None:
        object.__setattr__(self, "graph_bs", tuple(self.graph_bs))  # JSON gives a list

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def axes(self) -> tuple:
        """The coarse configuration this run covers (for coverage counts)."""
        return (self.topk, self.num_steps, self.page_size, self.draft, self.cuda_graph)


def spec_shapes():
    """(topk, num_steps, ndt) with ndt feasible: steps+1 for chains, <= the tree's size else."""
    def with_ndt(ts):
        topk, steps = ts
        if topk == 1:
            return st.just((1, steps, steps + 1))
        top = min(max_draft_tokens(topk, steps), 32)
        return st.integers(2, top).map(lambda n: (topk, steps, n))
    return st.tuples(st.integers(1, 4), st.integers(1, 5)).flatmap(with_ndt)


def run_configs(drafts=("eagle", "self"), page_sizes=(1, 2, 4, 16, 64), max_batch: int = 10,
                dtypes=("float32",), graphs=(False, True), graph_bs=(1, 2, 3, 4, 6, 8),
                max_prompt_len: int = 40, max_new_tokens: int = 24):
    """Batch sizes reach past the largest captured size, so padding and eager fallback both
    occur in ordinary runs."""
    return st.builds(
        lambda shape, **kw: RunConfig(*shape, **kw),
        spec_shapes(),
        page_size=st.sampled_from(page_sizes),
        draft=st.sampled_from(drafts),
        batch_size=st.integers(1, max_batch),
        max_prompt_len=st.integers(1, max_prompt_len),
        max_new_tokens=st.integers(1, max_new_tokens),
        seed=st.integers(0, 2**31 - 1),
        dtype=st.sampled_from(dtypes),
        cuda_graph=st.sampled_from(graphs),
        graph_bs=st.just(tuple(graph_bs)),
    )
