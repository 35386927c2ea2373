"""The engine laws' configuration spaces per tier: the GPU tier draws the full space and every
dtype, the CPU tier (CI) smaller runs in float32 (docs/contract.md, Tiers and profiles). A
law's strategy is `(on_gpu, fixed axes) -> strategy`; a pytest entry fixes some axes."""
from __future__ import annotations

from harness.strategies.configs import run_configs

# A slice's axis name -> run_configs' argument that takes its allowed values.
AXIS_ARG = {"page_size": "page_sizes", "draft": "drafts", "cuda_graph": "graphs"}


def engine_runs(**extra):
    """The strategy of engine runs for a white-box law, `extra` narrowing run_configs."""
    def strategy(on_gpu: bool, fixed: dict):
        size = dict(max_batch=10) if on_gpu else dict(max_batch=10, max_prompt_len=24,
                                                       max_new_tokens=16)
        dtypes = ("float32", "bfloat16", "float16") if on_gpu else ("float32",)
        axes = {AXIS_ARG[k]: (v,) for k, v in fixed.items()}
        return run_configs(dtypes=dtypes, **axes, **size, **extra)
    return strategy


def graphs_of(fixed: dict) -> tuple:
    """The graph axis a slice fixes, or both."""
    return (fixed["cuda_graph"],) if "cuda_graph" in fixed else (False, True)


def fixed_strategy(make):
    """A law drawn from one strategy whatever the tier and slice."""
    return lambda on_gpu, fixed: make()
