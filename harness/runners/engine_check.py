"""`python -m harness check --engine NAME`: the adapter-aware laws on one engine for a time
budget, one row per law: examples run, failures, or "not applicable: needs X". On specdec
(the default engine) the white-box suite runs as well (harness/check.py); on any other
engine its laws are listed as needing white_box."""
from __future__ import annotations

import sys
import time

from harness.adapters.registry import default_adapter
from harness.runners.chunks import PassedCases, run_chunk
from harness.base.known import include_known
from harness.runners.engine_suite import (ENGINE_LAWS, WHITE_BOX, not_applicable, phases,
                                          repro_command, run_case)



class LawReport:
    def __init__(self, name: str, na: str | None = None) -> None:
        self.name, self.na = name, na
        self.examples, self.seconds, self.covered = 0, 0.0, set()
        self.failures: list = []  # (case or None, exception)
        self.exhausted = False

    def row(self) -> str:
        if self.na:
            return f"{self.name:<28} {self.na}"
        return (f"{self.name:<28} {self.examples:>8} {len(self.covered):>8} "
                f"{len(self.failures):>8} {self.seconds:>7.1f}s")


def _chunk(rep: LawReport, *, engine: str, device: str, chunk_seed: int, profile,
           passed: PassedCases) -> None:
    got = run_chunk(ENGINE_LAWS[rep.name].cases(engine, device),
                    check=lambda case: run_case(rep.name, case, device), chunk_seed=chunk_seed,
                    profile=profile, phases=phases(rep.name), passed=passed)
    rep.exhausted = got.exhausted
    rep.failures += [got.failure] if got.failure else []
    rep.examples += len(got.seen)
    rep.covered.update(c.axes for c in got.seen)


def sweep(engine: str, budget: float, device: str, profile, names=None) -> list[LawReport]:
    """Each applicable law for budget / (number of applicable laws) seconds."""
    adapter = default_adapter(engine, device)
    reports = [LawReport(n, not_applicable(ENGINE_LAWS[n].needs, adapter))
               for n in (names or ENGINE_LAWS)]
    live = [r for r in reports if not r.na]
    per_law = budget / max(1, len(live))
    for rep in live:
        t0, chunk, passed = time.perf_counter(), 0, PassedCases()
        while time.perf_counter() - t0 < per_law and not rep.failures and not rep.exhausted:
            _chunk(rep, engine=engine, device=device, chunk_seed=1000 + chunk, profile=profile,
                   passed=passed)
            chunk += 1
            rep.seconds = time.perf_counter() - t0
            if sys.stderr.isatty():
                print(f"\r  {rep.name}: {rep.examples} examples, {rep.seconds:.0f}s / "
                      f"{per_law:.0f}s", end="", file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            print(file=sys.stderr)
    return reports


def print_reports(engine: str, device: str, reports: list[LawReport], white_box: list[str],
                  out=sys.stdout) -> int:
    adapter = default_adapter(engine, device)
    print(f"engine {engine} ({adapter.version()}) on {device}; observables: "
          f"{', '.join(sorted(o.value for o in adapter.observables))}", file=out)
    for obs, why in sorted(getattr(adapter, "why_not", {}).items()):
        print(f"  without {obs.value}: {why}", file=out)
    known = getattr(adapter, "known", ())
    for k in known:
        print(f"  recorded finding {k.id} ({', '.join(k.laws)}; {k.doc}): "
              + ("drawn (--with-known)" if include_known() else "drawn around"), file=out)
    print(f"{'law':<28} {'examples':>8} {'configs':>8} {'failures':>8} {'time':>8}", file=out)
    for rep in reports:
        print(rep.row(), file=out)
    na = not_applicable(WHITE_BOX, adapter)
    for name in white_box if na else ():
        print(f"{name:<28} {na}", file=out)
    failed = [(r.name, c, e) for r in reports for c, e in r.failures]
    for name, case, exc in failed:
        notes = [n for n in getattr(exc, "__notes__", ()) if not n.startswith("replay:")]
        print(f"\nFAILED {name}: {exc}" + "".join(f"\n  {n}" for n in notes), file=out)
        if case is not None:
            print(f"  minimal case: {case.to_dict()}", file=out)
            print(f"  replay: {repro_command(name, case, device)}", file=out)
    ran = sum(r.examples for r in reports)
    n_na = sum(bool(r.na) for r in reports) + (len(white_box) if na else 0)
    print(f"\n{'FAIL' if failed else 'OK'}: {ran} examples, {len(failed)} failing laws, "
          f"{n_na} not applicable, on {engine} / {device}", file=out)
    return 1 if failed else 0
