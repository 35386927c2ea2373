"""`python -m specdec generate ...`: run the engine from the command line."""
from __future__ import annotations

import argparse
import sys
import time

from specdec import Engine, SpecConfig
from specdec.config import MODEL_SHAPES


def _generate(args) -> int:
    spec = None if args.no_spec else SpecConfig(args.topk, args.steps, args.ndt or 0)
    eng = Engine(model=args.model, spec=spec, draft=args.draft, page_size=args.page_size,
                 device=args.device, dtype=args.dtype, seed=args.seed, max_context=args.max_context)
    try:
        prompts = [[int(t) for t in p.split()] for p in args.prompt]
    except ValueError:
        raise SystemExit(f"--prompt takes space-separated token ids, got {args.prompt!r}") from None
    t0 = time.perf_counter()
    outs = eng.generate(prompts, max_new_tokens=args.max_new_tokens)
    dt = time.perf_counter() - t0
    for p, o in zip(prompts, outs):
        print(" ".join(map(str, p)), "->", " ".join(map(str, o)))
    if spec is not None:
        print(f"# {eng.stats}")
    print(f"# {sum(map(len, outs))} tokens in {dt:.3f}s on {eng.device}")
    return 0


def _bench(args) -> int:
    from specdec.bench import graphs, results
    rows = graphs.run(args.device, args.dtype, args.models.split(","),
                      [int(x) for x in args.batch_sizes.split(",")])
    results.write(args.out or f"bench/results/{args.what}-{args.device}.json", args.device, rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="greedy generation, speculative unless --no-spec")
    g.add_argument("--model", default="tiny", choices=sorted(MODEL_SHAPES))
    g.add_argument("--draft", default="eagle", help="eagle, self, or a model shape name")
    g.add_argument("--topk", type=int, default=1)
    g.add_argument("--steps", type=int, default=3)
    g.add_argument("--ndt", type=int, default=None, help="verify tree size (default steps+1)")
    g.add_argument("--no-spec", action="store_true", help="plain greedy decoding")
    g.add_argument("--page-size", type=int, default=1)
    g.add_argument("--device", default="cpu")
    g.add_argument("--dtype", default="float32")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-context", type=int, default=512)
    g.add_argument("--max-new-tokens", type=int, default=16)
    g.add_argument("--prompt", action="append", required=True,
                   help="space-separated token ids; repeat for a batch")
    b = sub.add_parser("bench", help="benchmarks; results go to bench/results/")
    b.add_argument("what", choices=["graphs"])
    b.add_argument("--device", default="cuda" if __import__("torch").cuda.is_available() else "cpu")
    b.add_argument("--dtype", default="bfloat16")
    b.add_argument("--models", default="tiny,llama-1b")
    b.add_argument("--batch-sizes", default="1,8")
    b.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.cmd == "bench":
        return _bench(args)
    try:
        return _generate(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
