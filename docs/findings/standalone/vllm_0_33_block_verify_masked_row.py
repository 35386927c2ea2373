"""Standalone reproduction for the vLLM maintainers: Model Runner V2's block verification
accepts a draft token of target probability 0 when a later draft position's target logits
are all -inf. Needs torch, Triton and vLLM's released package only (no specdec):

    PYTHONPATH=/path/to/site-packages-with-vllm python vllm_0_33_block_verify_masked_row.py

On a CUDA GPU it runs compiled Triton; without one it runs Triton's interpreter
(TRITON_INTERPRET=1 is set here; libdevice.log1p, which the interpreter lacks, gets a body).
Exit 1 while the bug reproduces.

Report text:

  Title: [Spec Decode][MRV2] Block verification accepts a zero-probability draft when a
  later position's logits are fully masked

  With use_block_verification=True, rejection_sample (v1/worker/gpu/spec_decode/
  rejection_sampler_utils.py) accepts draft 0 although the target gives it probability 0,
  when the target logits at draft position 1 are all -inf (a terminated grammar, or allowed
  ids and bad words that leave no token). In _rejection_kernel the block rule computes
  h = residual_mass / (residual_mass + 1 - prefix_joint_ratio) and falls back to h = 1.0
  when the denominator is not > 0. The residual mass of draft 0 is read from position 1's
  row; all -inf makes it NaN, NaN > 0 is false, h = 1.0 and the coin accepts. The per-token
  sampler (use_block_verification=False) and V1's rejection sampler reject the draft on the
  same inputs. Expected: a zero-probability draft is never accepted (treat a non-finite
  residual as 0, or test `denom == 0` for the fallback). Found by specdec's
  kernel_chain_acceptance law (input class nonfinite_rows)."""
from __future__ import annotations

import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _log1p(x):
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * (x / tl.where(u == 1.0, 1.0, u - 1.0)))


if not torch.cuda.is_available():
    import triton.language.extra.libdevice as libdevice
    libdevice.log1p = _log1p
else:  # a vLLM folder without its compiled op library (a trimmed copy): no kernel here uses it
    import importlib
    import types
    try:
        importlib.import_module("vllm._C_stable_libtorch")
    except ImportError:
        sys.modules["vllm._C_stable_libtorch"] = types.ModuleType("vllm._C_stable_libtorch")

from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import rejection_sample  # noqa: E402


def main() -> int:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    inf, nan = float("inf"), float("nan")
    # One request, vocabulary 2, drafts [1, 0]; rows: draft 0, draft 1, bonus.
    p = torch.tensor([[1.0, 0.0], [nan, nan], [0.286, 0.714]])
    target_logits = torch.where(p.isnan(), -inf, p.log()).to(dev)  # row 1: all -inf
    q = torch.tensor([[[0.0, 1.0], [0.75, 0.25]]])                 # [state, step, V]
    draft_logits = q.log().to(dev)
    i32 = dict(dtype=torch.int32, device=dev)
    emitted = []
    for seed in range(10):
        sampled, num = rejection_sample(
            target_logits.clone(), draft_logits,
            torch.tensor([0, 1, 0], **i32),           # draft_sampled: row inputs
            torch.tensor([0, 3], **i32),              # cu_num_logits
            torch.tensor([16, 17, 18], dtype=torch.int64, device=dev),  # positions
            torch.tensor([0], **i32),                 # idx_mapping
            torch.tensor([0, 0, 0], **i32),           # expanded_idx_mapping
            torch.tensor([0, 1, 2], **i32),           # expanded_local_pos
            torch.tensor([1.0], device=dev),          # temperature per state
            torch.tensor([seed], dtype=torch.int64, device=dev),  # seed per state
            2, use_block_verification=True)
        emitted.append(sampled[0, :int(num[0])].tolist())
    bad = [e for e in emitted if e and e[0] == 1]
    print(f"emitted per seed: {emitted}")
    print(f"draft 0 (token 1, target probability 0) accepted on {len(bad)} of 10 seeds")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
