"""The request lifecycle under continuous batching: Hypothesis's stateful machine
(harness/laws/lifecycle.py) adds, steps and aborts requests on a small KV pool, checking accounting,
committed KV and every finished output; plus a short mixed run (harness/runners/mixed_run.py)."""
from __future__ import annotations

from collections import deque

import pytest
import torch
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from harness.laws.lifecycle import LAW, LifecycleMachine
from harness.laws.lossless_greedy import check_lossless
from harness.runners import parts
from harness.strategies.runs import greedy_baseline, make_prompts
from specdec import Engine, SpecConfig
from specdec.memory.allocator import OutOfSlots
from specdec.sampling_params import SamplingParams

# Tens of 20-step examples on the CPU profiles (dev, ci), hundreds nightly: the profile's
# max_examples, at least 40. On a GPU they are split over PARTS tests that run side by side
# (as one test, 25-66 s on one H100 on 2026-11-26, over the gate's 60 s per test), each
# drawing its share from a seed of its own.
MACHINE_EXAMPLES = max(40, settings.default.max_examples)
PARTS = 3 if torch.cuda.is_available() else 1


@pytest.mark.parametrize("part", range(PARTS))
def test_lifecycle_machine(part):
    # A subclass per part: the seed is set on the class it decorates.
    machine = parts.seeded(type(f"LifecycleMachinePart{part}", (LifecycleMachine,), {}),
                           "lifecycle", part, PARTS, settings.default)
    run_state_machine_as_test(machine, settings=settings(
        settings.default, stateful_step_count=20, phases=LAW.phases,
        max_examples=parts.share(MACHINE_EXAMPLES, PARTS)))


@pytest.mark.parametrize("fault", [None, "graph_pad_stale_positions"])
def test_structure_after_each_step_sees_stale_padded_rows(fault):
    """The machine's per-step structure check (oracle 1) reaches padded lanes under churn: a
    batch of 4 shrinks to 3 inside bucket 4, so the padded row is one a live request wrote.
    Its negative control: with stale padded rows (the zoo fault), the check fails."""
    from harness.base.failure import OracleFailure
    from harness.laws.structure import SpecShape, check_recent_structure
    from harness.strategies.lifecycle_config import LifecycleConfig, build_lifecycle_engine
    from specdec import faults
    from specdec.trace import TraceRecorder
    cfg = LifecycleConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", cuda_graph=True,
                          max_batch=4, max_prompt_len=6, max_new_tokens=8, pool_slack=300,
                          seed=0, graph_bs=(4,))
    eng = build_lifecycle_engine(cfg, "cpu")
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=True)
    shape = SpecShape(1, 3, 4, cfg.page_size, eng.drafter.shifted)
    for i, new in enumerate((2, 8, 8, 8)):  # the first finishes after its first round
        eng.add_request([1 + i, 2, 3], new)
    with faults.active(*([fault] if fault else [])):
        n = 0
        try:
            while eng.has_unfinished():
                eng.step()
                n = check_recent_structure(eng.recorder, shape, n)
        except OracleFailure as exc:
            assert fault is not None, exc
            assert exc.check.startswith("padding"), exc
            return
    assert fault is None, "stale padded rows went unseen"


class _ToTheBack(deque):
    """A waiting queue whose appendleft appends: retracted requests go behind later arrivals."""

    def appendleft(self, x) -> None:
        self.append(x)


@pytest.mark.parametrize("planted", [False, True])
def test_admission_order_sees_a_retraction_sent_to_the_back(planted):
    """The machine's order check (first come, first served): on a pool that forces
    retraction while later requests wait, it holds after every step; its negative control:
    with retracted requests queued at the back, it fails."""
    from harness.base.failure import OracleFailure
    from harness.laws.lifecycle import check_admission_order
    from harness.strategies.lifecycle_config import LifecycleConfig, build_lifecycle_engine
    cfg = LifecycleConfig(topk=1, num_steps=3, ndt=4, page_size=2, draft="eagle", cuda_graph=False,
                          max_batch=4, max_prompt_len=6, max_new_tokens=24, pool_slack=40,
                          seed=0)
    eng = build_lifecycle_engine(cfg, "cpu")
    if planted:
        eng.scheduler.waiting = _ToTheBack()
    for i in range(6):
        eng.add_request([1 + i, 2, 3, 4, 5, 6], 24)
    try:
        while eng.has_unfinished():
            eng.step()
            check_admission_order(eng.scheduler)
    except OracleFailure as exc:
        assert planted, exc
        assert exc.check == "lifecycle_order", exc
        return
    assert eng.scheduler.retractions > 0, "the pool never forced a retraction"
    assert not planted, "a retraction sent to the back went unseen"


def test_batch_bound_holds_and_sees_one_request_too_many():
    """The machine's batch bound: with more requests waiting than fit, at most max_batch hold
    rows after every step; its negative control: the same run checked against a bound one
    smaller (what an engine admitting one request past its max_batch looks like) fails."""
    from harness.base.failure import OracleFailure
    from harness.laws.lifecycle import check_batch_bound
    from harness.strategies.lifecycle_config import LifecycleConfig, build_lifecycle_engine
    cfg = LifecycleConfig(topk=1, num_steps=3, ndt=4, page_size=2, draft="eagle", cuda_graph=False,
                          max_batch=3, max_prompt_len=6, max_new_tokens=8, pool_slack=400,
                          seed=0)
    eng = build_lifecycle_engine(cfg, "cpu")
    for i in range(7):
        eng.add_request([1 + i, 2, 3, 4, 5, 6], 8)
    one_too_many = []
    while eng.has_unfinished():
        eng.step()
        check_batch_bound(eng.scheduler, cfg.max_batch)  # the law holds
        try:
            check_batch_bound(eng.scheduler, cfg.max_batch - 1)
        except OracleFailure as exc:
            assert exc.check == "lifecycle_batch", exc
            one_too_many.append(exc)
    assert one_too_many, "a batch one past the bound went unseen (or the batch never filled)"


def test_mixed_run_small():
    """20 requests with arrivals, aborts and stop tokens on a pool of ~1.2 largest requests:
    every output equals its request run alone, nothing leaks, and retraction happened."""
    from harness.runners.mixed_run import mixed_run
    from harness.strategies.runs import default_device
    report = mixed_run(20, seed=0, device=default_device(), max_batch=6, pool_requests=1.2,
                       max_prompt_len=12, max_new_tokens=16, cuda_graph=True)
    assert report.completed + report.aborted == 20 and report.completed > 0
    assert report.retractions > 0, report


def _drain(eng):
    outs = {}
    while eng.has_unfinished():
        for o in eng.step():
            outs[o.rid] = o
        eng.check_accounting()
    eng.check_accounting([])
    return outs


@pytest.mark.parametrize("spec", [None, SpecConfig(topk=2, num_steps=2, num_draft_tokens=4)])
def test_retraction_resumes_token_identically(spec):
    """A pool of about one request's worst case: requests are retracted and resumed, and each
    output equals the same request run alone (plain decoding too, which has no draft state)."""
    prompts = make_prompts(seed=11, batch_size=5, vocab_size=320, max_len=10)
    eng = Engine(model="tiny", spec=spec, page_size=2, max_batch=5, max_context=64, num_pages=22)
    rids = [eng.add_request(p, 16) for p in prompts]
    outs = _drain(eng)
    assert eng.scheduler.retractions > 0
    ref, margins = greedy_baseline("tiny", prompts=prompts, max_new_tokens=16, device="cpu")
    check_lossless([outs[r].tokens for r in rids], ref, margins, eng.dtype)
    assert all(outs[r].finish_reason == "length" for r in rids)


def test_stop_token_and_abort():
    eng = Engine(model="tiny", spec=SpecConfig(topk=1, num_steps=3), max_batch=4, max_context=64)
    prompt = [5, 6, 7]
    full = eng.generate([prompt], max_new_tokens=12)[0]
    stop = full[4]
    cut = full[:full.index(stop) + 1]
    assert eng.generate([prompt], max_new_tokens=12, sampling=SamplingParams(stop_token_ids=(stop,)))[0] == cut
    a = eng.add_request(prompt, 12, SamplingParams(stop_token_ids=(stop,)))
    b = eng.add_request(prompt, 12)
    eng.step()
    assert eng.output(b).finish_reason is None and eng.output(b).tokens == full[:len(eng.output(b).tokens)]
    assert eng.abort(b).finish_reason == "abort"
    eng.check_accounting()
    with pytest.raises(ValueError, match="already finished or aborted"):
        eng.abort(b)
    with pytest.raises(ValueError, match="unknown"):
        eng.abort(999)
    outs = _drain(eng)
    assert outs[a].tokens == cut and outs[a].finish_reason == "stop"


@pytest.mark.parametrize("prompt,new,exc,match", [
    ([], 4, ValueError, r"prompt is empty"),
    ([1, 320], 4, ValueError, r"token 1 = 320 is outside the vocabulary"),
    ([1], 0, ValueError, r"max_new_tokens=0"),
    ([1] * 60, 4, ValueError, r"more than max_context=64"),
    ([1] * 30, 4, OutOfSlots, r"needs \d+ pages in the worst case; the pool has 15 pages"),
])
def test_add_request_refuses(prompt, new, exc, match):
    eng = Engine(model="tiny", spec=SpecConfig(topk=1, num_steps=3), max_batch=2,
                 max_context=64, num_pages=16)
    with pytest.raises(exc, match=match):
        eng.add_request(prompt, new)
    assert not eng.has_unfinished()
    eng.check_accounting()
