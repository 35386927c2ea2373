"""Overlap scheduling's ordering rules and bad input (contract section 10); the token /
KV / accounting equality with the synchronous engine is the law overlap_equals_sync
(harness/laws/overlap_equals_sync.py, drawn in tests/test_properties.py)."""
from __future__ import annotations

import pytest
import torch

from harness.strategies.runs import default_device
from specdec import Engine, SpecConfig
from hypothesis import given, settings, strategies as st

from specdec.host import to_device
from specdec.overlap import PLACEHOLDER, InFlight, RowState, UnresolvedRead, lagging
from specdec.rounds import RoundRunner

DEVICE = default_device()
PROMPTS = [[1, 2, 3, 4, 5], [7, 8, 9], [11, 12, 13, 14]]


def _engine(spec=SpecConfig(topk=1, num_steps=3, num_draft_tokens=4), **kw):
    return Engine("tiny", spec=spec, device=DEVICE, max_context=96, overlap=True, **kw)


def test_results_cannot_be_read_before_their_event():
    flight = InFlight("spec", [], [torch.arange(3, device=DEVICE)])
    with pytest.raises(UnresolvedRead, match="before its event"):
        flight.peek()
    assert flight.wait() == [0, 1, 2] and flight.peek() == [0, 1, 2]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_row_state_inputs_skip_only_gathers_that_change_nothing(data):
    """A round's (seq_lens, pending) with the gather skipped for a host list that holds no
    placeholder (`lagging`) equal the full gather's, for any rows, host values and device
    state; and skipping a list that holds one would differ (the check can fail)."""
    n_rows = 9
    state = RowState(n_rows, torch.device(DEVICE))
    state.seq_lens.copy_(torch.tensor(data.draw(st.lists(st.integers(0, 500), min_size=n_rows,
                                                         max_size=n_rows))))
    state.pending.copy_(state.seq_lens * 7 + 1000)  # never equal to a host value below 1000
    rows = data.draw(st.lists(st.integers(1, n_rows - 1), min_size=1, max_size=n_rows - 1,
                              unique=True))
    value = st.one_of(st.just(PLACEHOLDER), st.integers(0, 999))
    seq = data.draw(st.lists(value, min_size=len(rows), max_size=len(rows)))
    pending = data.draw(st.lists(value, min_size=len(rows), max_size=len(rows)))
    host = (rows, seq, pending)
    dev = to_device(torch.device(DEVICE), *host)
    want = state.inputs(*dev, (True, True))
    got = state.inputs(*dev, lagging(host))
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    for i, lst in enumerate((seq, pending)):
        if PLACEHOLDER in lst:  # the negative control: skipping this gather is visible
            wrong = state.inputs(*dev, tuple(j != i for j in range(2)))
            assert not torch.equal(wrong[i], want[i])


@pytest.mark.parametrize("spec", [None, SpecConfig(topk=2, num_steps=2, num_draft_tokens=4)],
                         ids=["decode", "spec"])
def test_round_i_plus_1_is_launched_before_round_i_is_waited(monkeypatch, spec):
    """With overlap on, the host waits for round i only after round i+1 is queued; and it
    waits for every round it launched."""
    log = []
    launch, wait = RoundRunner.launch, InFlight.wait

    def logged_launch(self, reqs):
        flight = launch(self, reqs)
        flight.n = sum(1 for e in log if e[0] == "launch")
        log.append(("launch", flight.n))
        return flight

    def logged_wait(self):
        log.append(("wait", self.n))
        return wait(self)

    monkeypatch.setattr(RoundRunner, "launch", logged_launch)
    monkeypatch.setattr(InFlight, "wait", logged_wait)
    eng = _engine(spec, cuda_graph=True, cuda_graph_bs=[1, 2, 4])
    eng.generate(PROMPTS, max_new_tokens=10)
    launches = [n for k, n in log if k == "launch"]
    assert [n for k, n in log if k == "wait"] == launches  # each round waited once, in order
    for i in launches[:-1]:
        assert log.index(("launch", i + 1)) < log.index(("wait", i)), log
    eng.check_accounting([])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA sync debug mode")
def test_launch_does_not_sync_with_the_device(monkeypatch):
    """No .tolist() / .item() / blocking copy while a round is queued (steady state, graphs)."""
    launch = RoundRunner.launch

    def strict(self, reqs):
        torch.cuda.set_sync_debug_mode("error")
        try:
            return launch(self, reqs)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    eng = _engine(cuda_graph=True, cuda_graph_bs=[1, 2, 4], dtype="bfloat16")
    rids = [eng.add_request(p, 20) for p in PROMPTS]
    eng.step()  # admission's prefill reads the first token on the host (before any launch)
    monkeypatch.setattr(RoundRunner, "launch", strict)
    for _ in range(4):
        eng.step()
    monkeypatch.setattr(RoundRunner, "launch", launch)
    while eng.has_unfinished():
        eng.step()
    assert all(eng.output(r).finish_reason == "length" for r in rids)


def test_abort_under_overlap_defers_release_and_leaks_nothing():
    eng = _engine()
    rids = [eng.add_request(p, 12) for p in PROMPTS]
    eng.step()
    eng.step()
    assert eng.scheduler.inflight is not None  # a round running the requests is in flight
    out = eng.abort(rids[0])
    assert out.finish_reason == "abort"
    held = eng.scheduler.deferred
    assert [r.rid for r in held] == [rids[0]] and held[0].pages  # kept for the round in flight
    eng.check_accounting()  # held pages count as held, not leaked
    for rid, state in ((rids[0], "already finished or aborted"), (999, "unknown")):
        with pytest.raises(ValueError, match=state):
            eng.abort(rid)
    eng.step()  # the round resolves: its results for the aborted request are discarded
    assert not eng.scheduler.deferred and eng.output(rids[0]).tokens == out.tokens
    while eng.has_unfinished():
        eng.step()
    eng.check_accounting([])
    assert len(eng.memory.req_pool._free_rows) == eng.max_batch


def test_overlap_must_be_a_bool():
    with pytest.raises(ValueError, match="overlap='yes'"):
        Engine("tiny", spec=None, overlap="yes")
