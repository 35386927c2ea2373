"""Finding: vLLM 0.33.0's Model Runner V2 block verification (the rejection sampler with
use_block_verification=True) accepts a draft token that the target gives probability 0 when
a later draft position's target row is fully masked (all logits -inf, so NaN after the
softmax).

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check
accepts_zero_prob, in the input class nonfinite_rows (harness/strategies/chain_inputs.py):

  python docs/findings/vllm_0_33_block_verify_masked_row_accepts_zero_prob.py 0.33.0

  variant mrv2-block: draft 0 (token 1) has target probability 0 and was accepted;
  row 0: drafts [1, 0] (2 of 2), output [1, 0, -1]

The case: one request, vocabulary 2, drafts [1, 0] proposed from q = [[0, 1], [.75, .25]],
target p = [[1, 0], all -inf (NaN), [.286, .714]]. Token 1 has p = 0 at position 0, so every
lossless rule rejects it there (p/q = 0): V1's sampler, its public entry and MRV2's
per-token sampler all emit [0] on every seed; with the masked row replaced by any finite row
MRV2's block verifier rejects it too. With the masked row it accepts both drafts on every
seed (10 of 10). Standalone, from the wheel alone (torch, Triton and vLLM's own folder):
docs/findings/standalone/vllm_0_33_block_verify_masked_row.py.

What happens (vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py, _rejection_kernel,
the USE_BLOCK_VERIFICATION branch): at draft i the block rule compares the coin with
h = residual_mass / (residual_mass + 1 - prefix_joint_ratio), and falls back to h = 1.0 where
that denominator is not > 0 (`tl.where(denom > 0.0, residual_mass / denom, 1.0)`), meant for
a zero denominator. The residual mass of draft 0 is read from the next position's target
row; with that row all -inf it is NaN, the comparison NaN > 0 is false, h becomes 1.0, and
`u <= h` sets accepted_length past draft 0 although its prefix probability is 0.

Where it reaches production: MRV2 (VLLM_USE_V2_MODEL_RUNNER=1) with a speculative config that
turns block verification on (use_block_verification), and a request whose target logits at
some draft position are all -inf after processing: a grammar that is terminated or rejects
the drafts before it (structured output reuses the failed state's bitmask), or allowed ids
and bad words that exclude every token.

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces on every release from 0.25.0 (the first with block verification;
n/a before) to 0.33.0.

Verdict: bug, unfixed in the newest release checked (0.33.0). Reproduced on 0.25.0 (the
oldest release of the adapter's sweep list with block verification), 0.29.0 and 0.33.0:
this script and the standalone one over each release's folder, on CPU; 0.33.0 also on an
H200. The releases between those are not checked: `python <this script> RELEASE` installs
and runs one. Report text for the maintainers:
docs/findings/standalone/vllm_0_33_block_verify_masked_row.py's docstring.

Run: `python docs/findings/vllm_0_33_block_verify_masked_row_accepts_zero_prob.py [RELEASE]`
(exit 1 while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on; the laws draw around it there (VllmKernels' KNOWN; --with-known draws it).
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.33.0"
SEED = 2
KNOBS = {"variant": "mrv2-block", "ratio_rule": False, "bs": 1, "k": 2, "vocab": 2,
         "ragged": False, "greedy": "none", "deterministic": False, "zeros": 0.3,
         "close": 0.0, "input_class": "nonfinite_rows"}
REPRODUCED_ON = ("0.25.0", "0.29.0", "0.33.0")
DEVICE = None  # the GPU where there is one (compiled Triton), else the interpreter

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
