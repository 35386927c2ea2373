"""The fault table's bookkeeping (harness/runners/fault_table.py): which captured sizes cover
a batch, and how a fault's row is read: caught, missed, or never seen by a real request."""
from __future__ import annotations

from harness.runners.fault_table import _caught, _tally, covering


def test_covering_buckets_reach_the_batch():
    assert covering(1) == (1,)
    assert covering(6) == (1, 2, 4, 8)
    assert covering(32) == (1, 2, 4, 8, 16, 32)


def test_a_fault_without_effect_is_neither_caught_nor_a_miss():
    rows = [dict(fault="a", caught=True, effect=True), dict(fault="b", caught=False, effect=True),
            dict(fault="c", caught=False, effect=False)]
    assert [_caught(r) for r in rows] == ["yes", "NO", "no effect"]
    line = _tally(rows)
    assert line.startswith("\n1/2 draft-side faults that reach acceptance caught")
    assert line.endswith("['c']")
    # rows written before the effect column (an older JSON): every fault counts
    assert _tally([dict(fault="d", caught=False)]).startswith("\n0/1 ")


def test_clean_runs_survive_the_file_the_fault_processes_share(tmp_path):
    from harness.runners.fault_table import load_clean, save_clean
    clean = {("eagle topk=1 steps=3 ndt=4", "graph"): [3, 1, 4], ("x", "page16"): []}
    save_clean(clean, str(tmp_path / "clean.json"))
    assert load_clean(str(tmp_path / "clean.json")) == clean
