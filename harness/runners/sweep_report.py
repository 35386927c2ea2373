"""The sweep's report (harness/runners/sweep.py): a table of release x law with each release's
wall time, the releases that could not run and why, and each flip explained.

A flip is a run of consecutive releases on which a law fails (releases where it does not
apply, or that could not run, are skipped over). For each run the report names its first
and last affected release, the passing releases on either side (the bisection's bounds: with
every release swept, they are adjacent), and the upstream change that bounds it: the engine
modules the adapter reached whose text differs across each bound, with a unified diff of each
written under DIR/flips/ (the texts come from the sweep's source cache)."""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from harness.runners.kernel_suite import KERNEL_LAWS

DIFF_CONTEXT = 3


def report(cls, rows: dict, *, wall_s: float, record: str | None) -> str:
    laws = list(KERNEL_LAWS)
    lines = [f"## {cls.name}: {len(rows)} releases, {len(laws)} kernel laws",
             "", "| release | wall s | " + " | ".join(laws) + " |",
             "| --- | ---: |" + " --- |" * len(laws)]
    for v, r in rows.items():
        cells = ([r["cells"].get(law, "not run") for law in laws] if r["status"] == "ran"
                 else ["cannot run"] * len(laws))
        lines.append(f"| {v} | {r.get('wall_s', 0):.0f} | " + " | ".join(cells) + " |")
    ran = sum(r.get("wall_s", 0) for r in rows.values())
    lines.append(f"\nwall time: {wall_s:.0f} s this invocation; {ran:.0f} s summed over the "
                 f"{len(rows)} releases' own runs (installs included)")
    blocked = {v: r["reason"] for v, r in rows.items() if r["status"] != "ran"}
    if blocked:
        lines += ["", "### Releases that could not run", ""]
        lines += [f"- {v}: {why}" for v, why in blocked.items()]
    lines += ["", "### Flips", ""]
    found = False
    for law in laws:
        for run in failing_runs(rows, law):
            found = True
            lines += explain(law, run, rows, record)
    if not found:
        lines.append("none: every law that applies passes on every release that ran")
    return "\n".join(lines)


def failing_runs(rows: dict, law: str) -> list[dict]:
    """Maximal runs of releases failing `law` the same way (the same check, through the same
    variant), over the releases where it ran and applied: dict(first, last, before, after,
    how); before / after are the neighbouring releases (None at the sweep's ends), which
    pass or fail the law another way (a bug fixed where another starts)."""
    seq = [(v, _how(r, law)) for v, r in rows.items()
           if r["status"] == "ran" and r["cells"].get(law, "n/a") != "n/a"]
    runs, cur = [], None
    for i, (v, how) in enumerate(seq):
        if cur is not None and how != cur["how"]:
            cur["after"] = v
            runs.append(cur)
            cur = None
        if how and cur is None:
            cur = {"first": v, "before": seq[i - 1][0] if i else None, "how": how}
        if cur is not None:
            cur["last"], cur["after"] = v, None
    return runs + ([cur] if cur else [])


def _how(row: dict, law: str) -> str | None:
    """How the release fails the law ("check, variant V"), or None where it passes."""
    cell = row["cells"][law]
    if not cell.startswith("FAIL"):
        return None
    message = next((f.get("message", "") for f in row["failures"] if f["law"] == law), "")
    variant = re.search(r"\bvariant ([\w-]+):", message)
    return cell[len("FAIL ("):-1] + (f", variant {variant.group(1)}" if variant else "")


def explain(law: str, run: dict, rows: dict, record: str | None) -> list[str]:
    span = run["first"] if run["first"] == run["last"] else f"{run['first']} to {run['last']}"

    def side(v: str | None, where: str) -> str:
        if v is None:
            return ("(no earlier release where it applies)" if where == "before" else
                    "(none after: unfixed in the newest release swept)")
        how = _how(rows[v], law)
        return f"{v} ({'passes' if how is None else 'fails: ' + how})"
    out = [f"- **{law}** fails on {span} ({run['how']}); before it "
           f"{side(run['before'], 'before')}, after it {side(run['after'], 'after')}."]
    replay = next((f["replay"] for f in rows[run["first"]]["failures"] if f["law"] == law
                   and f.get("replay")), None)
    if replay:
        out.append(f"  - replay on {run['first']}: `{replay}`")
    for a, b in ((run["before"], run["first"]), (run["last"], run["after"])):
        if a and b:
            out.append(f"  - {a} -> {b}: " + changed_modules(law, rows, a=a, b=b,
                                                             record=record))
    return out


def sources_dir() -> Path:
    """Where the sweep keeps the engine modules' texts, by hash (shared by every sweep)."""
    from harness.adapters.foreign.install import cache_root
    return cache_root() / "sources"


def changed_modules(law: str, rows: dict, *, a: str, b: str, record: str | None) -> str:
    """The engine modules whose text differs between two releases, with +/- line counts; the
    diff written to DIR/flips/<law>-<a>-<b>.diff."""
    src_old, src_new = rows[a].get("sources", {}), rows[b].get("sources", {})
    changed = sorted(m for m in set(src_old) | set(src_new) if src_old.get(m) != src_new.get(m))
    if not changed:
        return "no module the adapter reached changed (the flip is in the harness's draw)"
    diff, notes = [], []
    for m in changed:
        before, after = (_text(sources_dir(), s.get(m)) for s in (src_old, src_new))
        if (src_old.get(m) and not before) or (src_new.get(m) and not after):
            notes.append(f"{m} (changed; its text is not in {sources_dir()})")
            continue
        d = list(difflib.unified_diff(before, after, f"{a}/{m}", f"{b}/{m}", n=DIFF_CONTEXT))
        plus = sum(ln.startswith("+") and not ln.startswith("+++") for ln in d)
        minus = sum(ln.startswith("-") and not ln.startswith("---") for ln in d)
        notes.append(f"{m} (+{plus} -{minus})" if src_old.get(m) and src_new.get(m) else
                     f"{m} ({'new' if src_new.get(m) else 'gone'})")
        diff += d
    if record and diff:
        path = Path(record) / "flips" / f"{law}-{a}-{b}.diff"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(diff))
        notes.append(f"diff: {path}")
    return "; ".join(notes)


def _text(folder: Path, sha: str | None) -> list[str]:
    path = folder / f"{sha}.py" if sha else None
    return path.read_text().splitlines(keepends=True) if path and path.exists() else []
