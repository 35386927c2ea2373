"""Finding: vLLM's V1 rejection sampler applies a request's bad words to another request's
draft rows when the requests before it in the batch have no bad words (re-found by the
release sweep; fixed upstream).

Laws broken: kernel_chain_acceptance (check rejects_certain: a draft with p >= q rejected)
and kernel_chain_seeded (check neighbours: a request's tokens change with its neighbours),
variant entry (RejectionSampler.forward), input class single_token with banned tokens:

  python docs/findings/vllm_0_11_bad_words_on_the_wrong_request.py 0.11.1

  variant entry: draft 0 (token 0) has p 1 >= q 1, so min(1, p/q) = 1, and was rejected

The case: two requests, vocabulary 2, one draft each, q = p. Request 0 bans token 1 through
allowed_token_ids; request 1 bans token 0 as a one-token bad word. Request 0's draft is
token 0 (p = 1), which every rule accepts; vLLM rejects it, because request 1's bad word is
applied to request 0's draft row, leaving it all -inf.

What happens (0.11.1, vllm/v1/sample/ops/bad_words.py::apply_bad_words_with_drafts): the
loop runs over the requests that have bad words only (`for i, bad_words_ids in
bad_words_token_ids.items()`) and advances start_idx by their own draft counts, so request
i's bad words land on the draft rows of the first requests in the batch whenever an earlier
request has none; those requests lose tokens they are allowed, and request i keeps the ones
it banned.

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces at its check (rejects_certain) on 0.11.1 to 0.13.0, holds from
0.14.0 (0.11.0 and earlier fail the case at another check: the allowed-ids finding).

Verdict: bug, fixed upstream by vllm-project/vllm PR #31908 ("[BugFix] Fix bad words with
speculative decoding", merged 2026-01-07: "assumed the bad_words requests were always the
first ones in the persistent batch"), which walks every request and skips those without bad
words. In the sweep (bench/results/sweep-vllm-cpu-2026-11-28/) the entry variant fails
kernel_chain_acceptance and kernel_chain_seeded on 0.11.1 to 0.13.0 (on 0.12.0 and 0.13.0
the law's first failure is a banned token emitted, check support: the other face of the same
misplaced ban) and passes from 0.14.0; this script's case was run on 0.11.1 (reproduces) and
0.33.0 (holds).

Run: `python docs/findings/vllm_0_11_bad_words_on_the_wrong_request.py [RELEASE]` (default
0.11.1; exit 1 while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on, where they are installed.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_chain_acceptance", "vllm-kernels", "0.11.1"
SEED = 0
KNOBS = {"variant": "entry", "ratio_rule": True, "bs": 2, "k": 1, "vocab": 2, "ragged": False,
         "greedy": "none", "deterministic": False, "zeros": 0.6, "close": 1.0,
         "input_class": "single_token"}
REPRODUCED_ON = ("0.11.1",)
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
