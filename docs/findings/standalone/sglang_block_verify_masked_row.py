"""Standalone reproduction for the SGLang maintainers: the Triton chain sampler's block
verification accepts a draft of target probability 0 when a later draft position's target
row is fully masked (NaN after the softmax). Needs torch, Triton and SGLang's released
package only (no specdec, no sglang import: the kernel's file is loaded by path):

    PYTHONPATH=/path/to/site-packages-with-sglang python sglang_block_verify_masked_row.py

On a CUDA GPU it runs compiled Triton, where it reproduces; without one, Triton's
interpreter, where it does not (numpy's minimum keeps the NaN). Exit 1 while it reproduces.
The case: one request, vocabulary 2, three deterministic drafts [0, 1, 1] (q one-hot), the
target p = [[0, 1], all -inf (NaN), [0, 1], [.5, .5]]: draft 0 has p = 0, so every lossless
rule rejects it (the classic path emits [1]).

Report text:

  Title: [Spec] block verification accepts a zero-probability draft when a later target
  row is fully masked (NaN) on CUDA

  In speculative_sampling_classic_kernel (sglang/kernels/ops/speculative/reject_sampling.py)
  with BLOCK_VERIFICATION, the prefix ratio is chained as
  prefix_prob = tl.where(q_is_prob, tl.minimum(prefix_prob * p / q, 1.0), 0.0). When the
  target row at a draft position is fully masked (all logits -inf after a grammar mask or
  logit bias, so NaN after the softmax), prefix_prob * p / q is NaN and compiled Triton's
  tl.minimum(NaN, 1.0) returns 1.0: the chain of ratios restarts at 1 after a draft whose
  ratio was 0, the backward scan accepts at the last step, and the whole block is committed,
  including a draft the target gives probability 0. (Triton's interpreter propagates the NaN,
  so CPU tests do not see it.) Expected: a prefix that contains a draft of p = 0 is never
  accepted; e.g. tl.minimum(..., propagate_nan=tl.PropagateNan.ALL) so the NaN rejects, or
  treat a non-finite p as 0. Found by specdec's kernel_chain_acceptance law (input class
  nonfinite_rows: fully masked target rows), run on an H200."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

HOME = "kernels/ops/speculative/reject_sampling.py"


def load_sampler():
    """chain_speculative_sampling_triton from the installed sglang, by file (no sglang import)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None:
        sys.exit("sglang is not on the path: put the folder holding it on PYTHONPATH")
    path = Path(next(iter(spec.submodule_search_locations))) / HOME
    if not path.exists():
        sys.exit(f"no {HOME} under sglang: a release before 0.5.16")
    mod_spec = importlib.util.spec_from_file_location("_sglang_reject_sampling", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.chain_speculative_sampling_triton


def run(sample, dev: str, block: bool) -> list[int]:
    """The request's emitted tokens, as eagle_utils' verify reads them back."""
    nan = float("nan")
    target = torch.tensor([[[0.0, 1], [nan, nan], [0, 1], [0.5, 0.5]]], device=dev)
    drafts = [0, 1, 1]
    q = torch.zeros(1, 3, 2, device=dev)
    q[0, torch.arange(3), drafts] = 1.0                       # deterministic drafts
    cand = torch.tensor([[7] + drafts], device=dev)           # the bonus, then the drafts
    ri = torch.arange(4, device=dev).view(1, 4)
    nxt = torch.full((1, 4), -1, dtype=torch.int64, device=dev)
    pred = torch.full((4,), -1, dtype=torch.int32, device=dev)
    acc = torch.full((1, 4), -1, dtype=torch.int32, device=dev)
    num = torch.zeros(1, dtype=torch.int32, device=dev)
    coins = torch.full((1, 4), 0.5, device=dev)
    final = torch.full((1,), 0.5, device=dev)
    extra = {"block_verification": True} if block else {}
    sample(pred, acc, num, cand, ri, nxt, nxt, coins, final, target, q, 1.0, 1.0, True,
           **extra)
    n = int(num[0])
    return [int(pred[int(acc[0, i])]) for i in range(n + 1)]


def main() -> int:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sample = load_sampler()
    bad = False
    for block in (False, True):
        out = run(sample, dev, block)
        zero = bool(out) and out[0] == 0                      # draft 0: p = 0 at position 0
        bad |= zero
        print(f"{'block' if block else 'classic'} on {dev}: emitted {out}"
              + ("  <- draft 0 accepted at p = 0" if zero else ""))
    print("REPRODUCED" if bad else "not reproduced")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
