"""Finding: vLLM's V1 speculative decoding verifies drafts against target logits to which a
request's allowed_token_ids (and bad_words) were never applied, so a draft token the
request does not allow is accepted (re-found by the release sweep; fixed upstream).

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check
accepts_zero_prob, variant entry (RejectionSampler.forward, called as GPUModelRunner calls
it), input class single_token with a banned token (harness/strategies/chain_inputs.py):

  python docs/findings/vllm_0_11_entry_ignores_allowed_ids_at_drafts.py 0.11.0

  variant entry: draft 0 (token 1) has target probability 0 and was accepted; row 0:
  drafts [1] (1 of 1), output [1, 0]

The case: one request, vocabulary 2, target p = [1, 0] at both positions; token 1 is outside
the request's allowed ids (the adapter hands it over as allowed_token_ids_mask and raises its
logit above the row's maximum, so an entry that skips the mask sees it as likely). The draft
is token 1. V1's own kernel (variant classic, given p directly) rejects it.

What happens (0.10.2 and 0.11.0, vllm/v1/worker/gpu_model_runner.py::_sample and
vllm/v1/sample/rejection_sampler.py::RejectionSampler.forward): the runner samples the bonus
token with the Sampler, which applies allowed_token_ids and bad_words, but hands the draft
positions' logits (`logits[target_logits_indices]`) to RejectionSampler.forward, whose
compute_probs applies temperature, top-k and top-p only. A request with allowed_token_ids
or bad_words under speculative decoding can therefore emit a disallowed token at any
accepted draft position.

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces on 0.8.1 to 0.11.0 (0.8.0 cannot run), holds from 0.11.1.

Verdict: bug, fixed upstream: 0.11.1's RejectionSampler.forward takes the whole logits and
applies the logits processors to the draft positions (apply_logits_processors: penalties,
allowed ids through repeat_indices, apply_bad_words_with_drafts), the code of vllm-project/
vllm PR #19482 ("[V1] Logit processors for rejection sampler"). The sweep
(bench/results/sweep-vllm-cpu-2026-11-28/) flips the law on the entry variant between 0.11.0
and 0.11.1. Releases before 0.10.2 fail the law's zero-coin example first
(vllm_0_9_zero_coin_accepts_zero_prob.py), which hides this one in the sweep's table;
`python <this script> RELEASE` checks one.

Run: `python docs/findings/vllm_0_11_entry_ignores_allowed_ids_at_drafts.py [RELEASE]`
(default 0.11.0; exit 1 while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on, where they are installed.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.11.0"
SEED = 0
KNOBS = {"variant": "entry", "ratio_rule": True, "bs": 1, "k": 1, "vocab": 2, "ragged": False,
         "greedy": "none", "deterministic": False, "zeros": 0.0, "close": 0.0,
         "input_class": "single_token"}
REPRODUCED_ON = ("0.10.2", "0.11.0")
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
