"""The harness is not vacuous: for each oracle, a small deliberate corruption of its input
(a position shifted by one, two slots swapped, one KV element changed, one compaction index
wrong, ...) makes it fail, while the clean input passes."""
from __future__ import annotations

import copy

import pytest
import torch

from harness.laws.kv_content import check_kv_content
from harness.base.failure import OracleFailure
from harness.laws.eager_vs_graph import check_eager_graph_bitwise
from harness.laws.lossless_greedy import check_lossless
from harness.laws.self_draft import check_self_draft_logits, check_total_acceptance
from harness.strategies.runs import default_device, greedy_baseline
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import traced, prompts_for
from harness.laws.structure import SpecShape, check_structure
from harness.references.ties import compare_greedy
from specdec.memory.allocator import PageAllocator

DEVICE = default_device()
CFG = RunConfig(topk=2, num_steps=3, ndt=6, page_size=4, draft="eagle", batch_size=5,
                max_prompt_len=9, max_new_tokens=10, seed=5, cuda_graph=True)
SHAPE = SpecShape(2, 3, 6, 4, shifted=True)


@pytest.fixture(scope="module")
def run():
    eng, out = traced(CFG, DEVICE, keep_kv_slots=True)
    return eng, out


def _fails(oracle_name: str, fn, *args):
    with pytest.raises(OracleFailure) as info:
        fn(*args)
    assert info.value.check == oracle_name, info.value


def _forward(trace, mode, rnd=0, i=0):
    return [f for f in trace.rounds[rnd].forwards if f.mode == mode][i]


def test_structure_oracle(run):
    eng, _ = run
    check_structure(eng.recorder, SHAPE)
    corruptions = {
        "draft_positions": lambda t: _forward(t, "draft_decode", 0, 1).positions.__setitem__(0, _forward(t, "draft_decode", 0, 1).positions[0] + 1),
        "draft_write_slots": lambda t: _forward(t, "draft_decode").write_loc.copy_(_forward(t, "draft_decode").write_loc.flip(0)),
        "draft_read_slots": lambda t: _forward(t, "draft_decode").kv_slots[1].reverse(),
        "verify_write_slots": lambda t: _forward(t, "target_verify").write_loc.copy_(_forward(t, "target_verify").write_loc.roll(1)),
        "tree_mask": lambda t: t.rounds[0].tree[0].logical_not_(),
        "greedy_accept": lambda t: t.rounds[0].accept_index.__setitem__((0, 0), t.rounds[0].accept_index[0, 0] + 1),
        "draft_extend_tokens": lambda t: _forward(t, "draft_extend").input_ids.__setitem__(0, _forward(t, "draft_extend").input_ids[0] + 1),
        "draft_extend_positions": lambda t: _forward(t, "draft_extend").positions.add_(1),
    }
    for name, corrupt in corruptions.items():
        trace = copy.deepcopy(eng.recorder)
        corrupt(trace)
        with pytest.raises(OracleFailure) as info:
            check_structure(trace, SHAPE)
        assert info.value.check in (name, "verify_positions"), (name, info.value)


def test_structure_padding_oracle(run):
    eng, _ = run
    trace = copy.deepcopy(eng.recorder)
    padded = [f for r in trace.rounds for f in r.forwards if f.num_padded and f.mode == "target_verify"]
    assert padded, "bs 5 replays the size-6 graphs"
    padded[0].write_loc[-1] = 7
    _fails("padding_slot_zero", check_structure, trace, SHAPE)


def test_kv_content_oracle(run):
    eng, _ = run
    check_kv_content(eng.recorder, eng)
    for pool in ("target_kv", "draft_kv"):
        trace = copy.deepcopy(eng.recorder)
        getattr(trace.finished[1], pool)[0][0, 2, 0, 0] += 0.5  # one K element at position 2
        _fails("kv_content", check_kv_content, trace, eng)


def test_eager_vs_graph_oracle(run):
    graph, _ = run
    inv, _ = traced(CFG, DEVICE, cuda_graph=False, batch_invariant=True)
    check_eager_graph_bitwise(inv, graph)
    twin = copy.deepcopy(graph.recorder)
    _forward(twin, "target_verify").logits[0, 0] += 1e-3
    saved, graph.recorder = graph.recorder, twin
    try:
        _fails("eager_vs_graph", check_eager_graph_bitwise, inv, graph)
    finally:
        graph.recorder = saved
    buf = inv.target_backend.pool.k_buffers[0]
    slot = int(_forward(inv.recorder, "target_verify").write_loc[0])
    buf[slot, 0, 0] += 1.0
    _fails("eager_vs_graph", check_eager_graph_bitwise, inv, graph)


def test_lossless_oracle(run):
    eng, out = run
    prompts = prompts_for(CFG, eng.cfg.vocab_size)
    ref, margins = greedy_baseline(CFG.model, prompts=prompts, max_new_tokens=CFG.max_new_tokens,
                                   device=DEVICE, dtype="float32",
                                   seed=CFG.seed % 1000)
    check_lossless(out, ref, margins, eng.dtype)
    bad = copy.deepcopy(out)
    bad[0][3] = (bad[0][3] + 1) % eng.cfg.vocab_size
    _fails("lossless_greedy", check_lossless, bad, ref, margins, eng.dtype)


def test_self_draft_oracles():
    cfg = RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="self", batch_size=2,
                    max_prompt_len=6, max_new_tokens=10, seed=1)
    eng, _ = traced(cfg, DEVICE)
    check_self_draft_logits(eng.recorder, 1, 4, eng.dtype)
    check_total_acceptance(eng.recorder, 3, 4, eng.dtype)
    trace = copy.deepcopy(eng.recorder)
    _forward(trace, "draft_decode").logits[0, 0] += 1.0
    _fails("self_draft", check_self_draft_logits, trace, 1, 4, eng.dtype)
    trace = copy.deepcopy(eng.recorder)
    trace.rounds[0].accept_lens[0] = 2
    _fails("self_draft_acceptance", check_total_acceptance, trace, 3, 4, eng.dtype)


def test_tie_oracle():
    assert compare_greedy([1, 2, 3], [1, 2, 4], [5.0, 5.0, 1e-5], torch.float32)[0]
    assert not compare_greedy([1, 2, 3], [1, 2, 4], [5.0, 5.0, 0.5], torch.float32)[0]


def test_accounting_oracle():
    alloc = PageAllocator(8, 1)
    a, b = alloc.alloc(2, owner=1), alloc.alloc(2, owner=2)
    alloc.check({1: a, 2: b})
    with pytest.raises(AssertionError, match="owned by both"):
        alloc.check({1: a, 2: b + a[:1]})
    with pytest.raises(AssertionError, match="leaked"):
        alloc.check({1: a})
