"""`python -m specdec train tokenizer|target|eagle|accept` (the recipe: the fixture's
RECIPE.md)."""
from __future__ import annotations

import json


def _device_default() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _loop_arguments(p, batch: int, seq_len: int) -> None:
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (deterministic)")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds: the step count is picked from the first steps' speed and "
                        "printed (rerun with --steps for the same schedule)")
    p.add_argument("--batch", type=int, default=batch, help="windows per step")
    p.add_argument("--seq-len", type=int, default=seq_len, help="tokens per window")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-windows", type=int, default=64, help="held-out windows per eval")
    p.add_argument("--compile", action="store_true", help="torch.compile the step's loss")
    _common(p)


def _common(p) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=_device_default())
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"],
                   help="bfloat16: autocast over fp32 master weights")
    p.add_argument("--corpus-limit", type=int, default=None,
                   help="only the first N stdlib files (tiny CPU runs)")


def add_train_parser(sub) -> None:
    t = sub.add_parser("train", help="train the fixture's tokenizer, target and EAGLE head")
    what = t.add_subparsers(dest="what", required=True)
    k = what.add_parser("tokenizer", help="BPE tokenizer.json + heldout.json prompts")
    k.add_argument("--out", required=True, help="tokenizer.json to write")
    k.add_argument("--heldout", required=True, help="heldout.json to write")
    k.add_argument("--vocab", type=int, default=4096)
    k.add_argument("--prompts", type=int, default=64)
    k.add_argument("--min-len", type=int, default=64)
    k.add_argument("--max-len", type=int, default=256)
    _common(k)
    from specdec.train import eagle, target
    g = what.add_parser("target", help="the Llama-shaped target")
    target.add_arguments(g)
    _loop_arguments(g, batch=64, seq_len=512)
    e = what.add_parser("eagle", help="the EAGLE head of a trained target")
    eagle.add_arguments(e)
    _loop_arguments(e, batch=32, seq_len=512)
    a = what.add_parser("accept", help="mean accept length on the held-out prompts")
    a.add_argument("--target", required=True)
    a.add_argument("--draft", required=True, help="the EAGLE head's directory")
    a.add_argument("--heldout", required=True)
    a.add_argument("--configs", default=None, help="topk,steps,ndt;... (default: a table)")
    a.add_argument("--prompts", type=int, default=64)
    a.add_argument("--new-tokens", type=int, default=128)
    a.add_argument("--batch", type=int, default=32)
    a.add_argument("--out", default=None, help="JSON of the table")
    a.add_argument("--device", default=_device_default())
    a.add_argument("--dtype", default="bfloat16")


def run_train(args) -> int:
    if args.what == "tokenizer":
        from specdec.train.tokenizer import run_tokenizer
        run_tokenizer(args)
        return 0
    if args.what == "accept":
        from specdec.train.accept import DEFAULT_CONFIGS, run_accept
        args.configs = args.configs or DEFAULT_CONFIGS
        run_accept(args)
        return 0
    if args.what == "target":
        from specdec.train.target import train_target as run
    else:
        from specdec.train.eagle import train_eagle as run
    summary = run(args)
    print("# summary " + json.dumps(summary), flush=True)
    return 0
