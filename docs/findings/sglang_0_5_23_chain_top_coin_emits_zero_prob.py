"""Finding: SGLang's Triton chain speculative sampler (chain_speculative_sampling_triton, the
sampled verify of its EAGLE chains and of rejection sampling) emits token VOCAB_SIZE - 1,
whatever its probability, when the final coin lands above the float32 running sum's total,
which a coin of 1 - 2^-24 (the largest float32 torch.rand draws) does.

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check support,
on its explicit example of the input class edge_coins (harness/strategies/chain_inputs.py:
coins of exactly 0.0 at drafts of target probability 0, 1 - 2^-24 elsewhere and at most final
draws):

  python docs/findings/sglang_0_5_23_chain_top_coin_emits_zero_prob.py 0.5.23

  variant classic: token 7 at position 0 has target probability 0 (row [0.1, 0.0, 0.1,
  0.1, 0.2, 0.5, 0.0, 0.0]); row 0: drafts [6, 2] (2 of 2), output [7, -1, -1]

Both the classic and the block-verification variant fail; specdec's twin and vLLM (float64
coins drawn inside its sampler) do not meet it. Standalone, from the wheel alone (torch,
Triton and SGLang's folder), with the report text:
docs/findings/standalone/sglang_chain_sampler_top_coin.py (one request of vocabulary 7, p[6]
= 0, every draft accepted, final coin 1 - 2^-24: SGLang emits 6).

What happens (sglang/kernels/ops/speculative/reject_sampling.py,
speculative_sampling_classic_kernel, "Final Sampling"): norm_sum is a tl.sum over the row,
target_u = coin_final * norm_sum, and the scan takes the first index whose running
tl.cumsum exceeds target_u, with final_token = VOCAB_SIZE - 1 where none does. A reduction
and a running scan round differently in float32, so for a coin close to 1 the scan's total
can end at or below target_u: no index matches, and the last vocabulary id is emitted even
where the target gives it probability 0 (cut by top-k or top-p, a grammar or allowed ids,
or a padded vocabulary's unused ids).

Where it reaches production: every sampled (temperature > 0) EAGLE / EAGLE3 / standalone
chain verify that goes through the Triton chain sampler (speculative_eagle_topk 1 with
rejection sampling, or the block-verification flag), whenever _verify_coins' float32 coin
for the final draw exceeds the scan's rounded total. A request with a sampling seed meets
the top coin itself: _seeded_verify_coins (srt/speculative/eagle_utils.py, 0.5.23) maps its
murmur hash to [0, 1) in float64, and the float32 cast rounds the top 129 of the 2^32 hashes
to 1.0, which it then clamps to exactly 1 - 2^-24, the coin of the law's example.

On a GPU: the law's recorded case (vocabulary 8) passes there, compiled Triton's sum and
scan agreeing on it, so DEVICE is the CPU. The standalone script shows it on an H200 at a
real vocabulary (151,936, Qwen2's, the last 20 % masked): at the final coin 1 - 2^-24, 8 of
1,028 bonus draws (classic), 5 of 1,062 recovered draws (classic) and 6 of 1,030 bonus draws
(block) gave a token of probability 0; none of 46,032 ordinary coins did
(bench/results/kernel-gate-sglang-jit-h200-2026-11-28-8bb0cbc.txt). The rate in serving is
the share of coins above the scan's rounded total: rare per token, steady at scale.

Verdict: bug, unfixed in the newest release (0.5.23). Over every release (the sweep,
bench/results/sweep-sglang-cpu-2026-11-28/REPORT.md, which draws known findings) the law's
case fails on each release from 0.5.14, the first with the Triton chain sampler
(srt/speculative/reject_sampling.py; kernels/ops/speculative/ from 0.5.16), to 0.5.23; before
0.5.14 SGLang had no chain sampler the law applies to.

Run: `python docs/findings/sglang_0_5_23_chain_top_coin_emits_zero_prob.py [RELEASE]` (exit 1
while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on; the laws draw around it there (SglangKernels' KNOWN; --with-known draws it).
"""
from __future__ import annotations

from harness.laws.kernel_chain_acceptance import EXAMPLES
from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "sglang-kernels", "0.5.23"
SEED, KNOBS = EXAMPLES[1]["seed"], EXAMPLES[1]["knobs"]
REPRODUCED_ON = ("0.5.23",)
DEVICE = "cpu"  # the interpreter's float32 sums; a GPU's reduction order differs

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
