"""A bug-zoo case: one historical fault, the story, and the configuration that exposes it."""
from __future__ import annotations

from dataclasses import dataclass

from harness.strategies.configs import RunConfig
from specdec.faults import REGISTRY


@dataclass(frozen=True)
class Case:
    fault: str       # the fault point's name (specdec/faults.py)
    story: str       # what went wrong in the engine it came from, and how it showed
    prop: str        # the law whose regression example `example` is (harness/laws/)
    check: str | tuple  # the check of that law the example fails ("crash" where the engine
    #                     dies; several where the device decides); the zoo asserts it is among
    #                     the checks that caught the fault
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


def run(topk: int, *, steps: int, ndt: int, draft: str = "eagle", bs: int = 2,
        page_size: int = 1, graph: bool = False, seed: int = 3,
        graph_bs: tuple = RunConfig.graph_bs) -> RunConfig:
    """The zoo's engine runs: tiny model, fp32, prompts up to 12 tokens, 8 new tokens."""
    return RunConfig(topk=topk, num_steps=steps, ndt=ndt, page_size=page_size, draft=draft,
                     batch_size=bs, max_prompt_len=12, max_new_tokens=8, seed=seed,
                     cuda_graph=graph, graph_bs=graph_bs)
