"""`python -m harness acceptance`: the acceptance gate a user runs before merging.

For each configuration of a grid (chains topk 1, steps 1..5; trees topk x steps x ndt) and
each drafter (the trained EAGLE head, a standalone drafter), the mean accept length on the
trained pair's held-out prompts, compared with the committed baseline under the one-sided
bound of harness/laws/acceptance_floor.py. Prints a table, draws accept length per
configuration (a heat map of steps x ndt per topk, as the EAGLE papers tabulate it), writes
the measurements as stamped JSON, and exits 1 on a regression. `--write-baseline` records
this run as the baseline of its device kind and dtype instead."""
from __future__ import annotations

import argparse
import json

from harness.laws.acceptance_floor import (ALPHA, BASELINES, baseline_table,
                                           config_key, device_key, load_baselines, lower_bound)
from harness.strategies.trained_pair import DRAFTERS, measure, trained_pair

CHAINS = [(1, s, s + 1) for s in range(1, 6)]
GRIDS = {
    "quick": CHAINS + [(2, 3, 6), (4, 4, 8), (3, 5, 10)],
    "full": CHAINS + [(k, s, n) for k in (2, 3, 4) for s in (3, 4, 5) for n in (4, 6, 8, 10)],
}


def add_parser(sub) -> None:
    a = sub.add_parser("acceptance", help="accept length per configuration on the trained "
                       "pair's held-out prompts vs the committed baseline (the merge gate)")
    a.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    a.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    a.add_argument("--prompts", type=int, default=None,
                   help="held-out prompts to run (default: 8 on cpu, 32 on cuda)")
    a.add_argument("--max-new-tokens", type=int, default=None,
                   help="tokens per prompt (default: 48 on cpu, 96 on cuda)")
    a.add_argument("--prompt-len", type=int, default=None,
                   help="use the last N tokens of each prompt (default: 64 on cpu, where the "
                        "reference attention makes long prefills slow; 0, whole, on cuda)")
    a.add_argument("--grid", choices=sorted(GRIDS), default=None,
                   help="configurations (default: quick on cpu, full on cuda)")
    a.add_argument("--drafters", default=",".join(DRAFTERS), help="eagle,standalone")
    a.add_argument("--fixture", default=None, help="a directory laid out like "
                   "specdec/fixtures/pystdlib (default: that fixture)")
    a.add_argument("--write-baseline", action="store_true",
                   help="record this run as the baseline of its device kind and dtype")
    a.add_argument("--baselines", default=BASELINES, help="the baseline JSON")
    a.add_argument("--out", default=None, help="result JSON (default bench/results/"
                   "acceptance-DEVICE-DTYPE.json); the PNG goes beside it")
    a.add_argument("--fault-table", action="store_true", help="instead: each first-zoo "
                   "draft-side fault on, accept length and the acceptance laws' verdicts")
    a.add_argument("--faults", default=None, help="--fault-table: comma-separated subset")
    a.add_argument("--jobs", type=int, default=1, help="--fault-table on cuda: faults run "
                   "at once, one process each (default 1)")
    a.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    # --fault-table's per-fault processes share one set of clean runs: --clean-only writes
    # it to --clean FILE, then each process reads it.
    a.add_argument("--clean", default=None, help=argparse.SUPPRESS)
    a.add_argument("--clean-only", action="store_true", help=argparse.SUPPRESS)


def defaults(args, device: str) -> tuple[str, int, int, int, str]:
    gpu = device.startswith("cuda")
    plen = args.prompt_len if args.prompt_len is not None else (0 if gpu else 64)
    return (args.dtype or ("bfloat16" if gpu else "float32"),
            args.prompts or (32 if gpu else 8), args.max_new_tokens or (96 if gpu else 48),
            plen, args.grid or ("full" if gpu else "quick"))


def run_gate(pair, *, device: str, dtype: str, n_prompts: int, max_new_tokens: int,
             prompt_len: int, configs: list, drafters: list[str],
             baselines: str = BASELINES, rewrite: bool = False) -> list[dict]:
    """One row per (drafter, configuration): measured mean, bound and verdict. `rewrite`:
    the baselines are about to be replaced (another pair's are shown as missing, not an
    error)."""
    doc_pair = load_baselines(baselines).get("pair")
    stale = rewrite and doc_pair not in (None, pair.identity())
    table = {} if stale else baseline_table(device, dtype, baselines, pair)
    rows = []
    for drafter in drafters:
        for topk, steps, ndt in configs:
            m = measure(pair, drafter=drafter, topk=topk, num_steps=steps, ndt=ndt,
                        n_prompts=n_prompts, max_new_tokens=max_new_tokens, device=device,
                        dtype=dtype,
                        prompt_len=prompt_len)
            key = config_key(drafter, topk, steps, ndt)
            base = table.get(key)
            row = {"config": key, "drafter": drafter, "topk": topk, "num_steps": steps,
                   "ndt": ndt, "rounds": m.rounds, "mean": m.mean, "std": m.std,
                   "prompts": n_prompts, "max_new_tokens": max_new_tokens,
                   "prompt_len": prompt_len,
                   "baseline": None, "lower_bound": None, "verdict": "no baseline"}
            if base is not None:
                paired = ((base["prompts"], base["max_new_tokens"], base["prompt_len"])
                          == (n_prompts, max_new_tokens, prompt_len))
                bound = lower_bound(m, base, paired)
                row.update(baseline=base["mean"], lower_bound=bound,
                           verdict="ok" if m.mean >= bound else "REGRESSION")
            rows.append(row)
            print(format_row(row), flush=True)
    return rows


def format_row(r: dict) -> str:
    num = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    return (f"{r['config']:<36} {r['rounds']:>6} {r['mean']:>6.3f} {num(r['lower_bound']):>7} "
            f"{num(r['baseline']):>8}  {r['verdict']}")


HEADER = f"{'config':<36} {'rounds':>6} {'mean':>6} {'bound':>7} {'baseline':>8}  verdict"


def write_baseline(rows: list[dict], pair, device: str, dtype: str, path: str) -> None:
    doc = load_baselines(path)
    if doc.get("pair") not in (None, pair.identity()):
        doc["tables"] = {}  # another pair: every device's baseline is stale
    doc.update(alpha=ALPHA, pair=pair.identity())
    doc["tables"][device_key(device, dtype)] = {
        r["config"]: {k: r[k] for k in ("mean", "std", "rounds", "prompts", "max_new_tokens",
                                        "prompt_len")}
        for r in rows}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"wrote {path} [{device_key(device, dtype)}]")


def plot(rows: list[dict], png: str, title: str) -> None:
    """Accept length per configuration: per drafter, chains as a row of cells (steps) and
    one steps x ndt heat map per tree topk."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    drafters = list(dict.fromkeys(r["drafter"] for r in rows))
    topks = sorted({r["topk"] for r in rows})
    fig, axes = plt.subplots(len(drafters), len(topks), squeeze=False,
                             figsize=(3.2 * len(topks) + 1, 2.8 * len(drafters) + 0.6))
    vmax = max(r["mean"] for r in rows)
    for i, d in enumerate(drafters):
        for j, k in enumerate(topks):
            ax, cells = axes[i][j], [r for r in rows if r["drafter"] == d and r["topk"] == k]
            steps = sorted({r["num_steps"] for r in cells})
            ndts = sorted({r["ndt"] for r in cells})
            grid = [[float("nan")] * len(ndts) for _ in steps]
            for r in cells:
                grid[steps.index(r["num_steps"])][ndts.index(r["ndt"])] = r["mean"]
                ax.text(ndts.index(r["ndt"]), steps.index(r["num_steps"]), f"{r['mean']:.2f}"
                        + ("!" if r["verdict"] == "REGRESSION" else ""),
                        ha="center", va="center", fontsize=7)
            ax.imshow(grid, vmin=1.0, vmax=vmax, cmap="viridis", aspect="auto", alpha=0.8)
            ax.set_xticks(range(len(ndts)), [str(n) for n in ndts], fontsize=7)
            ax.set_yticks(range(len(steps)), [str(s) for s in steps], fontsize=7)
            ax.set(xlabel="ndt", ylabel="steps", title=f"{d}, topk {k}")
            ax.title.set_fontsize(8)
    fig.suptitle(f"mean accept length (tokens per round, bonus included): {title}", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print(f"wrote {png}")


def main(args, device: str, argv: list[str]) -> int:
    """Bad input (a fixture, a baseline of another pair, a count) -> its message, exit 2."""
    import sys
    try:
        return _main(args, device, argv)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(args, device: str, argv: list[str]) -> int:
    dtype, n_prompts, max_new, plen, grid = defaults(args, device)
    pair = trained_pair(args.fixture)
    if args.fault_table:
        from harness.runners.fault_table import (clean_runs, fault_table, fault_table_isolated,
                                                 load_clean, save_clean)
        names = args.faults.split(",") if args.faults else None
        if args.clean_only:
            save_clean(clean_runs(pair, device=device, dtype=dtype, n=n_prompts, new=max_new,
                                  plen=plen), args.clean)
            return 0
        if device.startswith("cuda") and not args.in_process:
            rows = fault_table_isolated(names, argv, args.jobs)
        else:
            rows = fault_table(pair, device=device, dtype=dtype, n_prompts=n_prompts,
                               max_new=max_new, prompt_len=plen, names=names,
                               baselines=args.baselines,
                               clean=load_clean(args.clean) if args.clean else None)
        from specdec.bench.results import write
        write(args.out or f"bench/results/acceptance-faults-{device_key(device, dtype)}.json",
              device=device, rows=rows, bench=None, extra={"dtype": dtype, "prompts": n_prompts,
                                   "max_new_tokens": max_new, "prompt_len": plen,
                                   "pair": pair.identity()},
              argv=argv, plot=False, prog="python -m harness")
        return 0 if all(r["caught"] or not r.get("effect", True) for r in rows) else 1
    drafters = [d.strip() for d in args.drafters.split(",") if d.strip()]
    print(f"acceptance on {device} {dtype}: {n_prompts} held-out prompts "
          f"({f'last {plen} tokens' if plen else 'whole'}) x {max_new} new tokens, greedy; "
          f"bound: baseline - z_(1-{ALPHA:g}) * s / sqrt(rounds)\n{HEADER}")
    rows = run_gate(pair, device=device, dtype=dtype, n_prompts=n_prompts, max_new_tokens=max_new,
                    prompt_len=plen, configs=GRIDS[grid], drafters=drafters,
                    baselines=args.baselines, rewrite=args.write_baseline)
    out = args.out or f"bench/results/acceptance-{device_key(device, dtype)}.json"
    from specdec.bench.results import write
    write(out, device=device, rows=rows, bench=None, extra={"dtype": dtype, "prompts": n_prompts,
                                    "max_new_tokens": max_new, "prompt_len": plen,
                                    "alpha": ALPHA,
                                    "pair": pair.identity()}, argv=argv, plot=False,
          prog="python -m harness")
    try:
        plot(rows, out.rsplit(".", 1)[0] + ".png", f"{device} {dtype}, {n_prompts} prompts")
    except ImportError as exc:
        print(f"no plot: {exc}")
    if args.write_baseline:
        write_baseline(rows, pair, device, dtype, args.baselines)
        return 0
    bad = [r for r in rows if r["verdict"] == "REGRESSION"]
    missing = [r for r in rows if r["verdict"] == "no baseline"]
    print(f"\n{'FAIL' if bad else 'OK'}: {len(bad)} regressions, {len(missing)} without a "
          f"baseline, {len(rows)} configurations")
    return 1 if bad else 0

