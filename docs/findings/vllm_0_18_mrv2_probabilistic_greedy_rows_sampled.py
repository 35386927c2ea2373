"""Finding: vLLM 0.18's Model Runner V2 probabilistic rejection sampler treats a greedy
request (temperature 0) as a sampled one when it accepts drafts: a draft that is not the
target's argmax can be accepted, so the greedy request's output is not its greedy decode
(re-found by the release sweep once the adapter was taught 0.18's signature; fixed in 0.19).

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check greedy,
variant mrv2:

  python docs/findings/vllm_0_18_mrv2_probabilistic_greedy_rows_sampled.py 0.18.0

  variant mrv2: greedy row: expected [1]; row 0: drafts [2, 1] (2 of 2), output [2, 1, 3]

The case: one greedy request, two drafts, vocabulary 4. Over seeds 0-11 of these knobs, 5
fail on 0.18.0 and none on 0.19.0.

What happens (0.18.0, vllm/v1/worker/gpu/spec_decode/rejection_sampler.py): the caller
(RejectionSampler.__call__, with use_strict_rejection_sampling off) applies the sampling
params, whose temperature kernel returns early for temperature 0 and leaves the logits raw;
probabilistic_rejection_sample then takes softmax(target_logits) and accepts a draft iff
target_prob > u * draft_prob, with no greedy branch. Only the resampled token honours
temperature 0 (an argmax). 0.19.0's sampler gathers the target argmax for greedy requests
and tests `temp == 0.0` in its kernels.

Where it reaches production: MRV2 (VLLM_USE_V2_MODEL_RUNNER=1) with probabilistic rejection
sampling turned on (the default there is strict), and any greedy request in the batch.

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces on 0.18.0 and 0.18.1, holds from 0.19.0 (n/a before).

Verdict: bug in 0.18.0 and 0.18.1 (the releases with this signature), fixed in 0.19.0: the
sweep (bench/results/sweep-vllm-cpu-2026-11-28/REPORT.md) fails kernel_chain_acceptance
(greedy, variant mrv2) on both and passes 0.17.1 before and 0.19.0 after.

Run: `python docs/findings/vllm_0_18_mrv2_probabilistic_greedy_rows_sampled.py [RELEASE]`
(default 0.18.0; exit 1 while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on, where they are installed.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.18.0"
SEED = 1
KNOBS = {"variant": "mrv2", "ratio_rule": True, "bs": 1, "k": 2, "vocab": 4, "ragged": False,
         "greedy": "all", "deterministic": False, "zeros": 0.0, "close": 0.0,
         "input_class": "plain"}
REPRODUCED_ON = ("0.18.0",)
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
