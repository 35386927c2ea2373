"""Finding: vLLM 0.9's V1 rejection sampler accepts a draft token that the target gives
probability 0 when the uniform coin is exactly 0.0.

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check
accepts_zero_prob, on the law's explicit example (its EXAMPLES: one request, one draft,
vocabulary 2, q = [.5, .5], p = [[1, 0], [.5, .5]], draft token 1, seed 5528393, whose
generator draws 0.0 first):

  python docs/findings/vllm_0_9_zero_coin_accepts_zero_prob.py 0.9.0

  draft 0 (token 1) has target probability 0 and was accepted; output [1, 0]

What happens (0.9.0, vllm/v1/sample/rejection_sampler.py): the random kernel accepts when
`draft_prob > 0 and target_prob / draft_prob >= uniform_prob`; with target_prob 0 that is
0 >= uniform_prob, true for a coin of exactly 0.0. generate_uniform_probs drew float32 coins
(torch.rand), which are multiples of 2^-24: a coin of 0.0 comes once in 2^24 draws, often
enough at serving scale to emit tokens outside the target's support (after top-k/top-p, a
filtered-out token).

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces on 0.8.1 to 0.10.1.1 (0.8.0 cannot run), holds from 0.10.2.

Verdict: bug, fixed upstream by vllm-project/vllm PR #23803 ("[BugFix][Spec Decode] Use
float64 for uniform_probs", merged 2025-08-28; first released in 0.10.2):
generate_uniform_probs draws float64 coins ("there's a non-negligible chance that
uniform_prob is sampled to be exact 0.0", pytorch/pytorch#16706).
The comparison is unchanged, so a coin of exactly 0.0 (now once in 2^53) would still accept;
the law's explicit example no longer reaches it because the float64 draw of this seed is not
0. The sweep over every release (bench/results/sweep-vllm-cpu-2026-11-28/) fails this
example on 0.8.1 to 0.10.1.1 (variant classic; 0.8.0 has no Triton sampler) and passes it
from 0.10.2 on; the rejection_sampler diff across that bound is the float64 draw.

Run: `python docs/findings/vllm_0_9_zero_coin_accepts_zero_prob.py [RELEASE]` (default 0.9.0;
exit 1 while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on, where they are installed.
"""
from __future__ import annotations

from harness.laws.kernel_chain_acceptance import EXAMPLES
from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.9.0"
SEED, KNOBS = EXAMPLES[0]["seed"], EXAMPLES[0]["knobs"]
REPRODUCED_ON = ("0.9.0",)
DEVICE = "cpu"  # the seed draws a 0.0 coin from torch's CPU generator (a GPU's differs)

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
