"""`python -m specdec generate|bench|train ...`: run, measure or train from the command line."""
from __future__ import annotations

import argparse
import sys
import time

from specdec import Engine, SpecConfig
from specdec.config import MODEL_SHAPES, is_shape_name, model_config


def _codec(args):
    """The tokenizer for text prompts: --tokenizer, else the --model directory's tokenizer.json;
    None: prompts are token ids."""
    from specdec.loading import has_tokenizer, is_checkpoint_dir, load_tokenizer
    if args.tokenizer:
        return load_tokenizer(args.tokenizer)
    if is_checkpoint_dir(args.model) and has_tokenizer(args.model):
        return load_tokenizer(args.model)
    return None


def _until_eos(ids: list[int], eos: list[int]) -> list[int]:
    """Display only: the engine generates max_new_tokens; text stops at the first EOS."""
    for i, t in enumerate(ids):
        if t in eos:
            return ids[:i]
    return ids


def _generate(args) -> int:
    from specdec.loading import is_checkpoint_dir
    from specdec.loading.config import eos_token_ids
    spec = None if args.no_spec else SpecConfig(args.topk, args.steps, args.ndt or 0,
                                                 args.draft_sampling)
    codec = _codec(args)
    if codec is not None:
        prompts = [codec.encode(p) for p in args.prompt]
    else:
        try:
            prompts = [[int(t) for t in p.split()] for p in args.prompt]
        except ValueError:
            raise SystemExit(f"--prompt takes space-separated token ids (or text, with a "
                             f"tokenizer), got {args.prompt!r}") from None
    eng = Engine(model=args.model, spec=spec, draft=args.draft, page_size=args.page_size,
                 device=args.device, dtype=args.dtype, seed=args.seed, max_context=args.max_context,
                 draft_max_position=args.draft_max_position, cuda_graph=args.cuda_graph,
                 overlap=args.overlap, tp_size=args.tp, prefix_cache=args.prefix_cache)
    t0 = time.perf_counter()
    outs = eng.generate(prompts, max_new_tokens=args.max_new_tokens,
                        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                        seed=args.seed if args.temperature > 0 else None)
    dt = time.perf_counter() - t0
    eng.close()  # tensor parallel: the workers exit with this process
    eos = eos_token_ids(args.model) if is_checkpoint_dir(args.model) else []
    for text, p, o in zip(args.prompt, prompts, outs):
        if codec is not None:
            print(text, "->", codec.decode(_until_eos(o, eos)))
        else:
            print(" ".join(map(str, p)), "->", " ".join(map(str, o)))
    if spec is not None:
        print(f"# {eng.stats}")
    print(f"# {sum(map(len, outs))} tokens in {dt:.3f}s on {eng.device}")
    return 0


# Per bench: default models, batch sizes, context (prompt tokens), iters.
BENCH_DEFAULTS = {"decode": ("llama-1b,llama-8b", "1,8,32", 1000, 20),
                  "spec": ("llama-1b,llama-8b", "1,8", 1000, 10),
                  "graphs": ("tiny,llama-1b", "1,8", 128, 3),
                  "profile": ("tiny,llama-1b,llama-8b", "1", 1000, 10),
                  "prefix": ("llama-8b", "32", 1024, 1),
                  "e2e": ("fixture", "1,8,32", 0, 1)}


def _bench(args, argv) -> int:
    from specdec.bench import results, spec
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
    extra = {}
    if args.what == "e2e":  # the trained fixture (or --models DIR --draft DIR)
        from specdec.bench import e2e
        target = None if models == ["fixture"] else models[0]
        rows, extra = e2e.run(args.device, args.dtype, bss, args.e2e_tokens,
                              spec.parse_configs(args.spec_configs), target, args.draft,
                              args.heldout, args.round_cost,
                              args.iters if args.iters is not None else 5)
    elif args.what == "graphs":
        from specdec.bench import graphs
        rows = graphs.run(args.device, args.dtype, models, bss, context, iters, args.new_tokens)
    elif args.what == "decode" and args.tp > 1:
        from specdec.bench import tp
        rows, extra = tp.run(args.device, args.dtype, models, bss, context, iters, args.warmup,
                             args.tp)
    elif args.what == "spec" and args.tp > 1:
        from specdec.bench import spec, tp_spec
        rows, extra = tp_spec.run(args.device, args.dtype, models, bss, context, iters,
                                  args.warmup, args.tp, spec.parse_configs(args.spec_configs))
    elif args.what == "prefix":
        from specdec.bench import prefix
        rows = prefix.run(args.device, args.dtype, models, bss, context, iters)
    elif args.what == "decode":
        from specdec.bench import decode
        rows, extra = decode.run(args.device, args.dtype, models, bss, context, iters,
                                 args.warmup, args.compile_mode, args.e2e_tokens)
    else:
        from specdec.bench import profile
        run = spec.run if args.what == "spec" else profile.run
        kw = {"e2e_tokens": args.e2e_tokens} if args.what == "spec" else {}
        rows, extra = run(args.device, args.dtype, models, bss, context, iters, args.warmup,
                          spec.parse_configs(args.spec_configs), **kw)
    name = args.what if args.tp == 1 else f"{args.what}-tp{args.tp}"
    results.write(args.out or f"bench/results/{name}-{args.device}.json", args.device, rows,
                  args.what, extra, argv, plot=not args.no_plot and args.tp == 1)
    return 0


def _model_arg(value: str) -> str:
    import os
    if is_shape_name(value):
        try:
            model_config(value)  # a malformed bias is named here, not inside the engine
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value
    if os.path.isdir(value):
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is neither a model shape "
                                     f"({', '.join(sorted(MODEL_SHAPES))}) nor a directory")


def _bench_arg(value: str) -> str:
    # The harness bench lives in the harness layer, which the engine does not import.
    if value == "harness":
        raise argparse.ArgumentTypeError("the harness bench moved: python -m harness bench")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="greedy generation, speculative unless --no-spec")
    g.add_argument("--model", default="tiny", type=_model_arg,
                   help=f"a shape name ({', '.join(sorted(MODEL_SHAPES))}) or a Hugging Face "
                        "LlamaForCausalLM directory (config.json + *.safetensors)")
    g.add_argument("--draft", default="eagle",
                   help="eagle, self, perturbed[:scale] (the target with seeded noise: tunable "
                        "acceptance), a model shape name, or a directory: an EAGLE head or a "
                        "standalone Llama draft")
    g.add_argument("--draft-sampling", default="greedy", choices=["greedy", "probabilistic"],
                   help="probabilistic: sampled chains draft from the draft's q, accept min(1, p/q)")
    g.add_argument("--draft-max-position", type=int, default=None,
                   help="the drafter's own configured max_position (its RoPE table still "
                        "covers --max-context)")
    g.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--tokenizer", default=None,
                   help="directory with tokenizer.json (default: --model's, if it has one); "
                        "with a tokenizer, prompts are text")
    g.add_argument("--topk", type=int, default=1)
    g.add_argument("--steps", type=int, default=3)
    g.add_argument("--ndt", type=int, default=None, help="verify tree size (default steps+1)")
    g.add_argument("--no-spec", action="store_true", help="plain greedy decoding")
    g.add_argument("--page-size", type=int, default=1)
    g.add_argument("--cuda-graph", action="store_true", help="capture the phases (CPU: stand-in)")
    g.add_argument("--overlap", action="store_true",
                   help="overlap scheduling: queue round i+1 before reading round i")
    g.add_argument("--prefix-cache", action="store_true",
                   help="radix prefix cache (prompts sharing a prefix reuse its KV)")
    g.add_argument("--device", default="cpu")
    g.add_argument("--dtype", default="float32")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-context", type=int, default=512)
    g.add_argument("--max-new-tokens", type=int, default=16)
    g.add_argument("--tp", type=int, default=1,
                   help="tensor-parallel ranks (processes started here; gloo on CPU, NCCL on "
                        "CUDA with one GPU per rank)")
    g.add_argument("--prompt", action="append", required=True,
                   help="text when a tokenizer is available, else space-separated token ids; "
                        "repeat for a batch")
    b = sub.add_parser("bench", help="benchmarks; results go to bench/results/")
    b.add_argument("what", type=_bench_arg, choices=["decode", "spec", "graphs", "profile", "prefix", "e2e", "plot"],
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
                   help="decode / spec: the step or round sharded over this many ranks against "
                        "one rank, with the collectives' time per step (specdec/bench/tp.py, "
                        "tp_spec.py)")
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
    from specdec.train.cli import add_train_parser, run_train
    add_train_parser(sub)
    args = ap.parse_args(argv)
    if args.cmd == "train":
        try:
            return run_train(args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.cmd == "bench":
        if args.tp < 1 or (args.tp > 1 and args.what not in ("decode", "spec")):
            ap.error(f"--tp {args.tp}: an integer >= 1, and only `bench decode` and `bench "
                     "spec` run tensor parallel")
        return _bench(args, sys.argv[1:] if argv is None else argv)
    try:
        return _generate(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
