"""Finding: SGLang 0.5.23's Triton chain sampler with block verification
(`chain_speculative_sampling_triton(..., block_verification=True)`, what eagle_sample calls
under `--speculative-use-rejection-sampling` with block verification) accepts a draft token
that the target gives probability 0 when a later draft position's target row is fully
masked (all logits -inf, NaN after the softmax). Compiled Triton only: on a GPU.

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check
accepts_zero_prob, in the input class nonfinite_rows (harness/strategies/chain_inputs.py),
found by `python -m harness check --device cuda --engine sglang-kernels@0.5.23` on an H200:

  python docs/findings/sglang_0_5_23_block_verify_masked_row_accepts_zero_prob.py 0.5.23

  variant block: draft 0 (token 0) has target probability 0 and was accepted;
  row 0: drafts [0, 1, 1] (3 of 3), output [0, 1, 1, 0]

What happens (sglang/kernels/ops/speculative/reject_sampling.py,
speculative_sampling_classic_kernel, the BLOCK_VERIFICATION branch): the prefix ratio is
chained as `prefix_prob = tl.where(q_is_prob, tl.minimum(prefix_prob * p / q, 1.0), 0.0)`.
Draft 0 has p = 0, so its prefix ratio is 0 and every later one should stay 0. At the masked
position p is NaN, prefix_prob * p / q is NaN, and compiled Triton's `tl.minimum(NaN, 1.0)`
returns 1.0 (its min drops a NaN operand unless asked to propagate it), so the chain
restarts at 1.0: the last step's prefix ratio is 1, the backward scan accepts at the last
step, and every draft is committed, the one of probability 0 included. Triton's interpreter
(numpy's minimum) keeps the NaN, every comparison with it is false and nothing is accepted:
the CPU run of the same case passes. The classic (token by token) path stops at draft 0.

Where it reaches production: a CUDA server with EAGLE and rejection sampling with block
verification (`--speculative-use-rejection-sampling`, block verification on), and a request
whose target logits at a draft position after the first are all -inf once processed: a
grammar (`grammar_mask.apply` in eagle_sample) that accepts nothing there, after a draft it
rejected, or a logit bias or vocabulary mask that leaves no token. eagle_sample's
`sanitize_nan_logits` runs on the model's logits before the mask, so the NaN the softmax
makes of a fully masked row reaches the kernel.

Verdict: bug, unfixed in the newest release (0.5.23), reproduced there on an H200 (compiled
Triton); the block verification path is in 0.5.23's kernel only among the releases the
sweep ran with it. The same mechanism in vLLM's MRV2 block verifier is
vllm_0_33_block_verify_masked_row_accepts_zero_prob.py. Standalone, from the wheel alone
(torch, Triton and SGLang's kernel file), with the report text for the maintainers:
docs/findings/standalone/sglang_block_verify_masked_row.py.

Run: `python docs/findings/sglang_0_5_23_block_verify_masked_row_accepts_zero_prob.py
[RELEASE]` on a GPU (exit 1 while it reproduces).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on, on a GPU (skipped on CPU: DEVICE below); the laws draw around it there on CUDA
(SglangKernels' KNOWN, with its device; --with-known draws it).
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "sglang-kernels", "0.5.23"
SEED = 0
KNOBS = {"variant": "block", "ratio_rule": True, "bs": 3, "k": 3, "vocab": 2,
         "ragged": False, "greedy": "none", "deterministic": True, "zeros": 0.3,
         "close": 0.0, "input_class": "nonfinite_rows"}
REPRODUCED_ON = ("0.5.23",)
DEVICE = "cuda"  # compiled Triton only: the interpreter keeps the NaN

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
