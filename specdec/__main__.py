"""`python -m specdec generate|bench|train ...`: run, measure or train from the command line."""
from __future__ import annotations

import argparse
import sys
import time

from specdec import Engine, SpecConfig
from specdec.bench.cli import add_bench_parser, run_bench, tp_error
from specdec.config import MODEL_SHAPES, is_shape_name, model_config
from specdec import defaults as D


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
    spec = None if args.no_spec else SpecConfig(topk=args.topk, num_steps=args.steps,
                                                num_draft_tokens=args.ndt or 0,
                                                 draft_sampling=args.draft_sampling)
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


def _add_generate_parser(sub) -> None:
    g = sub.add_parser("generate", help="greedy generation, speculative unless --no-spec")
    g.add_argument("--model", default=D.MODEL, type=_model_arg,
                   help=f"a shape name ({', '.join(sorted(MODEL_SHAPES))}) or a Hugging Face "
                        "LlamaForCausalLM directory (config.json + *.safetensors)")
    g.add_argument("--draft", default=D.DRAFT,
                   help="eagle, self, perturbed[:scale] (the target with seeded noise: tunable "
                        "acceptance), a model shape name, or a directory: an EAGLE head or a "
                        "standalone Llama draft")
    g.add_argument("--draft-sampling", default=D.DRAFT_SAMPLING, choices=["greedy", "probabilistic"],
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
    g.add_argument("--topk", type=int, default=D.TOPK)
    g.add_argument("--steps", type=int, default=D.NUM_STEPS)
    g.add_argument("--ndt", type=int, default=None, help="verify tree size (default steps+1)")
    g.add_argument("--no-spec", action="store_true", help="plain greedy decoding")
    g.add_argument("--page-size", type=int, default=D.PAGE_SIZE)
    g.add_argument("--cuda-graph", action="store_true", help="capture the phases (CPU: stand-in)")
    g.add_argument("--overlap", action="store_true",
                   help="overlap scheduling: queue round i+1 before reading round i")
    g.add_argument("--prefix-cache", action="store_true",
                   help="radix prefix cache (prompts sharing a prefix reuse its KV)")
    g.add_argument("--device", default=D.DEVICE)
    g.add_argument("--dtype", default=D.DTYPE)
    g.add_argument("--seed", type=int, default=D.SEED)
    g.add_argument("--max-context", type=int, default=D.MAX_CONTEXT)
    g.add_argument("--max-new-tokens", type=int, default=16)
    g.add_argument("--tp", type=int, default=D.TP_SIZE,
                   help="tensor-parallel ranks (processes started here; gloo on CPU, NCCL on "
                        "CUDA with one GPU per rank)")
    g.add_argument("--prompt", action="append", required=True,
                   help="text when a tokenizer is available, else space-separated token ids; "
                        "repeat for a batch")


def _exit_2_on_value_error(command, args) -> int:
    """Bad input the engine or trainer rejects: one line on stderr, exit status 2."""
    try:
        return command(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _add_generate_parser(sub)
    add_bench_parser(sub)
    from specdec.train.cli import add_train_parser, run_train
    add_train_parser(sub)
    args = ap.parse_args(argv)
    if args.cmd == "train":
        return _exit_2_on_value_error(run_train, args)
    if args.cmd == "bench":
        error = tp_error(args)
        if error is not None:
            ap.error(error)
        return run_bench(args, sys.argv[1:] if argv is None else argv)
    return _exit_2_on_value_error(_generate, args)


if __name__ == "__main__":
    sys.exit(main())
