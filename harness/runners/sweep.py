"""`python -m harness sweep --engine vllm-kernels --versions all --record DIR`: each release
installed in its own folder (harness/adapters/foreign/install.py) and every kernel law run on
it, the same number of examples each; one table of release x law, its wall time, and each
flip explained (harness/runners/sweep_report.py).

- `--versions all`: every release on the package index since the adapter's first speculative
  kernel (harness/adapters/foreign/releases.py); a release whose import graph cannot be
  served, or whose functions the adapter does not know, is a row with the reason, not a crash.
- `--record DIR`: one JSON file per release (its cells, failures with their replay lines,
  wall time, and a hash of each engine module the adapter reached); a release already
  recorded with the same examples and device is not run again, so a sweep of a hundred
  releases can stop and resume. The modules' texts go to the cache
  ($SPECDEC_FOREIGN_DIR/sources), by hash, for the flips' diffs.
- `--laws L1,L2`: only those laws, each release's record kept and the new cells merged into
  it (its failures for those laws replaced, wall times summed, each pass listed), so a law
  added later is swept over every release without running the others again.
- `--fresh` (with `--laws`): those laws run again where a release's record has them (a law
  whose draw changed), the rest of the record kept.
- `--discard`: the install folders this sweep made are removed after their release ran (a
  vLLM release is about a gigabyte), the pinned releases' kept.
- The laws draw the cases of recorded findings too (SPECDEC_KNOWN_FINDINGS=include): a sweep
  is there to find where each bug starts and ends, not to stay green."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from harness.runners.kernel_suite import KERNEL_LAWS, print_failures, repro_command, run_law
from harness.runners.sweep_report import report, sources_dir


def sweep(engine: str, *, versions: list[str], device: str, examples: int, budget: float,
          record: str | None = None, discard: bool = False, laws: list[str] | None = None,
          fresh: bool = False, out=sys.stdout) -> int:
    from harness.adapters.registry import parse
    os.environ.setdefault("SPECDEC_KNOWN_FINDINGS", "include")
    cls, _ = parse(engine)
    rows, t0 = {}, time.perf_counter()
    for v in versions:
        path = Path(record) / f"{v}.json" if record else None
        old = json.loads(path.read_text()) if path and path.exists() else None
        # a release that could not run is not tried again (remove its record to retry)
        if old and old["examples"] == examples and old["device"] == device and (
                old["status"] != "ran" or not (laws and fresh)
                and set(laws or KERNEL_LAWS) <= set(old["cells"])):
            rows[v] = old
            print(f"== {engine}@{v}: recorded ({path})", file=out, flush=True)
            continue
        new = run_release(cls, v, device=device, examples=examples, budget=budget,
                          discard=discard, out=out, laws=laws)
        rows[v] = merge(old, new) if laws and old and old.get("status") == "ran" else new
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rows[v], indent=1, sort_keys=True))
    print(report(cls, rows, wall_s=time.perf_counter() - t0, record=record), file=out)
    return 1 if any(r.get("failures") for r in rows.values()) else 0


def merge(old: dict, new: dict) -> dict:
    """A release's record after a --laws pass: the new laws' cells, reasons and failures over
    the old ones', the others kept; each pass's laws and wall time listed."""
    if new["status"] != "ran":
        return old | {"passes": old.get("passes", []) + [new]}
    laws = set(new["cells"])
    return old | {
        "cells": old["cells"] | new["cells"],
        "why_not": {k: v for k, v in old.get("why_not", {}).items() if k not in laws}
        | new["why_not"],
        "failures": [f for f in old["failures"] if f["law"] not in laws] + new["failures"],
        "sources": old.get("sources", {}) | new.get("sources", {}),
        "wall_s": round(old.get("wall_s", 0) + new["wall_s"], 1),
        "passes": old.get("passes", [{"laws": sorted(old["cells"]),
                                      "wall_s": old.get("wall_s", 0)}])
        + [{"laws": sorted(laws), "wall_s": new["wall_s"]}]}


def run_release(cls, version: str, *, device: str, examples: int, budget: float,
                discard: bool, out, laws: list[str] | None = None) -> dict:
    """One release: installed (unless it is), the kernel laws run (`laws`, or every one),
    its engine modules hashed; the record sweep() keeps."""
    from harness.adapters.foreign import install as inst
    from harness.adapters.foreign.remote import ForeignImportError
    from harness.adapters.registry import build_kernels
    engine = f"{cls.name}@{version}"
    print(f"== {engine}", file=out, flush=True)
    fresh = not inst.site_dir(cls.DIST, version).exists()
    row = {"engine": cls.name, "version": version, "device": device, "examples": examples,
           "budget_s": budget}
    t0 = time.perf_counter()
    try:
        kernels = build_kernels(engine, device)
    except (ForeignImportError, ValueError, TypeError) as exc:
        row.update(status="cannot run", reason=str(exc).splitlines()[0],
                   wall_s=round(time.perf_counter() - t0, 1))
        print(f"   cannot run: {row['reason']}", file=out, flush=True)
        discard_install(cls, version, fresh and discard)
        return row
    row["install_s"] = round(time.perf_counter() - t0, 1)
    try:
        reports = [run_law(kernels, law=law, device=device, budget=budget,
                           max_examples=examples) for law in laws or KERNEL_LAWS]
        row["sources"] = _store_sources(kernels.engine_sources(cls.DIST))
    finally:
        kernels.close()
    row.update(status="ran", wall_s=round(time.perf_counter() - t0, 1),
               cells={r.law: r.cell for r in reports},
               why_not={r.law: r.na for r in reports if r.na},
               failures=[{"law": r.law, "check": exc.check, "message": str(exc).splitlines()[0],
                          "case": case.to_dict() if case else None,
                          "replay": repro_command(case, device) if case else None}
                         for r in reports for case, exc in r.failures])
    for r in reports:
        print(f"   {r.law:<28} {r.cell}", file=out, flush=True)
    print_failures(reports, device, out)
    discard_install(cls, version, fresh and discard)
    return row


def _store_sources(texts: dict[str, str]) -> dict[str, str]:
    """module -> sha256 of its text; the text kept in the cache by hash (dedup across
    releases)."""
    folder = sources_dir()
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for module, text in texts.items():
        sha = hashlib.sha256(text.encode()).hexdigest()[:16]
        (folder / f"{sha}.py").write_text(text)
        out[module] = sha
    return out


def discard_install(cls, version: str, yes: bool) -> None:
    """Remove a release's install folder (when `yes`; never a pinned release's)."""
    from harness.adapters.foreign.install import site_dir
    if yes and version not in cls.SUPPORTED:
        shutil.rmtree(site_dir(cls.DIST, version), ignore_errors=True)
