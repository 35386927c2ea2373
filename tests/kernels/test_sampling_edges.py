"""The sampling_edges property (harness/laws/sampling_edges.py): it holds for the fixed samplers
over generated cases and its explicit examples, and it is not vacuous: with the fault
`coin_le_cdf_accepts_zero_prob` (SGLang #35798) every coin-0 example fails it."""
from __future__ import annotations

import faultpoints as faults
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from harness.base.failure import OracleFailure
from harness.laws.sampling_edges import (BELOW_ONE, EXAMPLES, prop_sampling_edges,
                                    sampling_edges_cases)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
COIN_ZERO = [e for e in EXAMPLES if e.coin == 0.0 and e.final_coin == 0.0]


@pytest.mark.parametrize("case", EXAMPLES, ids=lambda e: f"{e.kernel}-{e.zeros}-{e.drafts}")
def test_examples_pass(case):
    prop_sampling_edges(case, DEVICE)


@settings(deadline=None)
@given(case=sampling_edges_cases())
def test_generated_cases_pass(case):
    prop_sampling_edges(case, DEVICE)


@pytest.mark.parametrize("case", COIN_ZERO, ids=lambda e: f"{e.kernel}-{e.zeros}-{e.drafts}")
def test_fault_is_caught(case):
    assert {e.kernel for e in COIN_ZERO} == {"tree", "chain", "one_token", "draft"}
    with faults.active("coin_le_cdf_accepts_zero_prob"):
        with pytest.raises(OracleFailure) as info:
            prop_sampling_edges(case, DEVICE)
    assert info.value.check == "sampling_edges"


def test_support_sum_rounding_edge():
    """Strict `<` with an fp32 prob_acc: siblings covering the support whose fp32 sum rounds
    to 1 - 2^-24 are all rejected by the coin 1 - 2^-24 and the residual is empty; the
    fallback must still emit a token of the target's support."""
    from kernels.sampling import tree_speculative_sampling_target_only as kernel
    p = torch.tensor([0.0, 0.5, 0.49999994])  # a normalised fp32 row: 0.5 + 0.49999994 == coin
    assert float(np.float32(p[1]) + np.float32(p[2])) == BELOW_ONE
    target = p.expand(1, 3, 3).contiguous().to(DEVICE)
    predicts = torch.full((3,), -7, dtype=torch.int32, device=DEVICE)
    kernel(predicts, torch.full((1, 2), -1, dtype=torch.int32, device=DEVICE),
           torch.zeros(1, dtype=torch.int32, device=DEVICE),
           *[t.to(DEVICE) for t in (torch.tensor([[0, 1, 2]]), torch.arange(3).view(1, 3),
                                    torch.tensor([[1, -1, -1]]), torch.tensor([[-1, 2, -1]]),
                                    torch.full((1, 3), BELOW_ONE), torch.tensor([0.5]))],
           target, torch.zeros_like(target))
    assert p[int(predicts[0])] > 0
