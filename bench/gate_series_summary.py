"""One gate run's summary for bench/gate_series.sh: its counts, failures, the 10 slowest tests,
the zoo faults' times inside the suite (TP faults by name), tests over 60 s, zoo faults over
30 s (docs/contract.md, Tiers), and the phase table of its gate profile.

    python bench/gate_series_summary.py RUN RC SECONDS PYTEST_LOG PROFILE [CPU_SAMPLES]

CPU_SAMPLES: the host's first /proc/stat line every 2 s beside the run (gate_series.sh); the
summary gives the cores' busy share over the run and how much of it they were saturated."""
import re
import sys
from collections import defaultdict


def cpu_busy(path: str) -> str:
    """'cores busy: mean X%, >= 95% in Y% of the run' from /proc/stat samples."""
    samples = []
    for line in open(path, errors="replace").read().splitlines():
        f = line.split()
        if f and f[0] == "cpu" and len(f) >= 8:
            ticks = list(map(int, f[1:]))
            samples.append((sum(ticks), ticks[3] + ticks[4]))  # all, idle + iowait
    shares = [1 - (i1 - i0) / (a1 - a0) for (a0, i0), (a1, i1) in zip(samples, samples[1:])
              if a1 > a0]
    if not shares:
        return "cores busy: no samples"
    return (f"cores busy: mean {100 * sum(shares) / len(shares):.0f}%, >= 95% in "
            f"{100 * sum(s >= 0.95 for s in shares) / len(shares):.0f}% of {len(shares)} "
            "2-s samples")


def main(run, *, rc, took, log, profile, cpu=None) -> None:
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
    if cpu:
        print("  " + cpu_busy(cpu))
    lines = open(profile, errors="replace").read().splitlines()
    for line in lines:
        if line.startswith("the "):  # the per-test list follows the table
            break
        print("  " + line)
    # The zoo tests' detection processes, timed (harness/gate/gate_profile.py): the 30 s
    # bound counts from the test's start once its GPU locks are taken, so without lock waits.
    net = {}
    for line in lines[next((i for i, x in enumerate(lines) if x.startswith("tests with a timed")),
                           len(lines)) + 1:]:
        m = re.match(r"\s*([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S*test_suite_catches\[(\w+)\]\S*)",
                     line)
        if m:
            net[m.group(5)] = (float(m.group(1)), float(m.group(2)), float(m.group(3)))
    if net:
        worst = max(net.items(), key=lambda kv: kv[1][2])
        print(f"  zoo without GPU lock waits: max {worst[1][2]:.1f} ({worst[0]}: wall "
              f"{worst[1][0]:.1f}, waits {worst[1][1]:.1f}) | over 30 s: "
              f"{sum(v[2] > 30 for v in net.values())} | TP faults: " + ", ".join(
                  f"{n} {v[2]:.1f}+{v[1]:.1f}" for n, v in sorted(net.items()) if n.startswith("tp_")))


if __name__ == "__main__":
    run, rc, took, log, profile, *cpu = sys.argv[1:7]
    main(run, rc=rc, took=took, log=log, profile=profile, cpu=cpu[0] if cpu else None)
