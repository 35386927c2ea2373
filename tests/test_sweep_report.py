"""The release sweep's bookkeeping (harness/runners/sweep.py, sweep_report.py,
harness/adapters/foreign/releases.py), on made-up records: which releases a sweep covers, how
a failing run of releases is bounded, and that each bound names the engine modules that
changed across it, with their diff. No install, no network."""
from __future__ import annotations

import pytest

from harness.adapters.foreign.releases import nearest_older, since_first
from harness.runners import sweep_report
from harness.runners.kernel_suite import KERNEL_LAWS

LAW = next(iter(KERNEL_LAWS))


def test_since_first_orders_and_keeps_post_releases_but_no_pre_releases():
    got = since_first(["0.5.3", "0.4.1.post4", "0.4.1.post3", "0.4.10", "0.4.9.post6",
                       "0.5.0rc1", "0.4.2"], "0.4.1.post4")
    assert got == ["0.4.1.post4", "0.4.2", "0.4.9.post6", "0.4.10", "0.5.3"]


@pytest.mark.parametrize("version, want", [("0.5.21", "0.5.19"), ("0.5.19", "0.5.19"),
                                           ("0.4.1", "0.4.6.post5"), ("0.10.0", "0.9.0")])
def test_nearest_older_lock(version, want):
    assert nearest_older(version, ["0.4.6.post5", "0.5.19", "0.9.0", "0.5.23"]) == want


def _row(cell: str, sources: dict) -> dict:
    return {"status": "ran", "wall_s": 1.0, "cells": {law: "ok 8" for law in KERNEL_LAWS} | {
        LAW: cell}, "failures": [] if cell.startswith("ok") else [
            {"law": LAW, "replay": "python -m harness repro ..."}], "sources": sources}


def test_a_failing_run_is_bounded_by_its_passing_neighbours(tmp_path, monkeypatch):
    texts = {"a1": "x = 1\n", "a2": "x = 2\n", "b1": "y = 1\n"}
    monkeypatch.setattr("harness.runners.sweep_report.sources_dir", lambda: tmp_path / "src")
    (tmp_path / "src").mkdir()
    for sha, text in texts.items():
        (tmp_path / "src" / f"{sha}.py").write_text(text)
    rows = {"1.0": _row("ok 8", {"m": "a1", "n": "b1"}),
            "1.1": _row("FAIL (support)", {"m": "a2", "n": "b1"}),
            "1.2": {"status": "cannot run", "reason": "no wheel", "wall_s": 0.0},
            "1.3": _row("FAIL (support)", {"m": "a2", "n": "b1"}),
            "1.4": _row("ok 8", {"m": "a1", "n": "b1"}),
            "1.5": _row("FAIL (crash)", {"m": "a1", "n": "b1"})}
    runs = sweep_report.failing_runs(rows, LAW)
    assert [(r["first"], r["last"], r["before"], r["after"]) for r in runs] == [
        ("1.1", "1.3", "1.0", "1.4"), ("1.5", "1.5", "1.4", None)]
    assert [r["how"] for r in runs] == ["support", "crash"]
    text = sweep_report.report(type("C", (), {"name": "x-kernels"}), rows, wall_s=1.0,
                               record=str(tmp_path / "rec"))
    assert "fails on 1.1 to 1.3" in text and "1.0 -> 1.1: m (+1 -1)" in text
    assert "unfixed in the newest release swept" in text
    assert "no module the adapter reached changed" in text  # 1.4 -> 1.5: the same sources
    assert "1.2: no wheel" in text
    diff = (tmp_path / "rec" / "flips" / f"{LAW}-1.0-1.1.diff").read_text()
    assert "-x = 1" in diff and "+x = 2" in diff


def test_a_run_splits_where_the_law_fails_another_way():
    rows = {"1.0": _row("FAIL (support)", {}), "1.1": _row("FAIL (support)", {}),
            "1.2": _row("FAIL (crash)", {}), "1.3": _row("ok 8", {})}
    rows["1.2"]["failures"][0]["message"] = "[x/crash] variant entry: boom"
    runs = sweep_report.failing_runs(rows, LAW)
    assert [(r["first"], r["last"], r["how"]) for r in runs] == [
        ("1.0", "1.1", "support"), ("1.2", "1.2", "crash, variant entry")]
    text = sweep_report.report(type("C", (), {"name": "x"}), rows, wall_s=0.0, record=None)
    assert "after it 1.2 (fails: crash, variant entry)" in text


def test_every_law_passing_reports_no_flip():
    rows = {"1.0": _row("ok 8", {}), "1.1": _row("ok 8", {})}
    assert sweep_report.failing_runs(rows, LAW) == []
    assert "none: every law" in sweep_report.report(type("C", (), {"name": "x"}), rows,
                                                    wall_s=0.0, record=None)


def test_a_laws_pass_merges_into_the_record_and_replaces_only_its_laws():
    from harness.runners.sweep import merge
    other = next(law for law in KERNEL_LAWS if law != LAW)
    old = _row("FAIL (support)", {"m": "a1"})
    old["failures"].append({"law": other, "replay": "old"})
    new = {"status": "ran", "wall_s": 2.0, "cells": {LAW: "ok 8"}, "why_not": {},
           "failures": [], "sources": {"m": "a2"}}
    got = merge(old, new)
    assert got["cells"][LAW] == "ok 8" and got["cells"][other] == "ok 8"
    assert got["failures"] == [{"law": other, "replay": "old"}]
    assert got["sources"] == {"m": "a2"} and got["wall_s"] == 3.0
    assert [sorted(p["laws"]) for p in got["passes"]] == [sorted(KERNEL_LAWS), [LAW]]


def test_a_version_span_takes_every_release_between_its_ends(monkeypatch):
    from harness.runners import cli
    every = ["0.1", "0.2", "0.3", "0.4"]
    monkeypatch.setattr("harness.adapters.foreign.releases.every_release", lambda cls: every)
    cls = type("K", (), {"DIST": "x", "SWEEP": ("0.4",)})
    assert cli._sweep_versions(cls, "0.2..0.3") == ["0.2", "0.3"]
    assert cli._sweep_versions(cls, "..0.2") == ["0.1", "0.2"]
    assert cli._sweep_versions(cls, "0.3..") == ["0.3", "0.4"]
    assert cli._sweep_versions(cls, None) == ["0.4"]
    with pytest.raises(ValueError, match="'0.9' is not a release"):
        cli._sweep_versions(cls, "0.2..0.9")


def test_a_findings_range_counts_only_the_found_on_check_and_skips_na():
    from harness.runners.findings_sweep import ranges
    cells = {"1": "holds", "2": "reproduces (support)", "3": "n/a (law n/a)",
             "4": "reproduces (support)", "5": "reproduces (crash)", "6": "holds"}
    rows = {v: {"status": "ran", "cells": {"f": c}} for v, c in cells.items()}
    assert ranges(rows, "f", found_on="4") == [
        {"first": "2", "last": "4", "before": "1", "after": "5"}]
    # without the found-on release in the sweep, any failure of the case counts
    assert ranges(rows, "f", found_on="9") == [
        {"first": "2", "last": "5", "before": "1", "after": "6"}]
