"""`python -m harness sweep --engine vllm-kernels --versions A,B,C`: each release installed in
its own folder (harness/adapters/foreign/install.py) and every kernel law run on it, the same number
of examples each; one table of law x release. A release whose import graph cannot be served
is a column with the reason, not a crash. A law that fails on an older release and passes on
a newer one is the harness re-finding a bug that was fixed in between: each failure prints
its minimal case and replay line."""
from __future__ import annotations

import sys

from harness.runners.kernel_suite import KERNEL_LAWS, print_failures, run_law


def sweep(engine: str, *, versions: list[str], device: str, examples: int, budget: float,
          out=sys.stdout) -> int:
    from harness.adapters.foreign.remote import ForeignImportError
    from harness.adapters.registry import build_kernels, parse
    cls, _ = parse(engine)
    columns, failed = {}, False
    for v in versions:
        print(f"== {engine}@{v}", file=out, flush=True)
        try:
            kernels = build_kernels(f"{engine}@{v}", device)
        except (ForeignImportError, ValueError) as exc:
            columns[v] = str(exc).splitlines()[0]
            print(f"   cannot run: {columns[v]}", file=out, flush=True)
            continue
        reports = [run_law(kernels, law=law, device=device, budget=budget, max_examples=examples)
                   for law in KERNEL_LAWS]
        columns[v] = {r.law: r for r in reports}
        for r in reports:
            print(f"   {r.law:<28} {r.cell}", file=out, flush=True)
        print_failures(reports, device, out)
        failed |= any(r.failures for r in reports)
        kernels.close()
    print(table(cls.name, columns), file=out)
    return 1 if failed else 0


def table(name: str, columns: dict) -> str:
    """Markdown: one row per law, one column per release; a release that could not run gets
    its reason below the table."""
    vs = list(columns)
    lines = [f"| {name} law | " + " | ".join(vs) + " |", "| --- |" + " --- |" * len(vs)]
    for law in KERNEL_LAWS:
        cells = [c[law].cell if isinstance(c, dict) else "not run" for c in columns.values()]
        lines.append(f"| {law} | " + " | ".join(cells) + " |")
    for v, c in columns.items():
        if not isinstance(c, dict):
            lines.append(f"\n{v}: {c}")
    return "\n".join(lines)
