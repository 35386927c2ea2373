"""Finding: before 0.17, vLLM's V1 rejection sampler (RejectionSampler.forward) does not
apply a request's min_tokens at its draft positions, so a stop token (EOS or a
stop_token_id) drafted before the request has min_tokens outputs is verified against
logits that still allow it and can be accepted: the request may stop early, and a
token the request's sampling gives probability 0 is emitted (re-found by the
kernel_chain_acceptance law once the entry's requests asked for min_tokens; fixed in 0.17.0
by PR #32642, "[Core] Support min_tokens with speculative decoding").

Law broken: kernel_chain_acceptance (harness/laws/kernel_chain_acceptance.py), check
accepts_zero_prob, variant entry (RejectionSampler.forward with SamplingMetadata whose
logits processors hold vLLM's MinTokensLogitsProcessor, as build_logitsprocs leaves them
when speculation is on):

  python docs/findings/vllm_0_16_min_tokens_ignored_at_drafts.py 0.14.1

  variant entry: draft 0 (token 2) has target probability 0 and was accepted; row 3:
  drafts [2, 5] (2 of 2), output [2, 4, -1]

Request 3 asks for min_tokens 1 with no output yet and stop token 2, so token 2 must not be
sampled at its first position; its first draft is token 2, accepted.

What happens (0.14.1, v1/sample/rejection_sampler.py): apply_logits_processors applies
penalties, allowed ids and bad words to the draft rows but never the logits processors;
MinTokensLogitsProcessor.apply runs only in the Sampler, on the bonus row. A maintainer
called it "a known issue that this doesn't currently work with speculative decoding,
because the rejection sampler doesn't call the logits processors" (vLLM PR #26317,
2025-10). 0.17.0 adds MinTokensLogitsProcessor.apply_with_spec_decode, called for the draft
rows (PR #32642).

Where it reaches production: any V1 speculative method (EAGLE, n-gram, draft model, MTP)
and a request with min_tokens > 0 (min_tokens is the processor speculation keeps:
build_logitsprocs warns that min_p and logit_bias won't work with it, not min_tokens).

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces on 0.10.1 (the first release the adapter hands min tokens to) to
0.16.0 at its check (accepts_zero_prob), holds from 0.17.0.

Verdict: bug, fixed in 0.17.0 (PR #32642). Reproduced on 0.14.1 and 0.16.0; holds on 0.17.0,
0.18.0 and 0.33.0: 0.16.0 and 0.17.0 are adjacent releases, and the sweep's source cache
shows apply_with_spec_decode in rejection_sampler.py from 0.17.0 on. Releases before 0.14.1
were not checked for it on their own: their entry fails this law first on the two other
findings there (drafts without allowed ids, 0.10.2-0.11.0; bad words on the wrong request,
0.11.1-0.13.0).

Run: `python docs/findings/vllm_0_16_min_tokens_ignored_at_drafts.py [RELEASE]` (default
0.14.1; exit 1 while it reproduces). Regression: tests/test_findings_kernels.py.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.14.1"
SEED = 29
KNOBS = {"bs": 6, "close": 1.0, "deterministic": False, "greedy": "none",
         "input_class": "edge_coins", "k": 2, "ragged": False, "ratio_rule": True,
         "variant": "entry", "vocab": 8, "zeros": 0.3}
REPRODUCED_ON = ("0.14.1", "0.16.0")
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
