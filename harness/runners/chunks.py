"""Budgeted Hypothesis runs, shared by the `check` and `sweep` runners (white box
harness/runners/check.py, engine laws engine_check.py, kernel laws kernel_suite.py): a law
runs in chunks of CHUNK examples and the budget is read between chunks.

Every Hypothesis run starts from the strategy's simplest case (Hypothesis tries it first), so
chunks of two would spend half the budget on that one case. A case that already passed is
rejected (`hypothesis.assume`) and Hypothesis draws another; a failing case is never
recorded, so its shrinking replays are not rejected; a strategy whose every case has passed
ends the law (`exhausted`) instead of failing it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from hypothesis import HealthCheck, Phase, assume, given, seed, settings
from hypothesis.errors import Unsatisfiable

CHUNK = 2  # examples per Hypothesis run; the budget is checked between runs


class PassedCases:
    def __init__(self) -> None:
        self._keys: set[str] = set()

    @staticmethod
    def key(case) -> str:
        if hasattr(case, "to_dict"):
            return json.dumps(case.to_dict(), sort_keys=True, default=str)
        return repr(case)

    def new(self, case) -> bool:
        return self.key(case) not in self._keys

    def add(self, case) -> None:
        self._keys.add(self.key(case))


@dataclass
class Chunk:
    """What one run did: the cases it ran, its failure (minimal case or None, exception),
    whether the strategy is exhausted, and the cases it skipped as not runnable here."""
    seen: list = field(default_factory=list)
    failure: tuple | None = None
    exhausted: bool = False
    skipped: int = 0

    def corners(self):
        """Each corner tag of each case run (a case's `corners`: what `harness check` counts)."""
        return (tag for c in self.seen for tag in getattr(c, "corners", ()))


def run_chunk(strategy, *, check: Callable, chunk_seed: int, profile, phases,
              passed: PassedCases, runnable: Callable | None = None) -> Chunk:
    """CHUNK examples of `strategy` through `check` (raises on a violation), shrinking a
    failure; `runnable(case)` False skips a case this machine cannot run."""
    out, failing = Chunk(), []

    @seed(chunk_seed)
    @settings(profile or settings.default, max_examples=CHUNK, database=None, deadline=None,
              print_blob=False, report_multiple_bugs=False,
              phases=[p for p in phases if p in (Phase.generate, Phase.shrink)],
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(case):
        assume(passed.new(case))
        if runnable is not None and not runnable(case):
            out.skipped += 1
            return
        out.seen.append(case)
        try:
            check(case)
        except Exception:
            failing.append(case)
            raise
        passed.add(case)

    try:
        run()
    except Unsatisfiable:
        out.exhausted = True
    except Exception as exc:  # noqa: BLE001 - every kind is a failure to report
        inner = getattr(exc, "exceptions", None)  # Hypothesis's Flaky groups what it saw
        if inner:
            exc = inner[0]
            exc.add_note("flaky: it passed when Hypothesis replayed it in the same process "
                         "(state the engine keeps across calls?)")
        out.failure = (failing[-1] if failing else None, exc)
    return out
