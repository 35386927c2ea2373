"""`python -m specdec train eagle`: an EAGLE-1/2 head for a trained target.

Trained on the target's own hidden states and next-token distributions over train windows:
feature regression (smooth L1 to the target's h_{p+1}) plus a soft cross-entropy against the
target's distribution at p+1, as in EAGLE. With --unroll K > 1 the head is also trained as it
drafts (HASS / EAGLE-3's training-time test): depth s consumes its own depth s-1 feature and
attends to its own earlier draft keys (dense.unroll_mask), so draft decode's inputs are not
new to it. The loss is the mean over depths.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from specdec.loading.eagle import save_eagle_head
from specdec.loading.llama import load_llama
from specdec.model.eagle import EagleHead
from specdec.train.corpus import fixed_windows, sample_windows
from specdec.train.dense import head_unroll, logits_of, target_hidden
from specdec.train.loop import LoopOptions, autocast, run_loop, write_outputs
from specdec.train.target import maybe_compile
from specdec.train.tokenizer import tokenized_corpus


def head_losses(head: EagleHead, ids: torch.Tensor, unroll: int, w_feat: float,
                w_tok: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(weighted loss, metrics) on windows [B, T+1]. acc<s>: how often the head's argmax at
    depth s equals the target's greedy token (what greedy verification accepts)."""
    target = head.target
    with torch.no_grad():
        hidden = target_hidden(target, ids)
        t_logits = logits_of(target, hidden[:, 1:])
        t_probs = t_logits.softmax(-1)
        t_top = t_logits.argmax(-1)
    outs = head_unroll(head, ids, hidden, unroll)
    total, metrics = 0.0, {}
    for s, f in enumerate(outs):
        f = f[:, s:]  # rows p >= s: those with a depth-s input
        logp = logits_of(target, f).log_softmax(-1)
        tok = -(t_probs[:, s:] * logp).sum(-1).mean()
        feat = F.smooth_l1_loss(f.float(), hidden[:, 1 + s:].float())
        total = total + (w_feat * feat + w_tok * tok) / len(outs)
        metrics[f"tok{s}"] = tok.detach()
        metrics[f"feat{s}"] = feat.detach()
        metrics[f"acc{s}"] = (logp.argmax(-1) == t_top[:, s:]).float().mean()
    return total, metrics


def train_eagle(args) -> dict:
    torch.manual_seed(args.seed)
    corpus, tok, train, held = tokenized_corpus(args.tokenizer, args.corpus_limit)
    target = load_llama(args.target, args.device, torch.float32)
    for p in target.parameters():
        p.requires_grad_(False)
    cfg = dataclasses.replace(target.cfg, num_layers=1)
    head = EagleHead(cfg, target)  # on the CPU: init_from_target draws there, then moved
    head.init_from_target(args.seed, noise=0.02)
    head.to(args.device).train()
    n_params = sum(p.numel() for p in head.parameters())
    print(f"# eagle head: {n_params / 1e6:.2f}M parameters, unroll {args.unroll}, corpus "
          f"sha256 {corpus.sha256[:16]}, train {train.numel()} tokens", flush=True)
    opt = LoopOptions(lr=args.lr, steps=args.steps, time_budget=args.time_budget,
                      warmup=args.warmup, eval_every=args.eval_every, device=args.device,
                      bf16=args.dtype == "bfloat16")
    gen = torch.Generator().manual_seed(args.seed + 2)
    heldout = fixed_windows(held, args.eval_windows, args.seq_len + 1).to(args.device)
    loss_fn = maybe_compile(lambda ids: head_losses(head, ids, args.unroll, args.w_feat,
                                                    args.w_tok), args.compile)

    def step_fn(step):
        ids = sample_windows(train, args.batch, args.seq_len + 1, gen).to(args.device,
                                                                           non_blocking=True)
        with autocast(opt):
            loss, metrics = loss_fn(ids)
        return loss, metrics, ids.numel() - ids.shape[0]

    @torch.no_grad()
    def eval_fn():
        head.eval()
        sums: dict[str, float] = {}
        chunks = range(0, heldout.shape[0], args.batch)
        with autocast(opt):
            for i in chunks:
                loss, metrics = head_losses(head, heldout[i:i + args.batch], args.unroll,
                                            args.w_feat, args.w_tok)
                for k, v in {"loss": loss, **metrics}.items():
                    sums[k] = sums.get(k, 0.0) + float(v) / len(chunks)
        head.train()
        return sums

    log, summary = run_loop("train eagle", list(head.parameters()), step_fn, eval_fn, opt)
    head.to(torch.bfloat16)
    save_eagle_head(head.eval(), args.out)
    keys = ["loss"] + [f"acc{s}" for s in range(args.unroll)]
    write_outputs(args.out, stem="eagle", log=log, summary=summary,
                  title=f"EAGLE head {n_params / 1e6:.2f}M params, unroll {args.unroll}", keys=keys)
    summary.update(corpus_sha256=corpus.sha256, python=corpus.python, params=n_params)
    return summary


def add_arguments(p) -> None:
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (train tokenizer)")
    p.add_argument("--target", required=True, help="the trained target's directory")
    p.add_argument("--unroll", type=int, default=3,
                   help="drafting depths trained (1: EAGLE-1's teacher-forced training only)")
    p.add_argument("--w-feat", type=float, default=1.0, help="feature regression weight")
    p.add_argument("--w-tok", type=float, default=0.5, help="token cross-entropy weight")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=100)
