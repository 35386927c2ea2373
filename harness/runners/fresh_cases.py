"""Budgeted runs of a few examples each (the `check`, `sweep` runners) start every Hypothesis
run from the strategy's simplest case: Hypothesis tries it first. Runs of two examples would
spend half the budget on that one case. A case that already passed is rejected
(`hypothesis.assume`), so Hypothesis draws another; a failing case is never recorded, so its
shrinking replays are not rejected."""
from __future__ import annotations

import json


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
