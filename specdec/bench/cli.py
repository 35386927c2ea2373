"""The `bench` subcommand of `python -m specdec`: its arguments, per-bench defaults and
dispatch to the bench modules (each imported only when it runs)."""
from __future__ import annotations

import argparse

# Per bench: default models, batch sizes, context (prompt tokens), iters.
BENCH_DEFAULTS = {"decode": ("llama-1b,llama-8b", "1,8,32", 1000, 20),
                  "spec": ("llama-1b,llama-8b", "1,8", 1000, 10),
                  "graphs": ("tiny,llama-1b", "1,8", 128, 3),
                  "profile": ("tiny,llama-1b,llama-8b", "1", 1000, 10),
                  "prefix": ("llama-8b", "32", 1024, 1),
                  "e2e": ("fixture", "1,8,32", 0, 1),
                  "allreduce": ("llama-1b,llama-8b", "1", 0, 20)}


def _bench_arg(value: str) -> str:
    # The harness bench lives in the harness layer, which the engine does not import.
    if value == "harness":
        raise argparse.ArgumentTypeError("the harness bench moved: python -m harness bench")
    return value


def add_bench_parser(sub) -> None:
    b = sub.add_parser("bench", help="benchmarks; results go to bench/results/")
    b.add_argument("what", type=_bench_arg, choices=["decode", "spec", "graphs", "profile", "prefix", "e2e",
                                                "allreduce", "plot"],
                   help="plot: redraw the PNG of each result JSON in PATHS (docs/bench.md)")
    b.add_argument("paths", nargs="*", help="result JSONs, for `plot`")
    b.add_argument("--device", default="cuda" if __import__("torch").cuda.is_available() else "cpu")
    b.add_argument("--dtype", default="bfloat16")
    b.add_argument("--models", default=None, help="comma-separated shapes (default per bench)")
    b.add_argument("--batch-sizes", default=None, help="comma-separated (default per bench)")
    b.add_argument("--context", type=int, default=None, help="prompt tokens per request")
    b.add_argument("--iters", type=int, default=None, help="timed steps / rounds / repeats")
    b.add_argument("--warmup", type=int, default=5, help="untimed steps or rounds first")
    b.add_argument("--compile-mode", default="reduce-overhead",
                   help="decode: torch.compile mode of the dense peer; none: run it uncompiled")
    b.add_argument("--new-tokens", type=int, default=64, help="graphs: tokens per generate")
    b.add_argument("--spec-configs", default="1,3,4;4,4,8",
                   help="spec: topk,steps,ndt;... (profile: the first)")
    b.add_argument("--tp", type=int, default=1,
                   help="decode / spec / e2e: the step, round or generate() sharded over this many ranks against "
                        "one rank, with the collectives' time per step (specdec/bench/tp.py, "
                        "tp_spec.py); allreduce: the ranks the all-reduce paths run over")
    b.add_argument("--no-plot", action="store_true", help="JSON only")
    b.add_argument("--e2e-tokens", type=int, default=256,
                   help="decode/spec: generate() this many tokens at bs 1 and 8, with and "
                        "without --overlap scheduling (0: skip); e2e: tokens per request")
    b.add_argument("--draft", default=None, help="e2e: the EAGLE head directory (default: "
                   "the trained fixture's)")
    b.add_argument("--heldout", default=None, help="e2e: heldout.json with the prompts "
                   "(default: the fixture's)")
    b.add_argument("--round-cost", default="bench/results/spec-h100-2026-11-23.json",
                   help="e2e: a `bench spec` result; llama-8b's round cost there gives the "
                        "projected speedup")
    b.add_argument("--out", default=None)


def tp_error(args) -> str | None:
    """The parser error for a --tp the chosen bench cannot run, else None."""
    if args.tp < 1 or (args.tp > 1 and args.what not in ("decode", "spec", "allreduce", "e2e")):
        return (f"--tp {args.tp}: an integer >= 1, and only `bench decode`, `bench spec`, "
                "`bench e2e` and `bench allreduce` run tensor parallel")
    return None


def run_bench(args, argv) -> int:
    """Run one bench (or redraw plots) and write its stamped JSON and PNG."""
    from specdec.bench import results
    if args.what == "plot":  # redraw PNGs from result JSONs (e.g. fetched from a GPU machine)
        from specdec.bench.plots import plot_file
        for path in args.paths:
            plot_file(path)
        return 0
    models, bss, context, iters = BENCH_DEFAULTS[args.what]
    models = (args.models or models).split(",")
    bss = [int(x) for x in (args.batch_sizes or bss).split(",")]
    context = args.context if args.context is not None else context
    iters = args.iters if args.iters is not None else iters
    rows, extra = _run_what(args, models, bss, context, iters)
    name = args.what if args.tp == 1 else f"{args.what}-tp{args.tp}"
    results.write(args.out or f"bench/results/{name}-{args.device}.json", device=args.device,
                  rows=rows,
                  bench=args.what, extra=extra, argv=argv, plot=not args.no_plot and args.tp == 1)
    return 0


def _run_what(args, models, bss, context, iters) -> tuple[list[dict], dict]:
    """The bench module args.what names (its tensor-parallel variant under --tp > 1):
    its result rows and extra fields."""
    from specdec.bench import spec
    extra = {}
    if args.what == "e2e":  # the trained fixture (or --models DIR --draft DIR)
        from specdec.bench import e2e
        target = None if models == ["fixture"] else models[0]
        rows, extra = e2e.run(args.device, dtype=args.dtype, batch_sizes=bss,
                              new_tokens=args.e2e_tokens,
                              configs=spec.parse_configs(args.spec_configs), target=target,
                              draft=args.draft,
                              heldout=args.heldout, round_cost=args.round_cost,
                              repeats=args.iters if args.iters is not None else 5, tp=args.tp)
    elif args.what == "allreduce":
        from specdec.bench import allreduce
        rows, extra = allreduce.run(args.device, dtype=args.dtype, models=models, tp=args.tp,
                                    iters=iters, warmup=args.warmup)
    elif args.what == "graphs":
        from specdec.bench import graphs
        rows = graphs.run(args.device, dtype=args.dtype, models=models, batch_sizes=bss,
                          context=context, iters=iters, new_tokens=args.new_tokens)
    elif args.what == "decode" and args.tp > 1:
        from specdec.bench import tp
        rows, extra = tp.run(args.device, dtype=args.dtype, models=models, batch_sizes=bss,
                             context=context, iters=iters, warmup=args.warmup,
                             tp=args.tp, compile_mode=args.compile_mode)
    elif args.what == "spec" and args.tp > 1:
        from specdec.bench import tp_spec
        rows, extra = tp_spec.run(args.device, dtype=args.dtype, models=models, batch_sizes=bss,
                                  context=context, iters=iters,
                                  warmup=args.warmup, tp=args.tp,
                                  configs=spec.parse_configs(args.spec_configs))
    elif args.what == "prefix":
        from specdec.bench import prefix
        rows = prefix.run(args.device, dtype=args.dtype, models=models, batch_sizes=bss,
                          context=context, iters=iters)
    elif args.what == "decode":
        from specdec.bench import decode
        rows, extra = decode.run(args.device, dtype=args.dtype, models=models, batch_sizes=bss,
                                 context=context, iters=iters,
                                 warmup=args.warmup, compile_mode=args.compile_mode,
                                 e2e_tokens=args.e2e_tokens)
    else:
        from specdec.bench import profile
        run = spec.run if args.what == "spec" else profile.run
        kw = {"e2e_tokens": args.e2e_tokens} if args.what == "spec" else {}
        rows, extra = run(args.device, dtype=args.dtype, models=models, batch_sizes=bss,
                          context=context, iters=iters, warmup=args.warmup,
                          configs=spec.parse_configs(args.spec_configs), **kw)
    return rows, extra
