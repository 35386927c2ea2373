"""Finding: vLLM's V1 rejection sampler still masks a request's stop tokens at the bonus
position when the drafts accepted in the same step have already brought the request to its
min_tokens: the bonus is sampled as if none of them had been accepted, so a stop token
(EOS) that non-speculative decoding would allow there cannot be emitted, and where it is the
only token the request's sampling keeps (top-k 1, a greedy request's argmax, a grammar at
its end) another token, of probability 0, is emitted (found by the kernel_chain_acceptance
law, variant entry, once the entry's requests asked for min_tokens; unfixed in 0.33.0).

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check
support, variant entry:

  python docs/findings/vllm_0_33_min_tokens_bonus_masked_after_drafts.py 0.33.0

  variant entry: token 0 at position 2 has target probability 0 (row [0.0, 0.0, 0.0, 0.0,
  1.0, 0.0]); row 1: drafts [2, 2] (2 of 2), output [2, 2, 0]

Request 1 asks for min_tokens 1 (no output yet) with stop token 4; its two drafts are
accepted, so the bonus is its third output token, where token 4 is allowed and is the only
token its target keeps. The entry masks it anyway: the row is all -inf, and token 0 comes
out. (With real logits and top-k 1 the emitted token is the second best: still one the
request's distribution gives 0.)

What happens (0.33.0, v1/sample/rejection_sampler.py, RejectionSampler.forward): the bonus
row goes through the Sampler, whose MinTokensLogitsProcessor.apply masks the stop tokens of
every request with len(output_token_ids) < min_tokens, output_token_ids being the outputs
before this step; the drafts accepted in this step are not counted. The draft rows get
apply_with_spec_decode (PR #32642, 0.17.0), which masks exactly the rows whose output count
is below min_tokens; the bonus row, the one after them, is not given the same count.

Where it reaches production: any V1 speculative method and a request with min_tokens > 0,
in the step whose accepted drafts cross min_tokens: its bonus can never be a stop token,
so its output is longer than non-speculative decoding would make it (greedy: a different
output); with a sampler that keeps one token (top-k 1, low top-p) or a grammar that allows
only EOS, the bonus is a token of probability 0.

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces at its check (support) on every release from 0.10.1 (the first the
adapter hands min tokens to) to 0.33.0; 0.8.1-0.10.0 fail the case at the same check
without min tokens handed over (another cause: the cases of the bad-words and
min-tokens-at-drafts findings fail there the same way).

Verdict: bug, unfixed in the newest release. Reproduced on 0.17.0, 0.18.0, 0.19.0, 0.25.0,
0.29.0 and 0.33.0. Releases before 0.17.0 mask the bonus the same way (MinTokens' apply in
the Sampler); there the drafts are not masked at all, the finding
vllm_0_16_min_tokens_ignored_at_drafts.py. The laws draw around it on the releases it was
reproduced on (`VllmKernels.KNOWN`: min-tokens requests there mask their whole rows).

Run: `python docs/findings/vllm_0_33_min_tokens_bonus_masked_after_drafts.py [RELEASE]`
(default 0.33.0; exit 1 while it reproduces). Regression: tests/test_findings_kernels.py.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.33.0"
SEED = 2097153
KNOBS = {"bs": 2, "close": 1.0, "deterministic": False, "greedy": "none",
         "input_class": "single_token", "k": 2, "ragged": False, "ratio_rule": True,
         "variant": "entry", "vocab": 6, "zeros": 0.3}
REPRODUCED_ON = ("0.17.0", "0.18.0", "0.19.0", "0.25.0", "0.29.0", "0.33.0")
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
