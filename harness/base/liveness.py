"""Law liveness: an engine given requests finishes them. Every step either commits a token
to some request or readies one (admission, prefill, retraction, an overlapped round's
launch); a run of IDLE_LIMIT consecutive steps that commits no token while requests are
unfinished is a stall, a failure named with the engine's state, never a hang that only a
test timeout ends.

Observables: per request, its committed tokens and finish reason (Engine.output); whether
the engine has unfinished work (Engine.has_unfinished). The harness's serving loops step
through Progress (strategies/runs.serve, serve_waves, the trained pair's measure, the path
and overlap laws' own loops, the specdec adapter), so every law that serves requests
checks this one too."""
from __future__ import annotations

from harness.base import stop
from harness.base.failure import OracleFailure

NAME = "liveness"  # the law whose checks this module raises (OracleFailure)

# Idle steps are rare and short: an overlapped round's launch, admissions after a retraction.
IDLE_LIMIT = 64


class Progress:
    """Watches the requests a loop submitted: `step()` steps the engine and fails once
    IDLE_LIMIT steps in a row commit nothing."""

    def __init__(self, engine, limit: int = IDLE_LIMIT) -> None:
        self.engine, self.limit = engine, limit
        self.rids: list[int] = []
        self.open: set[int] = set()
        self.closed = 0  # tokens + 1 of the requests already finished
        self.idle, self.steps, self.last = 0, 0, -1

    def add(self, rid: int) -> int:
        self.rids.append(rid)
        self.open.add(rid)
        return rid

    def _committed(self) -> int:
        done = 0
        for r in list(self.open):
            o = self.engine.output(r)
            if o.finish_reason is not None:
                self.open.discard(r)
                self.closed += len(o.tokens) + 1
            else:
                done += len(o.tokens)
        return self.closed + done

    def step(self) -> None:
        stop.check()  # a red gate ends the test here, between steps (harness/base/stop.py)
        self.engine.step()
        self.steps += 1
        done = self._committed()
        busy = self.engine.has_unfinished()  # an engine with nothing to do is not stalled
        self.idle = self.idle + 1 if done == self.last and busy else 0
        self.last = done
        if self.idle >= self.limit:
            unfinished = sorted(self.open)
            raise OracleFailure(NAME, NAME, (
                f"{self.idle} steps in a row committed no token (step {self.steps}); "
                f"{len(unfinished)} of {len(self.rids)} requests unfinished (ids "
                f"{unfinished[:8]}), {done} tokens and finishes so far; stats "
                f"{self.engine.stats}"))

    def run_to_end(self) -> None:
        while self.engine.has_unfinished():
            self.step()
