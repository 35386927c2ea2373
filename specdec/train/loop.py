"""The training loop both runs share: AdamW, linear warmup then cosine decay, bf16 autocast,
gradient clipping, a progress bar, a loss log, a PNG of the curves and a summary line.

Deterministic given the seed: the caller's batches come from its own seeded generator, and
the step count is fixed (--steps), or picked once from a time budget (--time-budget) and then
printed, so that `--steps N` reruns the same schedule.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

# step -> (loss to minimise, {metric: float tensor}, tokens in the batch)
StepFn = Callable[[int], tuple[torch.Tensor, dict[str, torch.Tensor], int]]


@dataclass
class LoopOptions:
    lr: float
    steps: int | None           # None: pick from time_budget after CALIBRATE steps
    time_budget: float | None   # seconds for the whole loop, evaluation included
    warmup: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    clip: float = 1.0
    eval_every: int = 250
    log_every: int = 10
    device: str = "cpu"
    bf16: bool = False


CALIBRATE = (10, 40)  # time steps [10, 40): after any compile warmup, before the decay starts


def lr_at(step: int, total: int | None, opt: LoopOptions) -> float:
    warmup = opt.warmup if total is None else min(opt.warmup, max(1, total // 10))
    if step < warmup:
        return opt.lr * (step + 1) / warmup
    if total is None:  # still calibrating (warmup covers it when warmup >= CALIBRATE[1])
        return opt.lr
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return opt.lr * (opt.min_lr_ratio + (1 - opt.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def autocast(opt: LoopOptions):
    if not opt.bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(opt.device).type, dtype=torch.bfloat16)


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class Progress:
    """tqdm when installed, else a plain line every few percent."""

    def __init__(self, name: str, total: int | None) -> None:
        self.name, self.total, self.bar, self.last = name, total, None, -1
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=name, mininterval=2.0, file=sys.stdout)
        except ImportError:
            pass

    def set_total(self, total: int) -> None:
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def update(self, step: int, text: str) -> None:
        if self.bar is not None:
            self.bar.update(1)
            if text:
                self.bar.set_postfix_str(text, refresh=False)
            return
        pct = int(100 * (step + 1) / self.total) if self.total else 0
        if text and pct // 5 != self.last:
            self.last = pct // 5
            print(f"{self.name}: step {step + 1}/{self.total or '?'} {text}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class LossLog:
    train: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    heldout: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"train": self.train, "heldout": self.heldout}, f)

    def plot(self, path: str, title: str, keys: list[str]) -> None:
        """Train and held-out curves of `keys` (metrics) against the step, one panel each."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print(f"# matplotlib missing: no {path}")
            return
        fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
        for ax, key in zip(axes[0], keys):
            for rows, label in ((self.train, "train"), (self.heldout, "held-out")):
                pts = [(s, m[key]) for s, m in rows if key in m]
                if pts:
                    ax.plot(*zip(*pts), label=label, marker="o" if label == "held-out" else None,
                            markersize=3, linewidth=1)
            ax.set_xlabel("step")
            ax.set_title(key, fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=72)
        plt.close(fig)


def _adamw(params: list[torch.nn.Parameter], opt: LoopOptions) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on norms and biases)."""
    cuda = torch.device(opt.device).type == "cuda"
    decay = [p for p in params if p.ndim >= 2]
    keep = [p for p in params if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": opt.weight_decay},
                              {"params": keep, "weight_decay": 0.0}],
                             lr=opt.lr, betas=(0.9, 0.95), eps=1e-8, fused=cuda)


def _train_step(optim, *, params, step_fn: StepFn, step: int, lr: float, clip: float):
    """One optimizer step at learning rate lr; step_fn's (loss, metrics, tokens)."""
    for group in optim.param_groups:
        group["lr"] = lr
    loss, metrics, n = step_fn(step)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, clip)
    optim.step()
    optim.zero_grad(set_to_none=True)
    return loss, metrics, n


class _StepBudget:
    """--time-budget: times steps CALIBRATE[0]..CALIBRATE[1] (synchronized), then picks the
    step count that fills what is left of the budget, and prints it for a `--steps` rerun."""

    def __init__(self, name: str, opt: LoopOptions, t0: float) -> None:
        self.name, self.opt, self.t0, self.t_cal = name, opt, t0, None

    def after(self, step: int) -> int | None:
        """The total step count once it is picked (after step CALIBRATE[1] - 1), else None."""
        if step + 1 == CALIBRATE[0]:
            sync(self.opt.device)
            self.t_cal = time.perf_counter()
        if step + 1 != CALIBRATE[1]:
            return None
        sync(self.opt.device)
        per_step = (time.perf_counter() - self.t_cal) / (CALIBRATE[1] - CALIBRATE[0])
        left = self.opt.time_budget - (time.perf_counter() - self.t0)
        total = max(step + 2, step + 1 + int(0.93 * left / per_step))  # 7%: evaluations
        print(f"# {self.name}: {per_step * 1e3:.1f} ms/step -> --steps {total} "
              f"for a {self.opt.time_budget:.0f}s budget", flush=True)
        return total


def _summary(name: str, *, log: LossLog, total: int, tokens: int, wall: float,
             loss: torch.Tensor) -> dict:
    """The summary figures, also printed as one line."""
    final_train = log.train[-1][1]["loss"] if log.train else loss.item()
    summary = {"steps": total, "tokens": tokens, "wall_s": round(wall, 1),
               "train_loss": round(final_train, 4),
               "heldout": {k: round(v, 4) for k, v in log.heldout[-1][1].items()}}
    print(f"[{name}] steps={total} tokens={tokens} wall={wall:.1f}s "
          f"train_loss={final_train:.4f} heldout_loss={log.heldout[-1][1]['loss']:.4f}",
          flush=True)
    return summary


def run_loop(name: str, params: list[torch.nn.Parameter], step_fn: StepFn,
             eval_fn: Callable[[], dict[str, float]], opt: LoopOptions) -> tuple[LossLog, dict]:
    """Train `params` on step_fn's losses; returns the log and the summary figures."""
    if (opt.steps is None) == (opt.time_budget is None):
        raise ValueError("give exactly one of --steps and --time-budget")
    if opt.steps is not None and opt.steps < 1:
        raise ValueError(f"--steps {opt.steps}: must be >= 1")
    optim = _adamw(params, opt)
    total, log, tokens = opt.steps, LossLog(), 0
    bar = Progress(name, total)
    sync(opt.device)
    t0 = time.perf_counter()
    budget = _StepBudget(name, opt, t0)
    step, running = 0, {}
    while total is None or step < total:
        lr = lr_at(step, total, opt)
        loss, metrics, n = _train_step(optim, params=params, step_fn=step_fn, step=step, lr=lr,
                                       clip=opt.clip)
        tokens += n
        for k, v in {"loss": loss.detach(), **metrics}.items():
            running[k] = running.get(k, 0.0) + v.detach().float()
        text = ""
        if (step + 1) % opt.log_every == 0:
            means = {k: (v / opt.log_every).item() for k, v in running.items()}
            running = {}
            log.train.append((step + 1, means))
            text = f"loss {means['loss']:.3f} lr {lr:.2e}"
        if total is None:
            total = budget.after(step)
            if total is not None:
                bar.set_total(total)
        if (step + 1) % opt.eval_every == 0 or (total is not None and step + 1 == total):
            log.heldout.append((step + 1, eval_fn()))
            text = f"held-out {log.heldout[-1][1]['loss']:.3f}"
        bar.update(step, text)
        step += 1
    sync(opt.device)
    wall = time.perf_counter() - t0
    bar.close()
    return log, _summary(name, log=log, total=total, tokens=tokens, wall=wall, loss=loss)


def write_outputs(out_dir: str, *, stem: str, log: LossLog, summary: dict, title: str,
                  keys: list[str]) -> None:
    """<stem>_log.json (curves + summary) and <stem>_loss.png next to the checkpoint."""
    os.makedirs(out_dir, exist_ok=True)
    log.write(os.path.join(out_dir, f"{stem}_log.json"))
    with open(os.path.join(out_dir, f"{stem}_log.json"), "r+", encoding="utf-8") as f:
        data = json.load(f)
        data["summary"] = summary
        f.seek(0)
        json.dump(data, f)
        f.truncate()
    log.plot(os.path.join(out_dir, f"{stem}_loss.png"), title, keys)
