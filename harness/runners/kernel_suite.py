"""The kernel laws (door="kernels") over kernel adapters, defined once: pytest
(harness/runners/test_kernel_laws.py, `--engine vllm-kernels@0.33.0`), `python -m harness
check --engine ...-kernels[@V]`, `repro` and `sweep` run the same laws, strategies and
applicability rule.

A kernel law serves an adapter that has any of the components it needs (a law over two
components, such as kernel_kv_slots, draws only those the adapter has); the others are
reported as "not applicable: needs X (why)", never as passed. A kernel that raises on an
input inside its contract fails the law's "crash" check."""
from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

from hypothesis import HealthCheck, example, given, settings

from harness.adapters.applicability import not_applicable as _not_applicable
from harness.base.failure import OracleFailure
from harness.base import stop
from harness.laws.index import kernel
from harness.runners.chunks import PassedCases, run_chunk
from harness.strategies.kernel_inputs import KernelCase

KERNEL_LAWS = kernel()
# Examples per law in plain pytest on CPU: specdec's own kernels are also checked by the
# white-box laws; a foreign release or checkout is gated by these alone, so it gets more.
# SPECDEC_FOREIGN_EXAMPLES overrides the foreign count (.ci/run's few, for its time limit).
CPU_EXAMPLES = {"specdec-kernels": 4}
FOREIGN_CPU_EXAMPLES = 30


def cpu_examples(engine: str) -> int:
    foreign = int(os.environ.get("SPECDEC_FOREIGN_EXAMPLES", FOREIGN_CPU_EXAMPLES))
    return CPU_EXAMPLES.get(engine.partition("@")[0], foreign)


def not_applicable(law: str, kernels) -> str | None:
    return _not_applicable(KERNEL_LAWS[law].needs, kernels.components, kernels.why_not,
                           any_of=True)


def repro_command(case: KernelCase, device: str) -> str:
    return (f"python -m harness repro {case.law} --device {device} "
            f"--config '{json.dumps(case.to_dict(), sort_keys=True)}'")


def run_case(kernels, case: KernelCase, device: str):
    """One case, its replay line attached; a kernel that raises fails the law's crash check."""
    try:
        try:
            return KERNEL_LAWS[case.law].check(kernels, case)
        except OracleFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's kernel raised on a valid input
            raise OracleFailure(case.law, "crash", f"{type(exc).__name__}: {exc}") from exc
    except OracleFailure as exc:
        exc.add_note(f"replay: {repro_command(case, device)}")
        raise


def explicit_cases(law: str, kernels) -> list[KernelCase]:
    """The law's own examples (its EXAMPLES: seed and knobs) on this adapter."""
    return [KernelCase(law=law, engine=kernels.engine, seed=e["seed"], knobs=e["knobs"])
            for e in KERNEL_LAWS[law].examples]


def law_test(law: str, kernels, device: str, max_examples: int):
    @given(case=KERNEL_LAWS[law].cases(kernels))
    def test(case):
        stop.check()  # a red gate ends this test between examples
        run_case(kernels, case, device)
    for case in explicit_cases(law, kernels):
        test = example(case=case)(test)
    return settings(settings.default, max_examples=max_examples, deadline=None,
                    phases=KERNEL_LAWS[law].phases,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])(test)


def first_failure(law: str, kernels, examples: int) -> OracleFailure | None:
    """The first OracleFailure the law raises on `kernels` within `examples` derandomized
    draws, unshrunk: what a negative control asks (tests/test_kernel_*controls*.py)."""
    seen: list[OracleFailure] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=KERNEL_LAWS[law].phases[:3], suppress_health_check=list(HealthCheck))
    @given(case=KERNEL_LAWS[law].cases(kernels))
    def run(case):
        try:
            KERNEL_LAWS[law].check(kernels, case)
        except OracleFailure as exc:
            seen.append(exc)
            raise
    try:
        run()
    except OracleFailure:
        pass
    return seen[0] if seen else None


class Report:
    """One law on one adapter: examples run, failures, or why it does not apply."""

    def __init__(self, law: str, na: str | None) -> None:
        self.law, self.na = law, na
        self.examples, self.seconds, self.failures = 0, 0.0, []
        self.exhausted = False
        self.corners: Counter = Counter()  # examples per input class drawn (KernelCase.corners)

    @property
    def cell(self) -> str:
        if self.na:
            return "n/a"
        return f"FAIL ({self.failures[0][1].check})" if self.failures else f"ok {self.examples}"


def run_law(kernels, *, law: str, device: str, budget: float, max_examples: int | None = None,
            profile=None) -> Report:
    """The law's explicit examples, then chunks of drawn examples (harness/runners/chunks.py)
    until the budget (or max_examples) is spent or one fails; a drawn failure is shrunk to
    its minimal case."""
    rep = Report(law, not_applicable(law, kernels))
    t0, chunk, passed = time.perf_counter(), 0, PassedCases()
    for case in [] if rep.na else explicit_cases(law, kernels):
        rep.examples += 1
        try:
            run_case(kernels, case, device)
        except OracleFailure as exc:
            rep.failures.append((case, exc))
            break
    while not (rep.na or rep.failures or rep.exhausted) and time.perf_counter() - t0 < budget and (
            max_examples is None or rep.examples < max_examples):
        got = run_chunk(KERNEL_LAWS[law].cases(kernels),
                        check=lambda case: run_case(kernels, case, device), chunk_seed=7000 + chunk,
                        profile=profile, phases=KERNEL_LAWS[law].phases, passed=passed)
        rep.exhausted = got.exhausted
        rep.failures += [got.failure] if got.failure else []
        rep.examples += len(got.seen)
        rep.corners.update(got.corners())
        chunk += 1
    rep.seconds = time.perf_counter() - t0
    return rep


def check_kernels(engine: str, budget: float, device: str, profile=None, out=sys.stdout) -> int:
    """`python -m harness check --engine X-kernels[@V]`: every kernel law for an equal share
    of the budget; one row per law, then each failure with its minimal case and replay."""
    from harness.adapters.registry import get_kernels
    kernels = get_kernels(engine, device)
    live = [n for n in KERNEL_LAWS if not not_applicable(n, kernels)]
    reports = [run_law(kernels, law=n, device=device, budget=budget / max(1, len(live)),
                       profile=profile)
               for n in KERNEL_LAWS]
    # a foreign worker's engine says where its code came from (a release, a checkout's path,
    # "installed"); the version is what that code calls itself
    where = getattr(kernels, "engine", kernels.name)
    named = f"{where} ({kernels.version()})" if where != kernels.name else (
        f"{kernels.name} {kernels.version()}")
    print(f"kernels {named} on {device}; components: "
          f"{', '.join(sorted(c.value for c in kernels.components))}", file=out)
    print(f"{'law':<28} {'examples':>8} {'failures':>8} {'time':>8}", file=out)
    for r in reports:
        print(f"{r.law:<28} {r.na}" if r.na else
              f"{r.law:<28} {r.examples:>8} {len(r.failures):>8} {r.seconds:>7.1f}s", file=out)
        if r.corners:
            print(f"{'':<28} corners: " + ", ".join(f"{k} {v}" for k, v in
                                                    sorted(r.corners.items())), file=out)
    print_failures(reports, device, out)
    failed = sum(bool(r.failures) for r in reports)
    print(f"\n{'FAIL' if failed else 'OK'}: {sum(r.examples for r in reports)} examples, "
          f"{failed} failing laws, {sum(bool(r.na) for r in reports)} not applicable, on "
          f"{named} / {device}", file=out)
    return 1 if failed else 0


def print_failures(reports, device: str, out) -> None:
    for r in reports:
        for case, exc in r.failures:
            print(f"\nFAILED {r.law}: {exc}", file=out)
            if case is not None:
                print(f"  minimal case: {case.to_dict()}", file=out)
                print(f"  replay: {repro_command(case, device)}", file=out)


def repro(law: str, config: str, device: str) -> int:
    from harness.adapters.registry import get_kernels
    case = KernelCase.from_dict(json.loads(config))
    kernels = get_kernels(case.engine, device)
    try:
        stats = run_case(kernels, case, device)
    except OracleFailure as exc:
        print(f"FAILED {law} on {kernels.name} {kernels.version()}: {exc}")
        return 1
    print(f"passed {law} on {kernels.name} {kernels.version()} / {device}: {stats}")
    return 0


def exercise(kernels, examples: int = 3) -> None:
    """Each applicable kernel law a few times, outcomes ignored: the modules each component
    loads lazily are then imported (what `foreign pack` carries)."""
    for name, law in KERNEL_LAWS.items():
        if not_applicable(name, kernels):
            continue

        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=law.cases(kernels))
        def once(case):
            try:
                law.check(kernels, case)
            except Exception:  # noqa: BLE001 - only the imports matter here
                pass
        once()

