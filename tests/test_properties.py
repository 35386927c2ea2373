"""The harness's properties under pytest: Hypothesis draws configurations, oracles judge.
Coarse axes (draft kind, page size) are parametrize axes so xdist spreads them."""
from __future__ import annotations

import pytest
from hypothesis import example, given

from harness.properties import prop_lossless_greedy, prop_self_draft
from harness.strategies import RunConfig, run_configs

PAGE_SIZES = [1, 4, 64]


@pytest.mark.parametrize("page_size", PAGE_SIZES)
@pytest.mark.parametrize("draft", ["eagle", "self"])
def test_lossless_greedy(draft, page_size):
    # A tree smaller than its depth (ndt < num_steps + 1): found by `harness check` on the GPU.
    @example(RunConfig(2, 2, 2, page_size, draft, 1, 1, 2, 0))
    @given(cfg=run_configs(drafts=(draft,), page_sizes=(page_size,)))
    def law(cfg):
        prop_lossless_greedy(cfg)
    law()


@pytest.mark.parametrize("page_size", PAGE_SIZES)
def test_self_draft(page_size):
    @example(RunConfig(2, 2, 2, page_size, "self", 1, 1, 2, 0))
    @given(cfg=run_configs(drafts=("self",), page_sizes=(page_size,)))
    def law(cfg):
        prop_self_draft(cfg)
    law()
