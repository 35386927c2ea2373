"""One gate run's summary for bench/gate_series.sh: its counts, failures, the 10 slowest tests,
the zoo faults' times inside the suite (TP faults by name), tests over 60 s, zoo faults over
30 s (docs/contract.md, Tiers), and the phase table of its gate profile.

    python bench/gate_series_summary.py RUN RC SECONDS PYTEST_LOG PROFILE"""
import re
import sys
from collections import defaultdict


def main(run, rc, took, log, profile) -> None:
    text = open(log, errors="replace").read().splitlines()
    counts = [line for line in text if re.search(r"(passed|failed).* in [0-9.]+s", line)]
    print(f"run {run} rc {rc} took {took} s: {counts[-1].strip('= ') if counts else '..'}")
    for line in text:
        if line.startswith(("FAILED", "ERROR")):
            print(line[:200])
    seconds = defaultdict(float)  # test -> setup + call + teardown
    for line in text:
        m = re.match(r"\s*([0-9.]+)s (setup|call|teardown)\s+(\S+)", line)
        if m:
            seconds[m.group(3)] += float(m.group(1))
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {s:7.1f} {name}")
    zoo = {n: s for n, s in seconds.items() if "test_suite_catches[" in n}
    tp = {n.split("[", 1)[1].split("]")[0]: s for n, s in zoo.items() if "[tp_" in n}
    print("  zoo TP faults in the suite: " + ", ".join(f"{n} {s:.1f}" for n, s in sorted(tp.items()))
          + f" | zoo max {max(zoo.values(), default=0):.1f} | zoo over 30 s: "
          + f"{sum(s > 30 for s in zoo.values())} | tests over 60 s: "
          + f"{sum(s > 60 for s in seconds.values())}")
    for name, s in zoo.items():
        if s > 30:
            print(f"  zoo over 30 s: {name} {s:.1f}")
    for line in open(profile, errors="replace").read().splitlines():
        if line.startswith("the "):  # the per-test list follows the table
            break
        print("  " + line)


if __name__ == "__main__":
    main(*sys.argv[1:6])
