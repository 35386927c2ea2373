"""`python -m harness acceptance --fault-table`: the first zoo's draft-side faults against the
acceptance laws alone.

Draft-side bugs reach users as lower acceptance, not as wrong tokens (docs/contract.md). For each
fault (contract section 9, first table), switched on alone: the accept length of each
configuration along each path, against the same configuration's without the fault, and the
verdicts of acceptance_floor and acceptance_path_invariant only (no structural, KV-content or
self-draft oracle runs here). A fault is caught when either law fails on some path; an
engine that crashes under the fault is reported as such (caught, but not by acceptance). A
fault that leaves every round of every run exactly as it was without it (same accept
lengths, configuration by configuration, path by path) never reaches a real request's
acceptance, so no acceptance law can see it: the table reports it as "no effect" and leaves
it to the structural oracles, rather than counting it as a miss or as caught."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from harness.laws.acceptance_floor import BASELINES, FloorConfig, measure_against_baseline
from harness.laws.acceptance_path_invariant import PathPair, prop_acceptance_path_invariant
from harness.base.failure import OracleFailure
from harness.strategies.trained_pair import measure
from specdec import faults
from specdec.defaults import PAGE_SIZE

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
# Paths: eager; CUDA graphs (CPU: the stand-in) with buckets covering the batch (every round
# replayed, padded lanes as the batch shrinks), half of it joining later; graphs with buckets
# below the batch (eager fallback until it shrinks); pages of 16 tokens.
PATHS = {"eager": {}, "graph": dict(cuda_graph=True, graph_bs="cover", batch="halves"),
         "graph-fallback": dict(cuda_graph=True, graph_bs=(1, 2, 4), batch="halves"),
         "page16": dict(page_size=16)}
# Path B of the path-invariance runs (A: eager, page 1, the batch alone).
B_PATHS = {"graph": dict(b_cuda_graph=True), "page16": dict(b_page_size=16),
           "overlap+halves": dict(b_overlap=True, b_batch="halves")}
PATH_PROMPTS, PATH_TOKENS = 12, 48  # the path-invariance runs' size (at most)
# The path-invariance runs compute in float32 whatever the table's dtype: their tie excuse is
# TIE_EPS of the dtype, and bf16's (0.25 logits) sits above the gap between a tree's k-th
# and (k+1)-th candidates in most rounds, so a bf16 tree comparison mostly ends at its first
# round; float32's (1e-3) lets it run on. The floor keeps the table's dtype (its baseline's).
PATH_DTYPE = "float32"


def covering(n: int) -> tuple[int, ...]:
    """Captured batch sizes 1, 2, 4, ... up to the first at or above n."""
    sizes = [1]
    while sizes[-1] < n:
        sizes.append(2 * sizes[-1])
    return tuple(sizes)


def _verdict(fn) -> tuple[str, object]:
    try:
        return "pass", fn()
    except OracleFailure as exc:
        return "FAIL", exc
    except Exception as exc:  # noqa: BLE001  the engine died under the fault
        return f"crash ({type(exc).__name__})", exc


def _configs(dtype: str, n: int):
    """(drafter, topk, steps, ndt, path name, FloorConfig) of every configuration x path."""
    for drafter, topk, steps, ndt in CONFIGS:
        for path, kw in PATHS.items():
            kw = {**kw, "graph_bs": covering(n)} if kw.get("graph_bs") == "cover" else kw
            yield drafter, topk, steps, ndt, path, FloorConfig(drafter=drafter, topk=topk,
                                                               num_steps=steps, ndt=ndt,
                                                               dtype=dtype, **kw)


def _floor_rows(pair, *, device: str, dtype: str, baselines: str, n: int, new: int,
                plen: int, clean: dict) -> list[dict]:
    """Per configuration x path: the floor's verdict, the accept length without the fault
    on that same path (`clean`), and whether the fault changed any round's accept length."""
    rows = []
    for *_, path, cfg in _configs(dtype, n):
        verdict, res = _verdict(lambda: measure_against_baseline(pair, cfg=cfg, device=device,
                                                                 path=baselines,
                                                                 n_prompts=n, max_new_tokens=new,
                                                                 prompt_len=plen))
        before = clean[(cfg.key, path)]
        row = dict(config=cfg.key, path=path, mean=None, without=sum(before) / len(before),
                   baseline=None, bound=None, verdict=verdict, changed=None)
        if verdict == "pass":
            m, base, bound = res
            row.update(mean=m.mean, baseline=base["mean"], bound=bound,
                       verdict="pass" if m.mean >= bound else "FAIL",
                       changed=m.accept_lens != before)
        rows.append(row)
    return rows


def clean_runs(pair, *, device: str, dtype: str, n: int, new: int, plen: int) -> dict:
    """(config key, path) -> per-round accept lengths without a fault."""
    return {(cfg.key, path): measure(pair, drafter=drafter, topk=topk, num_steps=steps, ndt=ndt,
                                     n_prompts=n, max_new_tokens=new, device=device, dtype=dtype,
                                     cuda_graph=cfg.cuda_graph, page_size=cfg.page_size,
                                     overlap=cfg.overlap, graph_bs=cfg.graph_bs,
                                     batch=cfg.batch, prompt_len=plen).accept_lens
            for drafter, topk, steps, ndt, path, cfg in _configs(dtype, n)}


def save_clean(clean: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump([[key, p, lens] for (key, p), lens in clean.items()], f)


def load_clean(path: str) -> dict:
    with open(path) as f:
        return {(key, p): lens for key, p, lens in json.load(f)}


def _path_rows(pair, device: str, n: int, max_new: int) -> list[dict]:
    rows = []
    for drafter, topk, steps, ndt in CONFIGS:
        base = PathPair(topk=topk, num_steps=steps, ndt=ndt, page_size=PAGE_SIZE,
                        draft=pair.draft_arg(drafter), batch_size=n, max_prompt_len=24,
                        max_new_tokens=max_new, seed=1,
                        dtype=PATH_DTYPE, model=pair.target, ragged=True, graph_bs=covering(n))
        for path, kw in B_PATHS.items():
            cfg = dataclasses.replace(base, **kw)
            verdict, _ = _verdict(lambda: prop_acceptance_path_invariant(cfg, device))
            rows.append(dict(config=f"{drafter} topk={topk} steps={steps} ndt={ndt}",
                             path=f"eager vs {path} ({PATH_DTYPE})", verdict=verdict))
    return rows


def fault_table(pair, *, device: str, dtype: str, n_prompts: int, max_new: int, prompt_len: int,
                names: list[str] | None = None, baselines: str = BASELINES,
                clean: dict | None = None) -> list[dict]:
    """One row per fault: the largest drop of accept length it causes (configuration and
    path), and whether the acceptance laws alone catch it. `clean`: clean_runs' result for
    the same arguments, if already measured."""
    names = list(names or DRAFT_FAULTS)
    unknown = [n for n in names if n not in faults.REGISTRY]
    if unknown:
        raise ValueError(f"unknown fault(s) {unknown}; draft-side faults: {list(DRAFT_FAULTS)}")
    if clean is None:
        clean = clean_runs(pair, device=device, dtype=dtype, n=n_prompts, new=max_new,
                           plen=prompt_len)
    eager = {k: sum(v) / len(v) for (k, path), v in clean.items() if path == "eager"}
    print(f"accept length without a fault (eager, {n_prompts} prompts x {max_new} tokens): "
          + ", ".join(f"{k}: {v:.3f}" for k, v in eager.items()))
    print(f"\n{'fault':<45} {'worst config / path':<38} {'without':>7} {'with':>6} "
          f"{'floor':>6} {'paths':>6}  caught")
    rows = []
    for name in names:
        with faults.active(name):
            floor = _floor_rows(pair, device=device, dtype=dtype, baselines=baselines, n=n_prompts,
                                new=max_new, plen=prompt_len,
                                clean=clean)
            paths = _path_rows(pair, device, min(n_prompts, PATH_PROMPTS),
                               min(max_new, PATH_TOKENS))
        measured = [r for r in floor if r["mean"] is not None]
        worst = min(measured, key=lambda r: r["mean"] - r["without"], default=None)
        floor_v = _summary([r["verdict"] for r in floor])
        path_v = _summary([r["verdict"] for r in paths])
        caught = floor_v != "pass" or path_v != "pass"
        # A fault that changes no round of any run, on any path, and crashes nothing, never
        # reaches a real request's acceptance: no acceptance law can see it (it is left to
        # the structural oracles), and the table says so instead of "NO".
        effect = not (len(measured) == len(floor) and not any(r["changed"] for r in floor))
        row = dict(fault=name, source=faults.REGISTRY[name].source, floor=floor_v,
                   paths=path_v, caught=caught, effect=effect, floor_rows=floor,
                   path_rows=paths, worst=worst and f"{worst['config']} / {worst['path']}",
                   without=worst and worst["without"], with_fault=worst and worst["mean"])
        rows.append(row)
        w = "-" if worst is None else f"{worst['without']:>7.3f} {worst['mean']:>6.3f}"
        print(f"{name:<45} {row['worst'] or '-':<38} {w} {floor_v:>6} {path_v:>6}  "
              f"{_caught(row)}", flush=True)
    print(_tally(rows))
    return rows


def _caught(row: dict) -> str:
    if row["caught"]:
        return "yes"
    return "NO" if row.get("effect", True) else "no effect"


def _tally(rows: list[dict]) -> str:
    visible = [r for r in rows if r["caught"] or r.get("effect", True)]
    blind = [r["fault"] for r in rows if r not in visible]
    return (f"\n{sum(r['caught'] for r in rows)}/{len(visible)} draft-side faults that reach "
            "acceptance caught by the acceptance laws alone (floor: acceptance_floor on any "
            f"configuration x path; paths: acceptance_path_invariant on any pair, in "
            f"{PATH_DTYPE}; crash: the "
            "engine died under the fault)" + (
                f"; no effect on any real request's accept lengths, on any path (padded lanes "
                f"or unused buffers only, left to the structural oracles): {blind}"
                if blind else ""))


def _summary(verdicts: list[str]) -> str:
    """FAIL if any law run failed, else crash if any crashed, else pass."""
    if "FAIL" in verdicts:
        return "FAIL"
    crashed = [v for v in verdicts if v.startswith("crash")]
    return "crash" if crashed else "pass"


def fault_table_isolated(names: list[str] | None, argv: list[str], jobs: int = 1) -> list[dict]:
    """One process per fault (on a GPU a fault may leave the CUDA context unusable: a device
    assert, an illegal address), each `python -m harness acceptance --fault-table --faults
    NAME --in-process` with the caller's other arguments, `jobs` of them at once (each is
    host-bound: small models); their rows, merged, and each one's output in fault order."""
    names = list(names or DRAFT_FAULTS)
    if jobs < 1:
        raise ValueError(f"--jobs {jobs}: expected 1 or more")
    rest, skip = [], False
    for a in argv:  # drop the caller's own --faults / --out / --jobs / --fault-table
        if skip:
            skip = False
            continue
        if a in ("--faults", "--out", "--jobs", "--clean"):
            skip = True
            continue
        if a in ("--fault-table", "acceptance") or a.startswith(
                ("--faults=", "--out=", "--jobs=", "--clean=")):
            continue
        rest.append(a)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # The runs without a fault, once for all: each fault's process compares against them.
        clean = os.path.join(tmp, "clean.json")
        subprocess.run([sys.executable, "-m", "harness", "acceptance", "--fault-table",
                        "--clean-only", "--clean", clean, "--in-process", *rest], check=True)
        running = {}
        pending = list(names)
        while pending or running:
            while pending and len(running) < jobs:
                name = pending.pop(0)
                cmd = [sys.executable, "-m", "harness", "acceptance", "--fault-table",
                       "--faults", name, "--in-process", "--clean", clean, "--out",
                       os.path.join(tmp, f"{name}.json"), *rest]
                log = open(os.path.join(tmp, f"{name}.log"), "w")
                running[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT),
                                 log)
            for name, (proc, log) in list(running.items()):
                if proc.poll() is not None:
                    log.close()
                    del running[name]
            time.sleep(0.2)
        for name in names:
            with open(os.path.join(tmp, f"{name}.log")) as f:
                print(f.read(), end="", flush=True)
            out = os.path.join(tmp, f"{name}.json")
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
        print(f"{r['fault']:<45} {w} {r['floor']:>6} {r['paths']:>6}  {_caught(r)}")
    print(_tally(rows) + " (one process per fault)")
    return rows
