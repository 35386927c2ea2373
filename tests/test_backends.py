"""The Triton and torch backends share all bookkeeping and must agree."""
from __future__ import annotations

import pytest

from harness.laws.lossless_greedy import check_lossless
from harness.strategies.runs import default_device, greedy_baseline, make_prompts
from specdec import Engine, SpecConfig

DEVICE = default_device()


@pytest.mark.parametrize("topk,steps,ndt,page_size,draft", [
    (1, 3, 4, 1, "eagle"), (2, 3, 5, 4, "self"), (4, 2, 7, 16, "eagle"),
])
def test_triton_backend_lossless(topk, steps, ndt, page_size, draft):
    """The engine on Triton kernels (interpreted on CPU) is lossless and matches the torch
    backend token for token."""
    prompts = make_prompts(seed=11, batch_size=3, vocab_size=320, max_len=12)
    spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
    outs = {}
    for impl in ("triton", "torch"):
        eng = Engine(model="tiny", spec=spec, draft=draft, page_size=page_size, device=DEVICE,
                     attention=impl)
        outs[impl] = eng.generate(prompts, max_new_tokens=8)
        eng.check_accounting()
    ref, margins = greedy_baseline("tiny", prompts=prompts, max_new_tokens=8, device=DEVICE)
    check_lossless(outs["triton"], ref, margins, eng.dtype)
    check_lossless(outs["triton"], outs["torch"], margins, eng.dtype)
