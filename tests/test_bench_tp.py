"""CPU runs of the tensor-parallel benches (`bench decode --tp 2`, `bench spec --tp 2`, gloo):
every row's timeline adds up (collectives <= busy <= span, the figure that read 306% of the
step when profiler rows were summed by name), both all-reduce paths are there, and the
speedups point at the tp-1 rows. Numbers are not judged (CPU timings mean nothing)."""
from __future__ import annotations

import json

from specdec.__main__ import main
from specdec.bench.timeline import union_us

SMALL = ["--models", "tiny", "--batch-sizes", "1,2", "--context", "16", "--iters", "2",
         "--warmup", "1", "--device", "cpu", "--dtype", "float32", "--tp", "2", "--no-plot"]


def _rows(tmp_path, what, *extra):
    out = tmp_path / f"{what}.json"
    assert main(["bench", what, *SMALL, *extra, "--out", str(out)]) == 0
    return json.loads(out.read_text())["results"]


def _adds_up(line, step_ms):
    assert 0 < line["collective_ms"] <= line["busy_ms"] <= line["span_ms"] + 1e-9, line
    assert line["collectives_per_step"] > 0
    top = line["top_kernels"]
    assert top and sum(k["ms_per_step"] for k in top) <= line["span_ms"] * (1 + 1e-6)


def test_union_counts_overlaps_once():
    assert union_us([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4
    assert union_us([]) == 0


def test_bench_decode_tp(tmp_path):
    """One command, the whole table: tp 1 (our graph step and the compile peer, here the
    uncompiled dense step), tp 2 with each all-reduce path, each against its floor."""
    rows = _rows(tmp_path, "decode", "--compile-mode", "none")
    assert {(r["bs"], r["tp"], r["all_reduce"], r["impl"]) for r in rows} == {
        (b, t, p, i) for b in (1, 2) for t, p, i in ((1, "nccl", "graph"), (1, None, "dense"),
                                                    (2, "auto", "graph"), (2, "nccl", "graph"))}
    for r in rows:
        assert r["floor_ms"] > 0 and r["ratio"] > 0
        if r["tp"] == 2:
            _adds_up(r["timeline"], r["step_ms"])
            assert r["speedup_vs_tp1"] > 0


def test_bench_spec_tp(tmp_path):
    rows = _rows(tmp_path, "spec", "--spec-configs", "1,2,3", "--e2e-tokens", "0")
    assert {(r["bs"], r["tp"], r["all_reduce"]) for r in rows} == {
        (b, t, p) for b in (1, 2) for t, p in ((1, "nccl"), (2, "auto"), (2, "nccl"))}
    for r in rows:
        if r["tp"] == 2:
            _adds_up(r["timeline"], r["round_ms"])


def test_allreduce_crossover_reads_the_rows():
    """The crossover is the largest size the fused peer kernel wins; 'wins_below' says
    whether it won every smaller size too (a single choice by size is then right)."""
    from specdec.bench.allreduce import crossovers
    rows = [{"hidden": 8, "bytes": b, "path": p, "us": us} for b, p, us in [
        (16, "peer+norm", 1), (16, "nccl+norm", 2), (32, "peer+norm", 3), (32, "nccl+norm", 2),
        (64, "peer+norm", 1), (64, "nccl+norm", 5), (16, "peer", 9), (16, "nccl", 1)]]
    assert crossovers(rows) == {8: {"crossover_bytes": 64, "wins_below": False}}
    rows = [r for r in rows if r["bytes"] != 32]
    assert crossovers(rows) == {8: {"crossover_bytes": 64, "wins_below": True}}
    never = [dict(r, us=10) if r["path"] == "peer+norm" else r for r in rows]
    assert crossovers(never)[8]["crossover_bytes"] is None


def test_allreduce_bench_refuses_cpu(capsys):
    import pytest
    with pytest.raises(SystemExit, match="needs --device cuda"):
        main(["bench", "allreduce", "--tp", "2", "--device", "cpu", "--no-plot"])


def test_bench_e2e_tp(tmp_path):
    """`bench e2e --tp 2`: the trained pair end to end at tp 1 and tp 2 in one run, each
    lossless against its plain decoding, the tp-2 rows read against the tp-1 rows."""
    out = tmp_path / "e2e.json"
    assert main(["bench", "e2e", "--tp", "2", "--device", "cpu", "--dtype", "float32",
                 "--batch-sizes", "1", "--e2e-tokens", "4", "--iters", "1", "--spec-configs",
                 "1,2,3", "--no-plot", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["tp"] for r in rows] == [1, 2]
    assert all(r["outputs_equal_plain"] and r["mean_accept_length"] >= 1 for r in rows)
    assert rows[1]["plain_vs_tp1"] > 0 and rows[1]["spec_vs_tp1"] > 0
    assert "outputs_equal_tp1" in rows[1]
