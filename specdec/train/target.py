"""`python -m specdec train target`: a Llama-shaped target on the corpus's train split.

The model is specdec's own LlamaModel, trained through the dense forward (dense.py) and saved
in the HF layout (save.py), so the engine loads exactly the weights that were trained.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from specdec.config import ModelConfig
from specdec.model.llama import LlamaModel
from specdec.train.corpus import fixed_windows, sample_windows
from specdec.train.dense import logits_of, target_hidden
from specdec.train.loop import LoopOptions, autocast, run_loop, write_outputs
from specdec.train.save import save_llama
from specdec.train.tokenizer import tokenized_corpus


def target_config(vocab: int, *, hidden: int, layers: int, heads: int, kv_heads: int,
                  intermediate: int, max_position: int) -> ModelConfig:
    if hidden % heads:
        raise ValueError(f"--hidden {hidden} is not a multiple of --heads {heads}")
    return ModelConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                       num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
                       head_dim=hidden // heads, rope_theta=10000.0, rms_norm_eps=1e-5,
                       max_position=max_position)


@torch.no_grad()
def init_train_weights(model: torch.nn.Module, seed: int, std: float = 0.02) -> None:
    """GPT-2 style: N(0, std) weights, output projections scaled by 1/sqrt(2 layers), unit
    norms; drawn in sorted-name order from `seed`."""
    gen = torch.Generator().manual_seed(seed)
    layers = getattr(getattr(model, "cfg", None), "num_layers", 1)
    for name, p in sorted(model.named_parameters()):
        if "norm" in name:
            p.fill_(1.0)
        elif name.endswith("bias"):
            p.zero_()
        else:
            scale = std / math.sqrt(2 * layers) if name.endswith(("o_proj.weight",
                                                                  "down_proj.weight")) else std
            p.copy_(scale * torch.randn(p.shape, generator=gen))


def lm_loss(model: LlamaModel, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of windows [B, T+1]."""
    logits = logits_of(model, target_hidden(model, ids[:, :-1]))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def maybe_compile(fn, enabled: bool):
    """torch.compile'd fn, falling back to eager if compiling fails at the first call."""
    if not enabled:
        return fn
    compiled = torch.compile(fn, dynamic=False)
    state = {"fn": compiled, "checked": False}

    def call(*args):
        if state["checked"]:
            return state["fn"](*args)
        state["checked"] = True
        try:
            return compiled(*args)
        except Exception as exc:  # noqa: BLE001 - any compiler failure: run eager instead
            print(f"# torch.compile failed ({type(exc).__name__}: {str(exc)[:200]}); eager")
            state["fn"] = fn
            return fn(*args)
    return call


def train_target(args) -> dict:
    torch.manual_seed(args.seed)
    corpus, tok, train, held = tokenized_corpus(args.tokenizer, args.corpus_limit)
    print(f"# corpus: python {corpus.python}, {len(corpus.names)} files, {corpus.num_bytes} "
          f"bytes, sha256 {corpus.sha256[:16]}; train {train.numel()} tokens, held-out "
          f"{held.numel()} tokens", flush=True)
    cfg = target_config(tok.get_vocab_size(), hidden=args.hidden, layers=args.layers,
                        heads=args.heads,
                        kv_heads=args.kv_heads, intermediate=args.intermediate,
                        max_position=args.max_position)
    model = LlamaModel(cfg)
    init_train_weights(model, args.seed)
    model.to(args.device).train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"# target: {cfg} ({n_params / 1e6:.2f}M parameters)", flush=True)
    opt = LoopOptions(lr=args.lr, steps=args.steps, time_budget=args.time_budget,
                      warmup=args.warmup, eval_every=args.eval_every, device=args.device,
                      bf16=args.dtype == "bfloat16")
    gen = torch.Generator().manual_seed(args.seed + 1)
    heldout = fixed_windows(held, args.eval_windows, args.seq_len + 1).to(args.device)
    loss_fn = maybe_compile(lambda ids: lm_loss(model, ids), args.compile)

    def step_fn(step):
        ids = sample_windows(train, args.batch, args.seq_len + 1, gen).to(args.device,
                                                                           non_blocking=True)
        with autocast(opt):
            loss = loss_fn(ids)
        return loss, {}, ids.numel() - ids.shape[0]

    @torch.no_grad()
    def eval_fn():
        model.eval()
        with autocast(opt):
            losses = [lm_loss(model, heldout[i:i + args.batch]).float()
                      for i in range(0, heldout.shape[0], args.batch)]
        model.train()
        return {"loss": torch.stack(losses).mean().item()}

    log, summary = run_loop("train target", list(model.parameters()), step_fn, eval_fn, opt)
    save_llama(model.eval(), args.out, torch.bfloat16, eos_id=0)
    write_outputs(args.out, stem="target", log=log, summary=summary,
                  title=f"target {n_params / 1e6:.1f}M params, python {corpus.python} stdlib",
                  keys=["loss"])
    summary.update(corpus_sha256=corpus.sha256, python=corpus.python,
                   params=n_params, train_tokens=train.numel(), heldout_tokens=held.numel())
    return summary


def add_arguments(p) -> None:
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (train tokenizer)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=704)
    p.add_argument("--max-position", type=int, default=2048)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
