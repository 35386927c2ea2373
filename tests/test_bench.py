"""CPU smoke tests of `python -m specdec bench ...` and `python -m harness bench`: each bench
runs with tiny settings and writes a stamped JSON and a PNG. Numbers are not checked (CPU
timings mean nothing)."""
from __future__ import annotations

import json

import pytest
import torch

from specdec.__main__ import main

pytest.importorskip("matplotlib")

SMALL = ["--models", "tiny", "--batch-sizes", "1,2", "--context", "32", "--iters", "2",
         "--warmup", "1", "--device", "cpu", "--dtype", "float32"]
STAMP = ("device", "date", "torch", "triton", "command", "bench", "results")


def _run(tmp_path, what, *extra):
    if what in ("decode", "spec"):
        extra = (*extra, "--e2e-tokens", "6")
    out = tmp_path / f"{what}.json"
    argv = ["bench", what, *SMALL, *extra, "--out", str(out)]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert all(k in doc for k in STAMP), sorted(doc)
    assert doc["bench"] == what and doc["command"].startswith("python -m specdec bench " + what)
    png = tmp_path / f"{what}.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    return doc


def test_bench_decode(tmp_path):
    doc = _run(tmp_path, "decode", "--compile-mode", "none")
    impls = {(r["bs"], r["impl"]) for r in doc["results"]}
    assert impls == {(b, i) for b in (1, 2) for i in ("eager", "graph", "graph-replay", "dense",
                                                      "engine-step", "overlap")}
    assert {(r["bs"], r["overlap"]) for r in doc["e2e"]} == {(b, o) for b in (1, 8)
                                                             for o in (False, True)}
    assert (tmp_path / "decode-e2e.png").read_bytes()[:4] == b"\x89PNG"
    assert all(r["floor_ms"] > 0 and r["ratio"] > 0 for r in doc["results"])
    assert doc["copy_bandwidth"]["bytes_per_s"] > 0 and "convention" in doc["copy_bandwidth"]


def test_bench_spec(tmp_path):
    doc = _run(tmp_path, "spec", "--spec-configs", "1,3,4;2,2,4")
    assert len(doc["results"]) == 4
    for r in doc["results"]:
        assert set(r["phases_ms"]) == {"draft_decode", "verify", "accept_compact", "draft_extend", "host"}
        assert r["break_even_acceptance_length"] == pytest.approx(r["round_ms"] / r["decode_step_ms"])
    assert {(r["bs"], r["impl"], r["topk"]) for r in doc["engine_step"]} == {
        (b, i, k) for b in (1, 2) for i in ("engine-step", "overlap") for k in (1, 2)}
    assert {r["overlap"] for r in doc["e2e"]} == {False, True}


def test_bench_harness(tmp_path):
    """The harness bench is the harness's own command (the engine does not import it)."""
    from harness.__main__ import main as harness_main
    out = tmp_path / "harness.json"
    assert harness_main(["bench", "--device", "cpu", "--budget", "0.1", "--properties",
                         "self_draft", "--skip-pytest", "--skip-zoo",  # both: minutes
                         "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert all(k in doc for k in STAMP), sorted(doc)
    assert doc["bench"] == "harness" and doc["command"].startswith("python -m harness bench")
    assert (tmp_path / "harness.png").read_bytes()[:4] == b"\x89PNG"
    assert doc["results"][0]["examples"] > 0 and doc["pytest"] == {"status": "skipped"}
    assert doc["zoo"] == {"status": "skipped"}


def test_engine_bench_points_to_harness_bench(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "harness"])
    assert "python -m harness bench" in capsys.readouterr().err


def test_bench_graphs_and_plot_redraw(tmp_path):
    doc = _run(tmp_path, "graphs", "--batch-sizes", "1", "--new-tokens", "8")
    assert {r["cuda_graph"] for r in doc["results"]} == {False, True}
    (tmp_path / "graphs.png").unlink()
    assert main(["bench", "plot", str(tmp_path / "graphs.json")]) == 0
    assert (tmp_path / "graphs.png").exists()


def test_dense_peer_matches_engine():
    """The compile peer computes the engine's model: same greedy tokens from the same weights."""
    from specdec import Engine
    from specdec.bench.dense import DenseDecoder
    eng = Engine(model="tiny", spec=None, max_batch=2, max_context=64)
    prompts = [[5, 9, 2, 7, 1], [3, 3, 8, 4, 6]]
    want = eng.generate(prompts, max_new_tokens=4)
    dec = DenseDecoder(eng.target, 2, 16)
    toks, got = torch.tensor(prompts).T, [[], []]  # [positions, batch]
    with torch.inference_mode():
        for p in range(len(prompts[0]) + 3):
            ids = toks[p] if p < len(prompts[0]) else torch.tensor([g[-1] for g in got])
            nxt = dec(ids, torch.tensor([p])).argmax(-1)
            if p >= len(prompts[0]) - 1:
                for g, t in zip(got, nxt.tolist()):
                    g.append(t)
    assert got == want
