"""The command line of `python -m harness check|repro|zoo|mixed|bench|acceptance|laws|foreign|
sweep|findings|gate-profile`
(harness/__main__.py is its entry)."""
from __future__ import annotations

import argparse
import json
import sys

import kernels._triton_env  # noqa: F401  (before anything imports triton)
import torch
from hypothesis import settings

from harness.base.failure import OracleFailure
from harness.gate import profiles
from harness.runners import acceptance, bench, mixed_run
from harness.runners.cases import load_cases
from harness.runners.check import check
from harness.runners.engine_suite import ENGINE_LAWS
from harness.runners.kernel_suite import KERNEL_LAWS
from harness.runners.suite import ALL_PROPERTIES
from harness.strategies.runs import default_device
from specdec.faults import REGISTRY


def _add_check_parser(sub) -> None:
    c = sub.add_parser("check", help="sweep every property for a time budget")
    c.add_argument("--budget", type=float, default=60.0, help="seconds for the whole sweep")
    c.add_argument("--profile", default=None, help="Hypothesis profile (dev, ci, gpu, nightly)")
    c.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    c.add_argument("--engine", default="specdec",
                   help="the engine's adapter: specdec (default: white-box suite and the "
                        "black-box laws), transformers, an entry point of group "
                        "specdec.adapters, or module:Class (docs/adapters.md); or a kernel "
                        "adapter: specdec-kernels, sglang-kernels[@V], vllm-kernels[@V]")
    c.add_argument("--with-known", action="store_true",
                   help="also draw the cases of the engine's recorded findings (docs/findings/; "
                        "same as SPECDEC_KNOWN_FINDINGS=include)")


def _add_repro_parser(sub) -> None:
    r = sub.add_parser("repro", help="replay one configuration of one property")
    r.add_argument("property", choices=sorted(ALL_PROPERTIES) + sorted(ENGINE_LAWS)
                   + sorted(KERNEL_LAWS) + sorted(REGISTRY),
                   help="a property (with --config), or a fault: replay its historical bug")
    r.add_argument("--config", default=None, help="the JSON a failure report printed")
    r.add_argument("--device", default=None)


def _add_zoo_parser(sub) -> None:
    z = sub.add_parser("zoo", help="does the property suite catch every historical fault?")
    z.add_argument("--device", default=None)
    z.add_argument("--profile", default="ci", help="Hypothesis profile (default ci)")
    z.add_argument("--faults", default=None, help="comma-separated subset (default: all)")
    z.add_argument("--json", default=None, help="also write the matrix as JSON here")
    z.add_argument("--jobs", default="auto",
                   help="faults run at once, each in its own process (default auto: as many "
                        "as pytest -n auto starts workers; 1: one after another)")
    z.add_argument("--scope", default="suite", choices=("suite", "entry"),
                   help="suite (default): the whole suite, one example after another; entry: "
                        "the suite entry holding the fault's regression example first, as "
                        "pytest -n auto runs it (the meta-test cases/test_zoo.py)")
    z.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    z.add_argument("--gpu", type=int, default=None, help=argparse.SUPPRESS)


def _add_mixed_parser(sub) -> None:
    m = sub.add_parser("mixed", help="a long continuous-batching run, checked and timed")
    m.add_argument("--requests", type=int, default=200)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--device", default=None)
    m.add_argument("--model", default="tiny")
    m.add_argument("--max-batch", type=int, default=16)
    m.add_argument("--pool-requests", type=float, default=3.0,
                   help="KV pool size in largest-request worst cases (small: retraction)")
    m.add_argument("--page-size", type=int, default=mixed_run.PAGE_SIZE)
    m.add_argument("--cuda-graph", action="store_true")
    m.add_argument("--overlap", action="store_true", help="overlap scheduling (section 10)")
    m.add_argument("--prefix-cache", action="store_true",
                   help="radix prefix cache; prompts from a few shared system prompts")
    m.add_argument("--tp", type=int, default=1,
                   help="tensor-parallel ranks (CPU: gloo processes; CUDA: that many GPUs)")


def _add_foreign_parsers(sub) -> None:
    f = sub.add_parser("foreign", help="install a foreign engine's release for the kernel laws")
    fs = f.add_subparsers(dest="foreign_cmd", required=True)
    i = fs.add_parser("install", help="e.g. vllm==0.33.0 sglang==0.5.23 (--no-deps, own folder), "
                      "or a checkout's side packages: sglang@PATH")
    i.add_argument("releases", nargs="+", metavar="DIST==VERSION|DIST@PATH")
    i.add_argument("--device", default=None)
    p = fs.add_parser("pack", help="the files the kernel laws load, for a machine without "
                      "a network (the GPU device)")
    p.add_argument("release", metavar="DIST==VERSION")
    p.add_argument("--out", required=True, help="a .tar.gz or .tar.xz")
    p.add_argument("--python", default=None,
                   help="the target machine's Python (e.g. 3.12), when it is not this one's")
    p.add_argument("--all-sources", action="store_true",
                   help="every Python source of the engine's package, not only those loaded "
                        "on this machine (for code paths a GPU takes)")
    u = fs.add_parser("unpack", help="install a pack into $SPECDEC_FOREIGN_DIR")
    u.add_argument("pack")
    n = fs.add_parser("pinned", help="the pinned releases (the adapters' SUPPORTED), one line: "
                      "what CI installs and gates on")
    n.add_argument("--engines", action="store_true",
                   help="as --engine values (sglang-kernels@V ...), not DIST==VERSION")
    s = sub.add_parser("sweep", help="the kernel laws over several releases: law x release")
    s.add_argument("--engine", required=True, help="sglang-kernels or vllm-kernels")
    s.add_argument("--versions", default=None,
                   help="comma-separated releases; `all`: every release on the package "
                   "index since the engine's first speculative kernel; `A..B`: those of "
                   "them from A to B, either end left open (default: the adapter's SWEEP "
                   "list)")
    s.add_argument("--laws", default=None, help="comma-separated kernel laws to run (default: "
                   "every one); with --record, merged into each release's record")
    s.add_argument("--record", default=None, help="folder for one JSON per release (a "
                   "release recorded with these laws is not run again), the flips' diffs")
    s.add_argument("--fresh", action="store_true", help="with --laws: run them again on "
                   "releases whose record has them (a law whose draw changed)")
    s.add_argument("--discard", action="store_true",
                   help="remove each release's install folder after it ran (pinned kept)")
    s.add_argument("--examples", type=int, default=20, help="examples per law and release")
    s.add_argument("--budget", type=float, default=120.0, help="seconds per law and release")
    s.add_argument("--device", default=None)
    f = sub.add_parser("findings", help="every recorded finding's case over several releases: "
                       "finding x release, each finding's range")
    f.add_argument("--engine", required=True, help="sglang-kernels or vllm-kernels")
    f.add_argument("--versions", default=None, help="as sweep's: a list, `all` or `A..B`")
    f.add_argument("--record", default=None, help="folder for one JSON per release")
    f.add_argument("--discard", action="store_true",
                   help="remove each release's install folder after it ran (pinned kept)")
    f.add_argument("--device", default=None)


def _add_laws_parser(sub) -> None:
    sub.add_parser("laws", help="the index of every declared law, as docs/laws.md holds it")
    z = sub.add_parser("zoo-table", help="rewrite contract section 9's fault tables from the "
                       "fault registry (faultpoints.REGISTRY)")
    z.add_argument("--contract", default="docs/contract.md")


def _add_gate_profile_parser(sub) -> None:
    g = sub.add_parser("gate-profile", help="where a profiled pytest run's time went: "
                       "SPECDEC_GATE_PROFILE=DIR pytest -n auto, then this on DIR")
    g.add_argument("dir")
    g.add_argument("--top", type=int, default=10, help="the tests that took longest")
    g.add_argument("--durations", default=None, metavar="FILE",
                   help="also write each test's seconds here, the order pytest -n auto runs "
                        "tests in on a GPU (harness/gate/gate_durations.json)")
    g.add_argument("--source", default="", help="with --durations: where they were measured")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m harness")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _add_check_parser(sub)
    _add_repro_parser(sub)
    _add_zoo_parser(sub)
    _add_mixed_parser(sub)
    _add_laws_parser(sub)
    _add_gate_profile_parser(sub)
    _add_foreign_parsers(sub)
    bench.add_parser(sub)
    acceptance.add_parser(sub)
    return ap


def main(argv=None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    profiles.register()
    device = getattr(args, "device", None) or default_device()
    if device == "cpu":
        torch.set_num_threads(1)  # tiny CPU models: threads only contend (harness/gate/pytest_plugin.py)
    return _COMMANDS[args.cmd](ap, args, device, sys.argv[1:] if argv is None else argv)


def _run_mixed(ap, args, device: str, argv) -> int:
    from harness.runners.mixed_run import mixed_run
    print(mixed_run(args.requests, seed=args.seed, device=device, model=args.model,
                    page_size=args.page_size,
                    max_batch=args.max_batch, pool_requests=args.pool_requests,
                    cuda_graph=args.cuda_graph, overlap=args.overlap,
                    prefix_cache=args.prefix_cache, tp_size=args.tp))
    return 0


def _run_check(ap, args, device: str, argv) -> int:
    profile = settings.get_profile(args.profile) if args.profile else settings.default
    if args.with_known:
        import os
        os.environ["SPECDEC_KNOWN_FINDINGS"] = "include"
    from harness.adapters.registry import is_kernel_engine, validate
    try:
        validate(args.engine)
    except ValueError as exc:
        ap.error(str(exc))
    if is_kernel_engine(args.engine):
        from harness.runners.kernel_suite import check_kernels
        return check_kernels(args.engine, args.budget, device, profile)
    return check_engine(args.engine, args.budget, device, profile)


def _run_foreign(ap, args, device: str, argv) -> int:
    from harness.adapters.foreign.install import install
    from harness.adapters.foreign.pack import pack, unpack
    from harness.adapters.registry import foreign_class, pinned_engines, pinned_releases
    if args.foreign_cmd == "unpack":
        unpack(args.pack)
        return 0
    if args.foreign_cmd == "pinned":
        print(" ".join(pinned_engines() if args.engines else pinned_releases()))
        return 0
    if args.foreign_cmd == "pack":
        dist, _, version = args.release.partition("==")
        from harness.runners.kernel_suite import exercise
        pack(foreign_class(dist), version=version, out=args.out, exercise=exercise,
             python=args.python,
             all_sources=args.all_sources)
        return 0
    for release in args.releases:
        dist, sep, version = release.partition("==")
        try:
            if not sep and "@" in release:  # a checkout: its side packages, resolved now
                from harness.adapters.foreign.install import serve_checkout
                from harness.adapters.foreign.source import parse_source
                dist, _, path = release.partition("@")
                cls = foreign_class(dist)
                kernels = serve_checkout(cls, parse_source(cls.name, dist, path), device)
                print(f"{kernels.engine}: {cls.DIST} {kernels.version()}, ready")
                kernels.close()
                continue
            if not sep or not version:
                raise ValueError(f"{release!r}: expected DIST==VERSION (vllm==0.33.0) or "
                                 "DIST@PATH (sglang@../sglang)")
            print(install(foreign_class(dist), version, device))
        except (ValueError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


def _run_sweep(ap, args, device: str, argv) -> int:
    from harness.adapters.registry import parse
    from harness.runners.sweep import sweep
    try:
        cls, _ = parse(args.engine)
    except ValueError as exc:
        ap.error(str(exc))
    if getattr(cls, "in_process", False) or "@" in args.engine:
        ap.error(f"--engine {args.engine!r}: sweep takes a foreign kernel engine without a "
                 "version (sglang-kernels, vllm-kernels) and --versions")
    try:
        versions = _sweep_versions(cls, args.versions)
        laws = _sweep_laws(args.laws)
    except ValueError as exc:
        ap.error(str(exc))
    return sweep(args.engine, versions=versions, device=device, examples=args.examples,
                 budget=args.budget, record=args.record, discard=args.discard, laws=laws,
                 fresh=args.fresh)


def _run_findings(ap, args, device: str, argv) -> int:
    from harness.adapters.registry import parse
    from harness.runners.findings_sweep import findings_sweep
    try:
        cls, _ = parse(args.engine)
        versions = _sweep_versions(cls, args.versions)
    except ValueError as exc:
        ap.error(str(exc))
    return findings_sweep(args.engine, versions=versions, device=device, record=args.record,
                          discard=args.discard)


def _sweep_versions(cls, spec: str | None) -> list[str]:
    """--versions: a list, `all`, or `A..B` (a span of every release, oldest first)."""
    if not spec:
        return list(cls.SWEEP)
    if spec != "all" and ".." not in spec:
        return spec.split(",")
    from harness.adapters.foreign.releases import every_release
    every = every_release(cls)
    if spec == "all":
        return every
    lo, hi = spec.split("..", 1)
    for end in (lo, hi):
        if end and end not in every:
            raise ValueError(f"--versions {spec!r}: {end!r} is not a release of {cls.DIST} "
                             f"since {every[0]} (known: {', '.join(every)})")
    return every[every.index(lo) if lo else 0: every.index(hi) + 1 if hi else len(every)]


def _sweep_laws(spec: str | None) -> list[str] | None:
    from harness.runners.kernel_suite import KERNEL_LAWS
    if not spec:
        return None
    laws = spec.split(",")
    bad = [law for law in laws if law not in KERNEL_LAWS]
    if bad:
        raise ValueError(f"--laws: {', '.join(bad)} not a kernel law (allowed: "
                         f"{', '.join(KERNEL_LAWS)})")
    return laws


def _run_zoo(ap, args, device: str, argv) -> int:
    from harness.runners.zoo import zoo
    names = args.faults.split(",") if args.faults else None
    if args.gpu is not None and device.startswith("cuda"):  # a fault's process (zoo jobs,
        import torch                                        # an xdist worker's zoo test)
        torch.cuda.set_device(args.gpu)
    jobs = "1" if args.in_process else args.jobs
    if jobs == "auto":
        from harness.runners.zoo_jobs import auto_jobs
        jobs = auto_jobs(device)
    elif not jobs.isdigit() or int(jobs) < 1:
        ap.error(f"--jobs {jobs!r}: a number of processes >= 1, or auto")
    from harness.gate.gate_profile import inside_parent
    with inside_parent():  # a profiled gate test's detection process: its phases, under it
        rows = zoo(device, profile_name=args.profile, names=names, json_path=args.json,
                   in_process=args.in_process, jobs=int(jobs), scope=args.scope)
    # A fault caught only by another check than its case declares is a weak law: exit 1 too.
    return 0 if all(r.caught and r.declared_caught for r in rows) else 1


def _run_laws(ap, args, device: str, argv) -> int:
    from harness.laws.index import markdown
    print(markdown())
    return 0


def _run_zoo_table(ap, args, device: str, argv) -> int:
    from pathlib import Path

    from harness.runners.zoo_table import write
    changed = write(Path(args.contract))
    print(f"{args.contract}: section 9's tables {'rewritten' if changed else 'already current'}")
    return 0


def _run_repro(ap, args, device: str, argv) -> int:
    if args.property in REGISTRY:
        return _repro_fault(args.property, device)
    if args.config is None:
        ap.error(f"repro {args.property} needs --config (the JSON a failure report printed)")
    if args.property in ENGINE_LAWS:
        return _repro_engine_law(args.property, args.config, device)
    if args.property in KERNEL_LAWS:
        from harness.runners.kernel_suite import repro
        return repro(args.property, args.config, device)
    return _repro_property(args.property, args.config, device)


# Each command's runner: (parser, parsed args, device, the command line for result stamps).
def _run_gate_profile(ap, args, device: str, argv) -> int:
    from harness.gate.gate_profile import table, seconds_per_test
    try:
        print(table(args.dir, args.top))
        if args.durations:
            from harness.gate.gate_order import save
            save(seconds_per_test(args.dir), args.durations, args.source or args.dir)
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    return 0


_COMMANDS = {
    "gate-profile": _run_gate_profile,
    "acceptance": lambda ap, args, device, argv: acceptance.main(args, device, argv),
    "bench": lambda ap, args, device, argv: bench.main(args, device, argv),
    "mixed": _run_mixed,
    "check": _run_check,
    "zoo": _run_zoo,
    "repro": _run_repro,
    "laws": _run_laws,
    "zoo-table": _run_zoo_table,
    "foreign": _run_foreign,
    "sweep": _run_sweep,
    "findings": _run_findings,
}


def check_engine(engine: str, budget: float, device: str, profile) -> int:
    """specdec: the white-box suite, the black-box laws and the kernel laws on specdec's own
    kernels, the budget split by law count; any other engine: the black-box laws, the
    white-box ones listed as not applicable."""
    from harness.runners.engine_check import print_reports, sweep
    from harness.runners.kernel_suite import check_kernels
    from harness.runners.suite import LAWS
    ours = engine == "specdec"
    total = len(ENGINE_LAWS) + (len(LAWS) + len(KERNEL_LAWS) if ours else 0)
    rc = check(budget * len(LAWS) / total, device, profile) if ours else 0
    if ours:
        print()
    reports = sweep(engine, budget * len(ENGINE_LAWS) / total, device, profile)
    rc = print_reports(engine, device, reports, list(LAWS)) or rc
    if ours:
        print()
        rc = check_kernels("specdec-kernels", budget * len(KERNEL_LAWS) / total, device,
                           profile) or rc
    return rc


def _repro_property(name: str, config: str, device: str) -> int:
    """One configuration of one white-box property; a crash counts as a failure too."""
    from harness.runners.suite import LAWS
    from harness.runners.observe import describe, engines_watched
    law = LAWS[name]
    cfg = law.config(**json.loads(config))
    with engines_watched() as watched:
        try:
            law.prop(cfg, device)
        except OracleFailure as exc:
            print(f"FAILED {name}: {exc}\nwhat the law saw:\n{describe(watched)}")
            return 1
        except Exception as exc:  # a crash is a failure too: show where
            import traceback
            traceback.print_exc()
            print(f"FAILED {name}: {type(exc).__name__}: {exc}\nwhat the law saw:\n"
                  f"{describe(watched)}")
            return 1
    print(f"passed {name} on {device}: {cfg.to_dict()}")
    return 0


def _repro_engine_law(law: str, config: str, device: str) -> int:
    """One case of a black-box law, on the engine the case names."""
    from harness.strategies.engine_cases import EngineCase
    from harness.runners.observe import describe, engines_watched
    from harness.strategies.engine_cases import requests_for
    case = EngineCase.from_dict(json.loads(config))
    adapter = case.adapter(device)
    with engines_watched() as watched:
        try:
            stats = ENGINE_LAWS[law].check(adapter, case)
        except OracleFailure as exc:
            print(f"FAILED {law} on {adapter.version()}: {exc}\nthe case's requests:")
            for r in requests_for(case, adapter.vocab_size):
                print(f"  {r}")
            if watched:
                print(f"what the engine saw:\n{describe(watched)}")
            return 1
    print(f"passed {law} on {adapter.version()} / {device}: {stats}")
    return 0


def _repro_fault(name: str, device: str) -> int:
    """One historical bug in one command: its case's configuration through its property,
    with the fault on. Exit 1 with the failing check printed (the bug reproduced)."""
    from specdec import faults
    case = load_cases()[name]
    print(f"{name} ({case.source}): {case.mistake}\n  {case.story}\n"
          f"  expected to be caught by: {case.prop} [{case.check}]")
    from harness.runners.observe import describe, engines_watched
    with engines_watched() as watched:
        try:
            with faults.active(name):
                ALL_PROPERTIES[case.prop](case.example, device)
        except Exception as exc:
            print(f"FAILED {case.prop}: {exc if isinstance(exc, OracleFailure) else repr(exc)}")
            print(f"  configuration: {case.example.to_dict()}\nwhat the law saw:\n"
                  f"{describe(watched)}")
            return 1
    print(f"NOT REPRODUCED: {case.prop} passed with {name} on ({device})")
    return 0
