"""`python -m harness check`: sweep the properties for a time budget and print a table."""
from __future__ import annotations

import json
import sys
from collections import Counter
import time
from dataclasses import dataclass, field

from hypothesis import settings

from harness.runners.chunks import PassedCases, run_chunk
from harness.runners.suite import LAWS, runnable



@dataclass
class PropertyReport:
    name: str
    passed: PassedCases = field(default_factory=PassedCases)  # rejected when drawn again
    examples: int = 0
    covered: set = field(default_factory=set)
    corners: Counter = field(default_factory=Counter)  # examples per corner drawn (`corners`)
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    exhausted: bool = False  # every case the strategy can draw has passed
    skipped: int = 0      # drawn configurations needing more GPUs than are visible


def repro_command(prop: str, cfg, device: str) -> str:
    from specdec import faults
    env = f"SPECDEC_FAULTS={','.join(sorted(faults.enabled()))} " if faults.enabled() else ""
    return (f"{env}python -m harness repro {prop} --device {device} "
            f"--config '{json.dumps(cfg.to_dict(), sort_keys=True)}'")


def _run_chunk(name: str, report: PropertyReport, chunk_seed: int, device: str,
               profile: settings):
    law = LAWS[name]
    got = run_chunk(law.strategy(device.startswith("cuda"), {}),
                    check=lambda cfg: law.prop(cfg, device), chunk_seed=chunk_seed, profile=profile,
                    phases=law.phases, passed=report.passed,
                    runnable=lambda cfg: runnable(cfg, device))  # TP: too few GPUs here
    report.exhausted = got.exhausted
    report.skipped += got.skipped
    report.failures += [got.failure] if got.failure else []
    report.examples += len(got.seen)
    report.covered.update(getattr(c, "axes", repr(c)) for c in got.seen)
    report.corners.update(got.corners())


def check(budget: float, device: str, profile: settings, out=sys.stdout) -> int:
    names = list(LAWS)
    reports = {n: PropertyReport(n) for n in names}
    per_prop = budget / len(names)
    for name in names:
        rep, t0, chunk = reports[name], time.perf_counter(), 0
        while time.perf_counter() - t0 < per_prop and not rep.failures and not rep.exhausted:
            _run_chunk(name, rep, 1000 + chunk, device, profile)
            chunk += 1
            if rep.skipped and not rep.examples:  # none of its configurations can run here
                break
            rep.seconds = time.perf_counter() - t0
            if sys.stderr.isatty():  # a progress line for people, not for logs
                print(f"\r  {name}: {rep.examples} examples, {rep.seconds:.0f}s / "
                      f"{per_prop:.0f}s", end="", file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            print(file=sys.stderr)
    print(f"{'property':<26} {'examples':>8} {'configs':>8} {'failures':>8} {'time':>8}  corners",
          file=out)
    for rep in reports.values():
        corners = " ".join(f"{k}={n}" for k, n in sorted(rep.corners.items()))
        print(f"{rep.name:<26} {rep.examples:>8} {len(rep.covered):>8} {len(rep.failures):>8} "
              f"{rep.seconds:>7.1f}s  {corners}" + (f"  ({rep.skipped} skipped: more GPUs "
                                                    "needed than visible)" if rep.skipped else ""),
              file=out)
    failed = [(r.name, c, e) for r in reports.values() for c, e in r.failures]
    for name, cfg, exc in failed:
        print(f"\nFAILED {name}: {exc}", file=out)
        if cfg is not None:
            print(f"  minimal configuration: {cfg.to_dict()}", file=out)
            print(f"  replay: {repro_command(name, cfg, device)}", file=out)
    print(f"\n{'FAIL' if failed else 'OK'}: {sum(r.examples for r in reports.values())} examples, "
          f"{len(failed)} failing properties on {device}", file=out)
    return 1 if failed else 0
