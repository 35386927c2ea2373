"""A black-box law declared in `parts` (harness/laws/declaration.py) runs on a GPU as that
many pytest tests side by side: together they draw at least the whole law's examples, and
under a derandomized profile each part draws its own (harness/runners/engine_suite.py)."""
from __future__ import annotations

import pytest
from hypothesis import settings

from harness.laws.declaration import Law
from harness.runners import engine_suite

LAW = "engine_seeded_determinism"
PROFILE = settings(max_examples=6, derandomize=True, database=None)


def _drawn(monkeypatch, part) -> list:
    seen = []
    monkeypatch.setattr(engine_suite, "run_case", lambda law, case, device: seen.append(case))
    engine_suite.law_test(LAW, engine="specdec", device="cpu", profile=PROFILE, part=part)()
    return seen


def test_parts_share_the_examples_and_draw_their_own(monkeypatch):
    """Three parts of a 6-example law draw 2 each, and not the same ones. The control: one
    part run twice draws the same examples (derandomized), so it is the part's own seed
    that sets them apart."""
    whole = _drawn(monkeypatch, (0, 1))
    parts = [_drawn(monkeypatch, (k, 3)) for k in range(3)]
    assert len(whole) == 6 and [len(p) for p in parts] == [2, 2, 2]
    assert len({repr(c) for p in parts for c in p}) > 2, parts
    assert [repr(c) for c in _drawn(monkeypatch, (1, 3))] == [repr(c) for c in parts[1]]


def test_parts_must_be_a_positive_integer():
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(ValueError, match=rf"law x: parts={bad!r}: expected an integer >= 1"):
            Law(name="x", summary="s", controls=("c",), rank=1, check=print, cases=print,
                parts=bad)
