"""`python -m harness findings --engine vllm-kernels --versions A..B --record DIR`: every
recorded finding of the engine (docs/findings/<engine>_*.py: its law, seed and knobs) run on
every release, so each finding's range is bisected on its own case. The release sweep
(harness/runners/sweep.py) reports the first failure of each law per release, which hides a
second bug behind a first; here each finding is one cell.

A cell is "reproduces (CHECK)" (the law fails on the finding's case, at that check), "holds",
or "n/a" with why:
the law does not apply to the release, the case's variant or component is not in it, or
the finding needs another device (compiled Triton). Each release is installed in its own
folder (`--discard` removes the ones this run installed); `--record DIR` keeps one JSON per
release (a recorded release is not run again). The report: a table of release x finding
and, per finding, the runs of releases that reproduce it with the releases that hold on
either side. A release failing the case at another check than the release the finding was
found on (another bug reaching the same case) counts as reproducing only where the found-on
release is not in the sweep; its cell names its check either way."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness.base.failure import OracleFailure
from harness.runners.kernel_findings import finding_scripts
from harness.runners.kernel_suite import not_applicable, run_case
from harness.runners.sweep import discard_install
from harness.strategies.kernel_inputs import KernelCase


def why_not(finding, kernels, device: str) -> str | None:
    """Why the finding's case cannot run on this release and device, or None."""
    if getattr(finding, "DEVICE", None) and finding.DEVICE != device.partition(":")[0]:
        return f"needs {finding.DEVICE}"
    na = not_applicable(finding.LAW, kernels)
    if na:
        return "law n/a"
    variant = finding.KNOBS.get("variant")
    if variant and variant not in kernels.accepts.get("variants", ("classic",)):
        return f"no variant {variant}"
    component = finding.KNOBS.get("component")
    if component and component not in {c.value for c in kernels.components}:
        return f"no {component}"
    return None


def cell(finding, kernels, device: str) -> str:
    why = why_not(finding, kernels, device)
    if why:
        return f"n/a ({why})"
    case = KernelCase(law=finding.LAW, engine=kernels.engine, seed=finding.SEED,
                      knobs=finding.KNOBS)
    try:
        run_case(kernels, case, device)
    except OracleFailure as exc:
        return f"reproduces ({exc.check})"
    return "holds"


def run_release(cls, version: str, findings: dict, *, device: str, discard: bool,
                out) -> dict:
    from harness.adapters.foreign import install as inst
    from harness.adapters.foreign.remote import ForeignImportError
    from harness.adapters.registry import build_kernels
    engine = f"{cls.name}@{version}"
    print(f"== {engine}", file=out, flush=True)
    fresh = not inst.site_dir(cls.DIST, version).exists()
    row, t0 = {"version": version, "device": device}, time.perf_counter()
    try:
        kernels = build_kernels(engine, device)
    except (ForeignImportError, ValueError, TypeError) as exc:
        row.update(status="cannot run", reason=str(exc).splitlines()[0])
    else:
        try:
            row.update(status="ran", cells={name: cell(f, kernels, device)
                                            for name, f in findings.items()})
        finally:
            kernels.close()
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    for name, c in row.get("cells", {}).items():
        print(f"   {name:<64} {c}", file=out, flush=True)
    discard_install(cls, version, fresh and discard)
    return row


def findings_sweep(engine: str, *, versions: list[str], device: str,
                   record: str | None = None, discard: bool = False, out=sys.stdout) -> int:
    import os

    from harness.adapters.registry import parse
    os.environ["SPECDEC_KNOWN_FINDINGS"] = "include"  # each finding's own case is the point
    cls, _ = parse(engine)
    findings = finding_scripts(cls.name)
    rows, t0 = {}, time.perf_counter()
    for v in versions:
        path = Path(record) / f"{v}.json" if record else None
        old = json.loads(path.read_text()) if path and path.exists() else None
        if old and old["device"] == device and (old["status"] != "ran"
                                                or set(findings) <= set(old["cells"])):
            rows[v] = old
            print(f"== {cls.name}@{v}: recorded ({path})", file=out, flush=True)
            continue
        rows[v] = run_release(cls, v, findings, device=device, discard=discard, out=out)
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rows[v], indent=1, sort_keys=True))
    print(report(cls.name, findings, rows, time.perf_counter() - t0), file=out)
    return 0


def ranges(rows: dict, name: str, found_on: str | None = None) -> list[dict]:
    """Maximal runs of releases reproducing the finding (releases where it is n/a or that
    could not run are skipped over): first, last, and the releases holding on either side.
    Where the found-on release ran, only a failure at its check counts."""
    own = rows.get(found_on, {}).get("cells", {}).get(name, "")
    want = own if own.startswith("reproduces") else None
    seq = [(v, r["cells"][name]) for v, r in rows.items()
           if r["status"] == "ran" and not r["cells"].get(name, "n/a").startswith("n/a")]
    runs, cur = [], None
    for i, (v, c) in enumerate(seq):
        if c == want or (want is None and c.startswith("reproduces")):
            if cur is None:
                cur = {"first": v, "before": seq[i - 1][0] if i else None}
            cur["last"], cur["after"] = v, None
        elif cur is not None:
            cur["after"] = v
            runs.append(cur)
            cur = None
    return runs + ([cur] if cur else [])


def report(engine: str, findings: dict, rows: dict, wall_s: float) -> str:
    names = list(findings)
    short = {n: f"F{i + 1}" for i, n in enumerate(names)}
    def mark(c: str) -> str:
        return c.replace("reproduces", "**R**", 1)
    lines = [f"## {engine}: {len(rows)} releases, {len(names)} recorded findings", ""]
    lines += [f"- {short[n]}: `docs/findings/{n}.py` ({findings[n].LAW})" for n in names]
    lines += ["", "| release | wall s | " + " | ".join(short[n] for n in names) + " |",
              "| --- | ---: |" + " --- |" * len(names)]
    for v, r in rows.items():
        cells = ([mark(r["cells"].get(n, "not run")) for n in names] if r["status"] == "ran"
                 else ["cannot run"] * len(names))
        lines.append(f"| {v} | {r.get('wall_s', 0):.0f} | " + " | ".join(cells) + " |")
    lines += ["", f"wall time: {wall_s:.0f} s this invocation; "
              f"{sum(r.get('wall_s', 0) for r in rows.values()):.0f} s summed over the "
              f"{len(rows)} releases' own runs (installs included)", "", "### Ranges", ""]
    for n in names:
        runs = ranges(rows, n, getattr(findings[n], "FOUND_ON", None))
        if not runs:
            lines.append(f"- {short[n]} `{n}`: reproduced on no release of this sweep")
        for run in runs:
            span = run["first"] if run["first"] == run["last"] else \
                f"{run['first']} to {run['last']}"
            lines.append(f"- {short[n]} `{n}`: reproduces on {span}; holds on "
                         f"{run['before'] or '(no earlier release where it applies)'} before "
                         f"and {run['after'] or '(none after: unfixed in the newest swept)'} "
                         "after")
    return "\n".join(lines)
