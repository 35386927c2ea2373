"""A bug-zoo case: one historical fault, the story, and the configuration that exposes it."""
from __future__ import annotations

from dataclasses import dataclass

from harness.strategies.configs import RunConfig
from specdec.faults import REGISTRY


@dataclass(frozen=True)
class Case:
    fault: str       # the fault point's name (specdec/faults.py)
    story: str       # what went wrong in the engine it came from, and how it showed
    prop: str        # the property whose @example is `example` (harness/runners/suite.py)
    oracle: str      # the check expected to fail first ("crash" where the engine dies)
    example: object  # a RunConfig (engine properties) or the property's own example type

    def __post_init__(self) -> None:
        if self.fault not in REGISTRY:
            raise ValueError(f"case for unknown fault {self.fault!r}")

    @property
    def source(self) -> str:
        return REGISTRY[self.fault].source

    @property
    def mistake(self) -> str:
        return REGISTRY[self.fault].mistake


def run(topk: int, steps: int, ndt: int, *, draft: str = "eagle", bs: int = 2,
        page_size: int = 1, graph: bool = False, seed: int = 3,
        graph_bs: tuple = RunConfig.graph_bs) -> RunConfig:
    """The zoo's engine runs: tiny model, fp32, prompts up to 12 tokens, 8 new tokens."""
    return RunConfig(topk, steps, ndt, page_size, draft, bs, 12, 8, seed, cuda_graph=graph,
                     graph_bs=graph_bs)
