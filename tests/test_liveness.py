"""Law liveness: a stalled engine fails, named, instead of hanging the loop that drives it."""
from __future__ import annotations

import pytest

from harness.base.failure import OracleFailure
from harness.base.liveness import Progress
from harness.strategies.runs import serve
from specdec import Engine


def _engine() -> Engine:
    return Engine(model="tiny", spec=None, device="cpu", max_batch=2, max_context=64)


def test_a_live_engine_finishes():
    outs = serve(_engine(), [[1, 2, 3], [4, 5]], [5, 3], [None, None])
    assert [len(o.tokens) for o in outs] == [5, 3]


def test_an_engine_that_stops_committing_is_named(monkeypatch):
    """Negative control: steps that run but commit nothing (the scheduler's step replaced by
    a no-op) fail the law after IDLE_LIMIT steps, naming the unfinished requests."""
    eng = _engine()
    progress = Progress(eng, limit=8)
    rid = progress.add(eng.add_request([1, 2, 3], 4))
    monkeypatch.setattr(eng.scheduler, "step", lambda: [])
    with pytest.raises(OracleFailure, match=r"\[liveness\] 8 steps in a row committed no token"
                                            rf".*requests unfinished \(ids \[{rid}\]\)"):
        progress.run_to_end()
