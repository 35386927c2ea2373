"""Issue 2's laws on the eager engine: lossless greedy, self-draft, topk > 1 == topk 1."""
from __future__ import annotations

import pytest
import torch

from harness.laws.lossless_greedy import check_lossless
from harness.laws.self_draft import check_self_draft_logits, check_total_acceptance
from harness.strategies.runs import default_device, greedy_baseline, make_prompts
from specdec import Engine, SpecConfig
from specdec.config import max_draft_tokens
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin

DEVICE = default_device()
DTYPES = ["float32", "bfloat16"] if DEVICE == "cuda" else ["float32"]
STEPS = [1, 2, 3, 5]


def context(spec: SpecConfig, page_size: int) -> int:
    """Prompts of at most 24 tokens (make_prompts' default) and at most 20 new ones: a
    context no longer than the runs need (the page table's width is what the CPU reference
    attention reads per row)."""
    return 24 + 20 + reserve_margin(spec, page_size)


def spec_for(topk: int, steps: int) -> SpecConfig:
    ndt = steps + 1 if topk == 1 else min(max_draft_tokens(topk, steps), topk * steps + 1)
    return SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("draft", ["eagle", "self"])
@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("topk", [1, 2, 4])
def test_lossless_greedy(topk, page_size, draft, dtype, cuda_graph):
    """For every num_steps and batch sizes 1 and 5 with ragged prompts: speculative greedy ==
    plain greedy, token for token (ties as oracle 6 says)."""
    for bs in (1, 5):
        prompts = make_prompts(seed=bs * 100 + topk, batch_size=bs, vocab_size=320)
        ref, margins = greedy_baseline("tiny", prompts=prompts, max_new_tokens=16, device=DEVICE,
                                       dtype=dtype)
        for steps in STEPS:
            spec = spec_for(topk, steps)
            eng = Engine(model="tiny", spec=spec, draft=draft, page_size=page_size,
                         device=DEVICE, dtype=dtype, max_batch=5, cuda_graph=cuda_graph,
                         cuda_graph_bs=[1, 2, 4], max_context=context(spec, page_size))
            out = eng.generate(prompts, max_new_tokens=16)
            check_lossless(out, ref, margins, eng.dtype)
            eng.check_accounting()


@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("topk,steps", [(1, 1), (1, 3), (1, 5), (2, 3), (4, 2), (4, 3)])
def test_self_draft(topk, steps, page_size, dtype, cuda_graph):
    """Self-draft: every draft logit equals the verify logit at the node's parent; with
    topk 1 every round accepts all num_steps drafts (ties excepted)."""
    spec = spec_for(topk, steps)
    eng = Engine(model="tiny", spec=spec, draft="self", page_size=page_size, device=DEVICE,
                 dtype=dtype, cuda_graph=cuda_graph, cuda_graph_bs=[1, 2, 4],
                 max_context=context(spec, page_size))
    eng.recorder = TraceRecorder(page_size, keep_kv_slots=False)
    eng.generate(make_prompts(seed=7, batch_size=4, vocab_size=320), max_new_tokens=20)
    assert check_self_draft_logits(eng.recorder, topk, spec.ndt, eng.dtype) > 0
    if topk == 1:
        ties = check_total_acceptance(eng.recorder, steps, spec.ndt, eng.dtype)
        if ties == 0:
            assert eng.stats.mean_acceptance_length == steps + 1


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("draft", ["eagle", "self"])
def test_topk_tree_equals_chain(draft, page_size):
    """topk > 1 greedy output == topk 1 greedy output."""
    prompts = make_prompts(seed=3, batch_size=5, vocab_size=320)
    chain = Engine(model="tiny", spec=spec_for(1, 3), draft=draft, page_size=page_size,
                   device=DEVICE, max_context=context(spec_for(1, 3), page_size)
                   ).generate(prompts, max_new_tokens=16)
    _, margins = greedy_baseline("tiny", prompts=prompts, max_new_tokens=16, device=DEVICE)
    for topk, steps, ndt in [(2, 3, 6), (4, 3, 10), (3, 2, 8)]:
        spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
        tree = Engine(model="tiny", spec=spec, draft=draft, page_size=page_size, device=DEVICE,
                      max_context=context(spec, page_size)).generate(prompts, max_new_tokens=16)
        check_lossless(tree, chain, margins, torch.float32)
