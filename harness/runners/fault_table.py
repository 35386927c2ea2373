"""`python -m harness acceptance --fault-table`: the first zoo's draft-side faults against the
acceptance laws alone.

Draft-side bugs reach users as lower acceptance, not as wrong tokens (harness.md). For each
fault (conventions section 9, first table), switched on alone: the accept length of each
configuration along each path, against the same configuration's without the fault, and the
verdicts of acceptance_floor and acceptance_path_invariant only (no structural, KV-content or
self-draft oracle runs here). A fault is caught when either law fails on some path; an
engine that crashes under the fault is reported as such (caught, but not by acceptance)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

from harness.laws.acceptance_floor import BASELINES, FloorConfig, measure_against_baseline
from harness.laws.acceptance_path_invariant import PathPair, prop_acceptance_path_invariant
from harness.laws.common import OracleFailure
from harness.strategies.trained_pair import measure
from specdec import faults

# The first zoo's draft-side faults; SGLang #25015 (the draft position off by one that shipped
# as an acceptance drop, issue 25's seed) is the first two.
DRAFT_FAULTS = (
    "draft_positions_early_increment", "draft_capture_positions_not_restored",
    "draft_per_step_loc_unsliced", "draft_per_step_loc_strided",
    "draft_extend_reads_graph_buffers_on_fallback", "stale_draft_kv_after_accept",
    "page_tail_not_duplicated", "draft_kv_indices_missing_topk",
    "draft_extend_width_steps_plus_one",
)
CONFIGS = (("eagle", 1, 3, 4), ("eagle", 4, 4, 8), ("standalone", 1, 3, 4),
           ("standalone", 4, 4, 8))
# Paths: eager; CUDA graphs (CPU: the stand-in) with buckets below the batch, half of it
# joining later (replays, padding and eager fallback); pages of 4 tokens.
PATHS = {"eager": {}, "graph": dict(cuda_graph=True, graph_bs=(1, 2, 4), batch="halves"),
         "page4": dict(page_size=4)}
# Path B of the path-invariance runs (A: eager, page 1, the batch alone).
B_PATHS = {"graph": dict(b_cuda_graph=True), "page4": dict(b_page_size=4),
           "overlap+halves": dict(b_overlap=True, b_batch="halves")}


def _verdict(fn) -> tuple[str, object]:
    try:
        return "pass", fn()
    except OracleFailure as exc:
        return "FAIL", exc
    except Exception as exc:  # noqa: BLE001  the engine died under the fault
        return f"crash ({type(exc).__name__})", exc


def _floor_rows(pair, device: str, dtype: str, baselines: str, n: int, new: int,
                plen: int) -> list[dict]:
    rows = []
    for drafter, topk, steps, ndt in CONFIGS:
        for path, kw in PATHS.items():
            cfg = FloorConfig(drafter, topk, steps, ndt, dtype=dtype, **kw)
            verdict, res = _verdict(lambda: measure_against_baseline(pair, cfg, device, baselines,
                                                                     n, new, plen))
            if verdict == "pass":
                m, base, bound = res
                verdict = "pass" if m.mean >= bound else "FAIL"
                rows.append(dict(config=cfg.key, path=path, mean=m.mean, baseline=base["mean"],
                                 bound=bound, verdict=verdict))
            else:
                rows.append(dict(config=cfg.key, path=path, mean=None, baseline=None,
                                 bound=None, verdict=verdict))
    return rows


def _path_rows(pair, device: str, dtype: str, n: int, max_new: int) -> list[dict]:
    rows = []
    for drafter, topk, steps, ndt in CONFIGS:
        base = PathPair(topk, steps, ndt, 1, pair.draft_arg(drafter), n, 24, max_new, 1,
                        dtype=dtype, model=pair.target, ragged=True, graph_bs=(1, 2, 4))
        for path, kw in B_PATHS.items():
            cfg = dataclasses.replace(base, **kw)
            verdict, _ = _verdict(lambda: prop_acceptance_path_invariant(cfg, device))
            rows.append(dict(config=f"{drafter} topk={topk} steps={steps} ndt={ndt}",
                             path=f"eager vs {path}", verdict=verdict))
    return rows


def fault_table(pair, device: str, dtype: str, n_prompts: int, max_new: int, prompt_len: int,
                names: list[str] | None = None, baselines: str = BASELINES) -> list[dict]:
    """One row per fault: the largest drop of accept length it causes (configuration and
    path), and whether the acceptance laws alone catch it."""
    names = list(names or DRAFT_FAULTS)
    unknown = [n for n in names if n not in faults.REGISTRY]
    if unknown:
        raise ValueError(f"unknown fault(s) {unknown}; draft-side faults: {list(DRAFT_FAULTS)}")
    clean = {(d, k, s, n): measure(pair, d, k, s, n, n_prompts, max_new, device, dtype,
                                   prompt_len=prompt_len).mean for d, k, s, n in CONFIGS}
    print(f"accept length without a fault (eager, {n_prompts} prompts x {max_new} tokens): "
          + ", ".join(f"{d} {k},{s},{n}: {v:.3f}" for (d, k, s, n), v in clean.items()))
    print(f"\n{'fault':<45} {'worst config / path':<38} {'without':>7} {'with':>6} "
          f"{'floor':>6} {'paths':>6}  caught")
    rows = []
    for name in names:
        with faults.active(name):
            floor = _floor_rows(pair, device, dtype, baselines, n_prompts, max_new, prompt_len)
            paths = _path_rows(pair, device, dtype, min(n_prompts, 6), min(max_new, 24))
        measured = [r for r in floor if r["mean"] is not None]
        worst = min(measured, key=lambda r: r["mean"] - r["baseline"], default=None)
        floor_v = _summary([r["verdict"] for r in floor])
        path_v = _summary([r["verdict"] for r in paths])
        caught = floor_v != "pass" or path_v != "pass"
        row = dict(fault=name, source=faults.REGISTRY[name].source, floor=floor_v,
                   paths=path_v, caught=caught, floor_rows=floor, path_rows=paths,
                   worst=worst and f"{worst['config']} / {worst['path']}",
                   without=worst and worst["baseline"], with_fault=worst and worst["mean"])
        rows.append(row)
        w = "-" if worst is None else f"{worst['baseline']:>7.3f} {worst['mean']:>6.3f}"
        print(f"{name:<45} {row['worst'] or '-':<38} {w} {floor_v:>6} {path_v:>6}  "
              f"{'yes' if caught else 'NO'}", flush=True)
    caught = sum(r["caught"] for r in rows)
    print(f"\n{caught}/{len(rows)} draft-side faults caught by the acceptance laws alone "
          "(floor: acceptance_floor on any configuration x path; paths: "
          "acceptance_path_invariant on any pair; crash: the engine died under the fault)")
    return rows


def _summary(verdicts: list[str]) -> str:
    """FAIL if any law run failed, else crash if any crashed, else pass."""
    if "FAIL" in verdicts:
        return "FAIL"
    crashed = [v for v in verdicts if v.startswith("crash")]
    return "crash" if crashed else "pass"


def fault_table_isolated(names: list[str] | None, argv: list[str]) -> list[dict]:
    """One process per fault (on a GPU a fault may leave the CUDA context unusable: a device
    assert, an illegal address), each `python -m harness acceptance --fault-table --faults
    NAME --in-process` with the caller's other arguments; their rows, merged."""
    names = list(names or DRAFT_FAULTS)
    rest, skip = [], False
    for a in argv:  # drop the caller's own --faults / --out / --fault-table
        if skip:
            skip = False
            continue
        if a in ("--faults", "--out"):
            skip = True
            continue
        if a == "--fault-table" or a.startswith(("--faults=", "--out=")) or a == "acceptance":
            continue
        rest.append(a)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = os.path.join(tmp, f"{name}.json")
            cmd = [sys.executable, "-m", "harness", "acceptance", "--fault-table", "--faults",
                   name, "--in-process", "--out", out, *rest]
            subprocess.run(cmd, check=False)
            if os.path.exists(out):
                with open(out) as f:
                    rows += json.load(f)["results"]
            else:  # the process itself died: caught, by a crash
                rows.append(dict(fault=name, source=faults.REGISTRY[name].source,
                                 floor="crash (process)", paths="crash (process)",
                                 caught=True, worst=None, without=None, with_fault=None))
    print(f"\n{'fault':<45} {'without':>7} {'with':>6} {'floor':>6} {'paths':>6}  caught")
    for r in rows:
        w = ("-" if r["without"] is None else f"{r['without']:>7.3f} {r['with_fault']:>6.3f}")
        print(f"{r['fault']:<45} {w} {r['floor']:>6} {r['paths']:>6}  "
              f"{'yes' if r['caught'] else 'NO'}")
    print(f"\n{sum(r['caught'] for r in rows)}/{len(rows)} draft-side faults caught by the "
          "acceptance laws alone (one process per fault)")
    return rows
