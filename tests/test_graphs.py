"""The CUDA-graph path (real graphs on GPU, the stand-in on CPU) against the eager path."""
from __future__ import annotations

import dataclasses

import pytest

from harness.laws.eager_vs_graph import check_eager_graph_bitwise
from harness.strategies.runs import default_device, make_prompts
from specdec import Engine, SpecConfig
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin

DEVICE = default_device()
DTYPES = ["float32", "bfloat16"] if DEVICE == "cuda" else ["float32"]
GRAPH_BS = [1, 2, 3, 4, 6, 8]  # 5 and 7 pad; 9..20 fall back to eager


def spec_for(topk, steps):
    return SpecConfig(topk=topk, num_steps=steps,
                      num_draft_tokens=steps + 1 if topk == 1 else min(topk * steps + 1, 8))


def engine(spec, page_size, dtype, **kw):
    # Prompts of at most 16 tokens and at most 16 new ones here: a context no longer than the
    # runs need (the page table's width is what the CPU reference attention reads per row).
    context = 32 + reserve_margin(spec, page_size, overlap=True)
    return Engine(model="tiny", spec=spec, draft=kw.pop("draft", "eagle"), page_size=page_size,
                  device=DEVICE, dtype=dtype, max_batch=20, cuda_graph_bs=GRAPH_BS,
                  max_context=context, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("topk,steps", [(1, 1), (1, 3), (4, 1), (4, 3)])
def test_graph_tokens_equal_eager(topk, steps, page_size, dtype):
    """Batch sizes 1..20 with graphs captured up to 8 (padding and fallback both occur): graph
    and eager runs of the same prompts give identical tokens."""
    spec = spec_for(topk, steps)
    eager = engine(spec, page_size, dtype, cuda_graph=False)
    graph = engine(spec, page_size, dtype, cuda_graph=True)
    for bs in range(1, 21):
        prompts = make_prompts(seed=bs, batch_size=bs, vocab_size=320, max_len=12)
        assert graph.generate(prompts, max_new_tokens=8) == eager.generate(prompts, max_new_tokens=8), f"bs={bs}"
    graph.check_accounting()
    assert graph.rounds.fused.graphs  # the greedy rounds' graphs were captured and used


def _traced_run(spec, page_size, dtype, prompts, **kw):
    eng = engine(spec, page_size, dtype, **kw)
    eng.recorder = TraceRecorder(page_size, keep_kv_slots=False)
    eng.generate(prompts, max_new_tokens=8)
    return eng


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("topk,steps", [(1, 3), (4, 3), (4, 1)])
def test_batch_invariant_eager_is_bitwise_graph(topk, steps, page_size, dtype):
    """With batch-invariant eager mode both paths run identical padded shapes: identical
    logits and hidden states in every forward and identical KV bytes at every real slot."""
    spec = spec_for(topk, steps)
    for bs in (3, 7, 11):
        prompts = make_prompts(seed=40 + bs, batch_size=bs, vocab_size=320, max_len=12)
        a = _traced_run(spec, page_size, dtype, prompts, cuda_graph=False, batch_invariant=True)
        b = _traced_run(spec, page_size, dtype, prompts, cuda_graph=True)
        # bs 11 starts on the eager fallback; graphs take over as requests finish.
        assert b.recorder.rounds[0].forwards[0].graph == (bs <= 8)
        assert check_eager_graph_bitwise(a, b) > 0


@pytest.mark.parametrize("draft", ["eagle", "self"])
@pytest.mark.parametrize("topk,steps,ndt", [(1, 3, 4), (2, 3, 6), (4, 2, 9)])
def test_graph_lossless_and_self_draft(topk, steps, ndt, draft):
    """Issue 2's laws with cuda_graph=True: lossless greedy, and for self-draft, draft logits
    equal verify logits node by node (topk 1: total acceptance)."""
    from harness.laws.lossless_greedy import check_lossless
    from harness.laws.self_draft import check_self_draft_logits, check_total_acceptance
    from harness.strategies.runs import greedy_baseline
    prompts = make_prompts(seed=5, batch_size=6, vocab_size=320, max_len=16)
    spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
    eng = engine(spec, 4, "float32", cuda_graph=True, draft=draft)
    eng.recorder = TraceRecorder(4, keep_kv_slots=False)
    out = eng.generate(prompts, max_new_tokens=16)
    ref, margins = greedy_baseline("tiny", prompts=prompts, max_new_tokens=16, device=DEVICE)
    check_lossless(out, ref, margins, eng.dtype)
    if draft == "self":
        assert check_self_draft_logits(eng.recorder, topk, ndt, eng.dtype) > 0
        if topk == 1:
            check_total_acceptance(eng.recorder, steps, ndt, eng.dtype)


def _count_rounds(eng):
    """Wrap the round runners: how many rounds replayed the whole-round graph, and how many
    ran phase by phase."""
    n = {"whole": 0, "phases": 0}
    fused, phases = eng.rounds.fused.run, eng.rounds._phases

    def whole(live, bs):
        n["whole"] += 1
        return fused(live, bs)

    def apart(*args, **kwargs):
        n["phases"] += 1
        return phases(*args, **kwargs)
    eng.rounds.fused.run, eng.rounds._phases = whole, apart
    return n


@pytest.mark.parametrize("topk,steps", [(1, 3), (4, 3)])
def test_greedy_rounds_replay_one_graph(topk, steps):
    """Greedy batches that fit a captured bucket run each round as one replay of the whole
    round (specdec/spec/round_phase.py); sampled batches, and batches past the largest bucket,
    run phase by phase. The laws that compare graphs with eager runs therefore see both."""
    eng = engine(spec_for(topk, steps), 4, "float32", cuda_graph=True, overlap=True)
    n = _count_rounds(eng)
    eng.generate(make_prompts(seed=1, batch_size=5, vocab_size=320, max_len=12), max_new_tokens=8)
    assert n["whole"] > 0 and n["phases"] == 0, n
    eng.generate(make_prompts(seed=2, batch_size=3, vocab_size=320, max_len=12), max_new_tokens=8,
                 temperature=0.8, seed=3)
    assert n["phases"] > 0, n
    apart = n["phases"]
    eng.generate(make_prompts(seed=4, batch_size=12, vocab_size=320, max_len=12), max_new_tokens=4)
    assert n["phases"] > apart, "12 requests do not fit the largest bucket (8)"


def test_bitwise_law_sees_a_mistake_in_the_captured_round(monkeypatch):
    """Negative control: a whole-round graph that hands back each request's committed length
    one short (what the next round, launched before this one resolves, reads from the
    device) fails the eager-vs-graph law."""
    from harness.base.failure import OracleFailure
    from specdec.spec.round_phase import GreedyRoundPhase
    right = GreedyRoundPhase.slice_outputs

    def short(self, outs, bs):
        out = right(self, outs, bs)
        return dataclasses.replace(out, seq_lens=out.seq_lens - 1)
    spec = spec_for(1, 3)
    prompts = make_prompts(seed=9, batch_size=3, vocab_size=320, max_len=12)
    a = _traced_run(spec, 4, "float32", prompts, cuda_graph=False, batch_invariant=True,
                    overlap=True)
    assert check_eager_graph_bitwise(a, _traced_run(spec, 4, "float32", prompts,
                                                    cuda_graph=True, overlap=True)) > 0
    monkeypatch.setattr(GreedyRoundPhase, "slice_outputs", short)
    b = _traced_run(spec, 4, "float32", prompts, cuda_graph=True, overlap=True)
    with pytest.raises(OracleFailure):
        check_eager_graph_bitwise(a, b)


def test_structure_law_sees_padded_lanes_of_the_captured_round_off_the_fill(monkeypatch):
    """Negative control of the padding rule (section 8: padded lanes at seq_len = the fill
    value) inside the whole-round graph: its draft extend given padded lanes at another
    seq_len fails the structure law, though no real request's tokens change."""
    from harness.base.failure import OracleFailure
    from harness.laws.structure import SpecShape, check_structure
    from specdec.spec import round_phase
    spec = spec_for(1, 3)
    prompts = make_prompts(seed=9, batch_size=5, vocab_size=320, max_len=12)  # bucket 6: 1 padded
    shape = SpecShape(1, 3, 4, 4, True)
    check_structure(_traced_run(spec, 4, "float32", prompts, cuda_graph=True).recorder, shape)
    monkeypatch.setattr(round_phase, "SEQ_LEN_FILL", 2)
    eng = _traced_run(spec, 4, "float32", prompts, cuda_graph=True)
    with pytest.raises(OracleFailure, match="padding_inputs"):
        check_structure(eng.recorder, shape)
