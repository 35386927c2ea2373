"""`python -m harness bench`: how fast the correctness harness runs.

Three numbers: examples per second of each law (harness/runners/suite.py; each run for a fixed budget,
in the chunks `python -m harness check` uses), the wall time of the whole test suite
under `pytest -n auto` with the gpu Hypothesis profile, and the bug zoo's seconds to
detection per fault (`python -m harness zoo --json`). Results go
through the engine's bench writer (specdec/bench/results.py): same stamp, JSON and plot.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def property_rates(device: str, budget: float, names: list[str] | None, profile: str) -> list[dict]:
    import kernels._triton_env  # noqa: F401  (before anything imports triton)
    from hypothesis import settings

    from harness.gate import profiles
    from harness.runners.check import PropertyReport, _run_chunk
    from harness.runners.suite import LAWS
    profiles.register()
    prof = settings.get_profile(profile)
    rows = []
    for name in names or list(LAWS):
        rep, t0, chunk = PropertyReport(name), time.perf_counter(), 0
        while time.perf_counter() - t0 < budget and not rep.failures:
            _run_chunk(name, rep, 1000 + chunk, device, prof)
            chunk += 1
        secs = time.perf_counter() - t0
        rows.append({"property": name, "examples": rep.examples, "seconds": secs,
                     "examples_per_s": rep.examples / secs, "failures": len(rep.failures),
                     "budget_s": budget})
        print(f"{name:>18}: {rep.examples} examples in {secs:.1f}s = "
              f"{rep.examples / secs:.2f}/s, {len(rep.failures)} failures", flush=True)
    return rows


def _subprocess(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    t0 = time.perf_counter()
    # Its own process group: on timeout, xdist workers go down with it.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        text, _ = p.communicate(timeout=timeout)
        out = {"returncode": p.returncode, "tail": text[-1500:]}
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        out = {"returncode": None, "error": f"timed out after {timeout:.0f}s"}
    return {"command": " ".join(cmd), "wall_s": time.perf_counter() - t0, **out}


def pytest_wall(timeout: float) -> dict:
    """The suite as README runs it, with the gpu profile (SPECDEC_PROFILE selects it)."""
    res = _subprocess([sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"],
                      timeout, {"SPECDEC_PROFILE": "gpu"})
    res["profile"] = "gpu"
    print(f"pytest -n auto (gpu profile): {res['wall_s']:.1f}s, rc={res.get('returncode')}", flush=True)
    return res


def zoo(device: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "zoo.json")
        # The zoo's own default Hypothesis profile: its detection times are comparable run to run.
        res = _subprocess([sys.executable, "-m", "harness", "zoo", "--json", path,
                           "--device", device], timeout)
        if os.path.exists(path):
            with open(path) as f:
                res["faults"] = json.load(f)
    print(f"bug zoo: {res['wall_s']:.1f}s, rc={res.get('returncode')}", flush=True)
    return res


def run(device: str, *, budget: float, properties: list[str] | None, skip_pytest: bool,
        skip_zoo: bool, timeout: float, profile: str = "gpu") -> tuple[list[dict], dict]:
    rows = property_rates(device, budget, properties, profile)
    extra = {"profile": profile, "budget_s_per_property": budget,
             "pytest": {"status": "skipped"} if skip_pytest else pytest_wall(timeout),
             "zoo": {"status": "skipped"} if skip_zoo else zoo(device, timeout)}
    return rows, extra


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="how fast the harness runs; results go to bench/results/ "
                                     "(docs/bench.md)")
    b.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    b.add_argument("--budget", type=float, default=5.0, help="seconds per property")
    b.add_argument("--properties", default=None, help="comma-separated (default all)")
    b.add_argument("--profile", default="gpu", help="Hypothesis profile of the property runs")
    b.add_argument("--skip-pytest", action="store_true", help="no pytest -n auto run")
    b.add_argument("--skip-zoo", action="store_true", help="no bug zoo run")
    b.add_argument("--sub-timeout", type=float, default=600.0,
                   help="seconds before the pytest / zoo subprocess is stopped")
    b.add_argument("--no-plot", action="store_true", help="JSON only")
    b.add_argument("--out", default=None, help="default bench/results/harness-DEVICE.json")


def main(args, device: str, argv: list[str]) -> int:
    from specdec.bench import results
    props = args.properties.split(",") if args.properties else None
    rows, extra = run(device, budget=args.budget, properties=props, skip_pytest=args.skip_pytest,
                      skip_zoo=args.skip_zoo,
                      timeout=args.sub_timeout, profile=args.profile)
    results.write(args.out or f"bench/results/harness-{device}.json", device=device, rows=rows,
                  bench="harness",
                  extra=extra, argv=argv, plot=not args.no_plot, prog="python -m harness")
    return 0
