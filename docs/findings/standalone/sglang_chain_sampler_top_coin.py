"""Standalone reproduction for the SGLang maintainers: the Triton chain speculative sampler
emits token VOCAB_SIZE - 1, whatever its probability, when the final coin lands above the
running sum's total. Needs torch, Triton and SGLang's released package only (no specdec,
no sglang import: the kernel's file is loaded by path):

    PYTHONPATH=/path/to/site-packages-with-sglang python sglang_chain_sampler_top_coin.py

On a CUDA GPU it runs compiled Triton; without one, Triton's interpreter. Exit 1 while the
bug reproduces. Two parts:
1. one request whose drafts are all accepted (q = p), its bonus row p of vocabulary 7 with
   p[6] = 0, and the final coin 1 - 2^-24 (the largest float32 torch.rand can draw):
   SGLang emits 6;
2. the rate, classic and block, draft accepted (the bonus) or rejected (the recovered token):
   rows of a 151,936-token vocabulary (Qwen2's) whose last 20 % are masked to 0 (top-p, a
   grammar, allowed ids), ordinary coins (torch.rand) and a sixteenth at 1 - 2^-24: how many
   tokens of probability 0 come out.

Report text:

  Title: [Spec] chain_speculative_sampling_triton samples VOCAB_SIZE - 1 (probability 0)
  when the final coin exceeds the running CDF

  In speculative_sampling_classic_kernel (sglang/kernels/ops/speculative/reject_sampling.py;
  srt/speculative/reject_sampling.py in 0.5.14-0.5.15) the final sampling computes
  norm_sum with tl.sum (pass 1), target_u = coin_final * norm_sum, then scans
  tl.cumsum block by block for the first total_cumsum > target_u, and falls back to
  final_token = VOCAB_SIZE - 1 when none is found. tl.sum and the running tl.cumsum
  round differently in float32, so for a coin close to 1 the scan's total can end at or
  below target_u: no match, and the token is VOCAB_SIZE - 1 even where its probability is
  0 (masked by top-k/top-p, a grammar, allowed ids, or a padded vocabulary's unused ids).
  Both the classic and the block-verification paths share this final sampling. Expected:
  never a token of probability 0; e.g. fall back to the last index whose value is > 0
  (track it during the scan), or compare against the scan's own total. Found by specdec's
  kernel_chain_acceptance law (input class edge_coins: coins of 0.0 and 1 - 2^-24)."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

TOP_COIN = 1.0 - 2.0 ** -24
HOMES = ("kernels/ops/speculative/reject_sampling.py",  # 0.5.16+
         "srt/speculative/reject_sampling.py")          # 0.5.14-0.5.15


def load_sampler():
    """chain_speculative_sampling_triton from the installed sglang, by file (no sglang import)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None:
        sys.exit("sglang is not on the path: put the folder holding it on PYTHONPATH")
    root = Path(next(iter(spec.submodule_search_locations)))
    for home in HOMES:
        if (root / home).exists():
            mod_spec = importlib.util.spec_from_file_location("_sglang_reject_sampling",
                                                              root / home)
            mod = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(mod)
            return mod.chain_speculative_sampling_triton
    sys.exit(f"no reject_sampling.py under {root} ({', '.join(HOMES)}): a release before 0.5.14")


def final_tokens(sample, p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor,
                 final: torch.Tensor, dev: str, block: bool) -> torch.Tensor:
    """One draft per row (token `draft`, proposed from q; q = p accepts it), as eagle_utils'
    verify calls the kernel (coins 0.5 for the draft); the token after the accepted drafts:
    the bonus, or the one recovered from the residual."""
    bs, V = p.shape
    target = torch.stack([p, p], 1).to(dev)
    draft_probs = q[:, None, :].contiguous().to(dev)
    cand = torch.stack([torch.zeros(bs, dtype=torch.int64), draft], 1).to(dev)
    ri = torch.arange(bs * 2, device=dev).view(bs, 2)
    nxt = torch.full((bs, 2), -1, dtype=torch.int64, device=dev)
    pred = torch.full((bs * 2,), -1, dtype=torch.int32, device=dev)
    acc = torch.full((bs, 2), -1, dtype=torch.int32, device=dev)
    num = torch.zeros(bs, dtype=torch.int32, device=dev)
    coins = torch.full((bs, 2), 0.5, device=dev)
    extra = {"block_verification": True} if block else {}
    sample(pred, acc, num, cand, ri, nxt, nxt, coins, final.to(dev), target, draft_probs,
           1.0, 1.0, True, **extra)
    last = acc.long().gather(1, num.long()[:, None])[:, 0]
    return pred.long()[last].cpu()


def main() -> int:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sample = load_sampler()
    bad = 0
    row = torch.tensor([0.0, 1, 3, 2, 5, 1, 0]) / 12
    for block in (False, True):
        tok = int(final_tokens(sample, row[None], row[None], torch.tensor([5]),
                               torch.tensor([TOP_COIN]), dev, block)[0])
        print(f"part 1 ({'block' if block else 'classic'}): vocabulary 7, p[6] = 0, draft 5 "
              f"accepted, final coin 1 - 2^-24 -> token {tok} (p = {float(row[tok]):.4f})")
        bad += float(row[tok]) == 0.0
    V, rows, reps = (151936, 2048, 8) if dev == "cuda" else (2048, 32, 1)
    gen = torch.Generator().manual_seed(0)
    for block in (False, True):
        for rejected in (False, True):
            zero = top_zero = total = tops = 0
            for _ in range(reps):
                logits = torch.randn(rows, V, generator=gen)
                logits[:, int(V * 0.8):] = float("-inf")  # top-p, a grammar, allowed ids
                p = torch.softmax(logits, -1)
                # rejected: the drafter saw no mask, and drafted a masked token (p = 0)
                q = torch.softmax(torch.randn(rows, V, generator=gen), -1) if rejected else p
                draft = (torch.randint(int(V * 0.8), V, (rows,), generator=gen) if rejected
                         else p.argmax(-1))
                final = torch.rand(rows, generator=gen)
                top = torch.rand(rows, generator=gen) < 1 / 16
                final[top] = TOP_COIN
                tok = final_tokens(sample, p, q, draft, final, dev, block)
                hit = p.gather(1, tok[:, None])[:, 0] == 0
                zero += int(hit[~top].sum())
                top_zero += int(hit[top].sum())
                total += int((~top).sum())
                tops += int(top.sum())
                bad += int(hit.sum())
            print(f"part 2 ({'block' if block else 'classic'}, "
                  f"{'draft rejected, recovered' if rejected else 'draft accepted, bonus'}): "
                  f"vocabulary {V}, last 20 % masked: {zero} of {total} ordinary coins and "
                  f"{top_zero} of {tops} top coins gave a token of probability 0")
    print("REPRODUCED" if bad else "not reproduced")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
