"""`python -m harness zoo`: does the ordinary property suite catch every historical fault?

For each fault (specdec/faults.py) we switch it on and run the suite of harness/runners/suite.py
until something fails (the active Hypothesis profile's counts, no shrinking: we time the
first failure, not the minimal one). Two scopes:
- "suite" (`harness zoo`'s default): the whole suite, one example after another: first the
  regression examples (each case's configuration through its property, in registry order),
  then the generated examples entry by entry;
- "entry" (the meta-test cases/test_zoo.py): the suite as `pytest -n auto` runs it, every
  entry a test of its own, all at once, each starting with its explicit examples. The gate
  goes red when the first entry fails, at the latest when the entry holding the case's
  regression example does: that entry is run, as its test runs (its explicit examples,
  then its generated ones), and timed; should it pass, the whole suite follows as above.
A fault is caught when any property fails; the matrix names the check that did (a crash is
reported as `crash: <exception type>`), the examples run and the seconds until then.

Each case declares the check its own example fails (`Case.check`). When the first failure
came from elsewhere (another case's example, a generated one), the case's own example is run
too, so `checks` holds every check seen failing; the declared one must be among them (a fault
caught only by a crash or by another law shows a weak law: `declared_caught` is False)."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

from hypothesis import HealthCheck, Phase, settings

from harness.base.failure import OracleFailure
from harness.runners.cases import load_cases
from harness.runners.zoo_jobs import detect_in_parallel
from harness.runners.suite import (ALL_PROPERTIES, case_skip_reason, gpus_needed, runnable,
                                   suite)
from specdec import faults
from specdec.faults import REGISTRY


@dataclass
class ZooRow:
    fault: str
    source: str
    caught: bool = False
    check: str = ""          # the first failing check ("crash: <exception type>" for a crash)
    prop: str = ""           # the law whose property failed first
    checks: list = field(default_factory=list)  # "law:check" of each failure seen: the
    #                                              first, and the case's own example's
    declared_caught: bool = False  # the case's declared check is among them
    phase: str = ""          # "example" (a regression example) or "generated"
    examples: int = 0        # property runs until the first failure (or in all, if missed)
    seconds: float = 0.0
    detail: str = ""


class _Caught(Exception):
    pass


def check_of(exc: BaseException) -> str:
    """The check an exception reports, or "crash: <type>" where it is not an OracleFailure."""
    first = exc
    while exc is not None:
        if isinstance(exc, OracleFailure):
            return exc.check
        inner = getattr(exc, "exceptions", None)  # Hypothesis may group failures
        exc = inner[0] if inner else exc.__cause__
    return f"crash: {type(first).__name__}"


def declared_among(case, checks: list[str]) -> bool:
    """Whether the case's declared check (a name, or several where the device decides, as a
    read past a table that raises on a CPU and reads garbage on a GPU) is among `checks`
    ("law:check"): "crash" matches any crash of the case's law."""
    wanted = (case.check,) if isinstance(case.check, str) else tuple(case.check)
    for seen in checks:
        law, _, check = seen.partition(":")
        if law == case.prop and any(check == w or (w == "crash" and check.startswith("crash"))
                                    for w in wanted):
            return True
    return False


def _own_example_check(case, device: str) -> str:
    """The case's own example through its own law, the fault on: the check it fails, or "" if
    it passes."""
    try:
        ALL_PROPERTIES[case.prop](case.example, device)
    except Exception as exc:  # a crash counts as the case's crash
        return f"{case.prop}:{check_of(exc)}"
    return ""


SCOPES = ("suite", "entry")


def entry_of(case):
    """The suite entry of the case's law whose explicit examples hold the case's example
    (cases/test_zoo.py asserts every case has one; another law's entry may hold an equal
    configuration among its own examples, and judges it by that law)."""
    return next(e for e in suite() if e.prop == case.prop and case.example in e.examples())


def detect(fault: str, device: str, profile: settings, scope: str = "suite") -> ZooRow:
    if scope not in SCOPES:
        raise ValueError(f"zoo scope {scope!r}: expected one of {', '.join(SCOPES)}")
    CASES = load_cases()
    row, t0 = ZooRow(fault, REGISTRY[fault].source), time.perf_counter()
    own = []  # set when the first failure is the case's own example through its own law

    def judge(prop: str, cfg, phase: str) -> None:
        row.examples += 1
        try:
            ALL_PROPERTIES[prop](cfg, device)
        except Exception as exc:  # any failure of the suite counts, a crash included
            row.caught, row.prop, row.phase = True, prop, phase
            row.check = check_of(exc)
            own.append(cfg == CASES[fault].example and prop == CASES[fault].prop)
            row.detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise _Caught from exc

    quiet = settings(profile, database=None, deadline=None, phases=[Phase.generate],
                     suppress_health_check=list(HealthCheck), print_blob=False)
    # Multi-GPU (tensor-parallel) examples and entries last, each in registry order: most
    # faults are caught before them, so under `pytest -n auto` few zoo processes start a TP
    # group at all (on CPU nothing needs GPUs and the order is the registry's).
    def single_gpu_first(items, axes):
        return sorted(items, key=lambda i: gpus_needed(axes(i), device) > 1)
    with faults.active(fault):
        try:
            if scope == "entry":
                entry = entry_of(CASES[fault])
                for ex in entry.examples():
                    judge(entry.prop, ex, "example")
                entry.law(device, lambda p, c: judge(p, c, "generated"), quiet)()
            for case in single_gpu_first(CASES.values(), lambda c: c.example):
                if runnable(case.example, device):  # tensor parallel: enough GPUs
                    judge(case.prop, case.example, "example")
            for entry in single_gpu_first(suite(), lambda e: e.axes):
                if runnable(entry.axes, device):
                    entry.law(device, lambda p, c: judge(p, c, "generated"), quiet)()
        except _Caught:
            pass
        except Exception:  # Hypothesis re-raises our failure wrapped; the row is filled
            if not row.caught:
                raise
        row.seconds = time.perf_counter() - t0
        row.checks = [f"{row.prop}:{row.check}"] if row.caught else []
        if row.caught and not own[0] and case_skip_reason(CASES[fault], device) is None:
            row.checks += [c for c in [_own_example_check(CASES[fault], device)] if c]
    row.declared_caught = declared_among(CASES[fault], row.checks)
    return row


DETECTION_S = 30.0  # a fault is caught within this of its test starting (docs/contract.md)


def detection_env(env: dict | None) -> dict:
    """A fault's process's environment (`env`, else this process's). Where TP engines take
    the GPU locks: a deadline DETECTION_S from now (or the one given, if sooner), so the locks
    serve its engines before those of tests with a later one (specdec/tp/gpu_lock.py). Under
    the gate profiler it names the test it runs for (gate_profile.child_env)."""
    import os
    from harness.gate import gate_profile
    from specdec.tp import gpu_lock
    out = gate_profile.child_env(dict(os.environ if env is None else env))
    if out.get(gpu_lock.ENV):
        out[gpu_lock.DEADLINE_ENV] = repr(min(time.time() + DETECTION_S,
                                              gpu_lock.deadline(out)))
    return out


def detect_isolated(fault: str, *, device: str, profile_name: str, gpu: int | None = None,
                    env: dict | None = None, scope: str = "suite") -> ZooRow:
    """On a GPU each fault runs in its own process: a fault that makes a kernel read out of
    bounds leaves the CUDA context unusable, and every later fault would 'fail' on that (forked
    by the fork server where one runs: harness/gate/fork_server.py). The
    process runs on `gpu` (default: this process's current GPU, an xdist worker's pin), its
    tensor-parallel ranks on the GPUs after it. `env` (parallel zoo jobs): the process's
    environment; with it a CPU fault runs in a process of its own too."""
    if not device.startswith("cuda") and env is None:
        return detect(fault, device, settings.get_profile(profile_name), scope)
    import os
    import tempfile
    from harness.gate import fork_server
    if device.startswith("cuda") and gpu is None:
        import torch
        gpu = torch.cuda.current_device()
    limit = float(os.environ.get("SPECDEC_ZOO_FAULT_TIMEOUT", "240"))
    env = detection_env(env)
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        rc, out, err = fork_server.run(
            "harness", ["zoo", "--device", device, "--profile", profile_name, "--faults", fault,
                        "--json", f.name, "--in-process", "--scope", scope]
            + ([] if gpu is None else ["--gpu", str(gpu)]), limit,
            f"zoo subprocess for {fault} (SPECDEC_ZOO_FAULT_TIMEOUT)", env)
        try:
            return ZooRow(**json.load(open(f.name))["rows"][0])
        except (ValueError, KeyError, IndexError):
            raise RuntimeError(f"zoo subprocess for {fault} died (rc {rc}):\n"
                               f"{out[-2000:]}{err[-2000:]}") from None


HEADER = (f"{'fault':<46} {'source':<28} {'result':<7} {'first failing law:check':<40} "
          f"{'declared':<8} {'examples':>8} {'seconds':>8}")


def format_row(r: ZooRow) -> str:
    first = f"{r.prop}:{r.check}" if r.caught else ""
    return (f"{r.fault:<46} {r.source[:28]:<28} {'caught' if r.caught else 'MISSED':<7} "
            f"{first[:40]:<40} {'yes' if r.declared_caught else 'NO':<8} {r.examples:>8} "
            f"{r.seconds:>8.1f}")


def zoo(device: str, *, profile_name: str, names=None, out=None, json_path=None,
        in_process: bool = False, jobs: int = 1, scope: str = "suite") -> list[ZooRow]:
    """Every fault (or `names`) through detect: one after another, or (jobs > 1) in `jobs`
    processes at once (harness/runners/zoo_jobs.py). Rows print as faults finish; the JSON
    and the returned rows are in registry order."""
    import sys
    out = out or sys.stdout
    t0 = time.perf_counter()
    print(HEADER, file=out, flush=True)
    CASES = load_cases()
    skipped, todo = [], []
    for name in names or list(REGISTRY):
        why = case_skip_reason(CASES[name], device)  # too few GPUs, or a CUDA-only path
        if why is not None:
            skipped.append(name)
            print(f"{name:<46} {REGISTRY[name].source[:28]:<28} {'skipped':<7} {why}",
                  file=out, flush=True)
        else:
            todo.append(name)

    def report(r: ZooRow) -> None:
        print(format_row(r), file=out, flush=True)

    if in_process:
        rows = [detect(n, device, settings.get_profile(profile_name), scope) for n in todo]
        for r in rows:
            report(r)
    elif jobs > 1:
        rows = detect_in_parallel(todo, device=device, profile_name=profile_name, jobs=jobs,
                                  report=report, detect_isolated=detect_isolated, scope=scope)
    else:
        rows = []
        for n in todo:
            rows.append(detect_isolated(n, device=device, profile_name=profile_name, scope=scope))
            report(rows[-1])
    _summary(rows, skipped=skipped, device=device, jobs=jobs, wall=time.perf_counter() - t0,
             out=out)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"device": device, "profile": profile_name,
                       "rows": [asdict(r) for r in rows]}, f, indent=1)
    return rows


def _summary(rows: list[ZooRow], *, skipped: list[str], device: str, jobs: int, wall: float,
             out) -> None:
    CASES = load_cases()
    caught = [r for r in rows if r.caught]
    secs = sorted(r.seconds for r in caught)
    if secs:
        print(f"median seconds to detection {secs[len(secs) // 2]:.1f}, max {secs[-1]:.1f} "
              f"on {device}", file=out)
    print(f"caught {len(caught)}/{len(rows)}" + (f" ({len(skipped)} skipped: not runnable "
          f"here, see above)" if skipped else "")
          + f"; wall {wall:.1f} s, {jobs} job{'s' if jobs > 1 else ''}", file=out)
    for r in (r for r in caught if not r.declared_caught):  # a law weaker than its case says
        print(f"{r.fault}: declared {CASES[r.fault].prop}:{CASES[r.fault].check}, caught only "
              f"by {', '.join(r.checks)}", file=out)
