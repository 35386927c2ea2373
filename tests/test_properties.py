"""The harness's properties under pytest: Hypothesis draws configurations, oracles judge.
Coarse axes (graph on/off, draft kind, page size) are parametrize axes so xdist spreads them.
Each failure carries the one-line replay command (`python -m harness repro ...`)."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings

from harness.check import repro_command
from harness.properties import PROPERTIES
from harness.runs import default_device
from harness.strategies import RunConfig, run_configs

DEVICE = default_device()
ON_GPU = DEVICE == "cuda"
# The CPU tier draws smaller runs; the GPU tier the full space (harness.md, tiers).
SIZE = dict(max_batch=10) if ON_GPU else dict(max_batch=10, max_prompt_len=24, max_new_tokens=16)
DTYPES = ("float32", "bfloat16", "float16") if ON_GPU else ("float32",)


def _check(name: str, cfg: RunConfig) -> None:
    try:
        PROPERTIES[name](cfg, DEVICE)
    except Exception as exc:
        exc.add_note(f"replay: {repro_command(name, cfg, DEVICE)}")
        raise


def _fraction(k: int):
    """A k-th of the profile's examples, for properties that run the engine three times."""
    return settings(max_examples=max(2, settings.default.max_examples // k))


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("page_size", [1, 4, 64])
def test_structure(page_size, cuda_graph):
    @given(cfg=run_configs(page_sizes=(page_size,), graphs=(cuda_graph,), dtypes=DTYPES, **SIZE))
    def law(cfg):
        _check("structure", cfg)
    law()


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("draft", ["eagle", "self"])
def test_kv_content(draft, cuda_graph):
    @given(cfg=run_configs(drafts=(draft,), graphs=(cuda_graph,), dtypes=DTYPES, **SIZE))
    def law(cfg):
        _check("kv_content", cfg)
    law()


@pytest.mark.parametrize("page_size", [1, 16])
def test_eager_vs_graph(page_size):
    @_fraction(3)
    @given(cfg=run_configs(page_sizes=(page_size,), graphs=(True,), dtypes=DTYPES, **SIZE))
    def law(cfg):
        _check("eager_vs_graph", cfg)
    law()


@pytest.mark.parametrize("page_size", [1, 4, 64])
@pytest.mark.parametrize("draft", ["eagle", "self"])
def test_lossless_greedy(draft, page_size):
    # A tree smaller than its depth (ndt < num_steps + 1): found by `harness check` on the GPU.
    @example(RunConfig(2, 2, 2, page_size, draft, 1, 1, 2, 0))
    @_fraction(2)
    @given(cfg=run_configs(drafts=(draft,), page_sizes=(page_size,), dtypes=DTYPES, **SIZE))
    def law(cfg):
        _check("lossless_greedy", cfg)
    law()


@pytest.mark.parametrize("page_size", [1, 4, 64])
def test_self_draft(page_size):
    @example(RunConfig(2, 2, 2, page_size, "self", 1, 1, 2, 0))
    @given(cfg=run_configs(drafts=("self",), page_sizes=(page_size,), dtypes=DTYPES, **SIZE))
    def law(cfg):
        _check("self_draft", cfg)
    law()
