"""Finding: with num_assistant_tokens_schedule="heuristic" and no explicit
num_assistant_tokens, a seeded sampled request's tokens depend on the earlier calls that used
the same assistant model.

Law broken: engine_seeded_determinism (harness/laws/engine_seeded_determinism.py). Found by `python -m harness check --engine transformers --with-known`; the case below
replays in a fresh process:

  python -m harness repro engine_seeded_determinism --device cpu --config '{"batch_size": 1,
  "engine": "transformers", "max_new_tokens": 16, "max_prompt_len": 8, "n": 0,
  "seed": 0, "settings": {"dtype": "float32", "model_seed": 0, "pad_token_id": null},
  "spec": {"draft_length": null, "drafter": "other", "extra": [["schedule", "heuristic"],
  ["confidence", 0.0], ["ngram", 2]], "topk": null}, "temperature": 1.0, "top_k": 0,
  "top_p": 1.0}'

What happens (transformers 5.24, generation/utils.py, end of _assisted_decoding): the
heuristic schedule adapts num_assistant_tokens within a call (+2 after a fully accepted
round, -1 otherwise) and writes the final value back to
assistant_model.generation_config.num_assistant_tokens. The next call starts from it, drafts
a different number of tokens per round, and so consumes torch's random stream differently:
after `torch.manual_seed(s)` the same request samples different tokens (16 of 16 differ
below). Each output is still a correct sample of the target's distribution
(engine_sampled_distribution passes); what breaks is reproducibility from a seed.

Verdict: documented limitation. GenerationConfig's docstring: "`num_assistant_tokens` value
is persistent over multiple generation calls with the same assistant model"; the
"heuristic_transient" schedule resets it after each call, and setting num_assistant_tokens
before each call (as the adapter does whenever Spec.draft_length is given) avoids it. No
upstream issue: by design.

Reproduced on transformers 5.24.0 and 5.17.0 (CPU).

Run: `python docs/findings/transformers_heuristic_schedule_persists.py` (exit 1 while it
holds). Regression: tests/test_findings_transformers.py (xfail strict: it flips if
transformers ever stops persisting the value).
"""
from __future__ import annotations

import json

from harness.runners import findings
from harness.adapters.protocol import Request, Spec
from harness.adapters.transformers_assisted import TransformersAdapter
from harness.laws import engine_seeded_determinism

CASE = json.loads("""{"batch_size": 1, "engine": "transformers", "max_new_tokens": 16,
"max_prompt_len": 8, "n": 0, "seed": 0, "settings": {"dtype": "float32", "model_seed": 0,
"pad_token_id": null}, "spec": {"draft_length": null, "drafter": "other", "extra": [["schedule",
"heuristic"], ["confidence", 0.0], ["ngram", 2]], "topk": null}, "temperature": 1.0,
"top_k": 0, "top_p": 1.0}""")
SPEC = Spec("other", None, None, (("schedule", "heuristic"), ("confidence", 0.0)))


def demonstration() -> str:
    """One seeded request, a longer call in between, the same request again."""
    adapter = TransformersAdapter("cpu", "float32", 0)
    req = Request((5, 6, 7, 8), 16, temperature=1.0, seed=0)
    first = adapter.generate([req], SPEC)[0].tokens
    adapter.generate([Request((9, 10), 48, temperature=1.0, seed=99)], SPEC)
    left = adapter.drafter("other", "heuristic").generation_config.num_assistant_tokens
    again = adapter.generate([req], SPEC)[0].tokens
    differ = sum(a != b for a, b in zip(first, again))
    return (f"num_assistant_tokens left on the assistant: {left}; the same seeded request: "
            f"{differ} of {len(first)} tokens differ")


def law_holds() -> tuple[bool, str]:
    return findings.law_holds(engine_seeded_determinism, CASE, demonstration())


if __name__ == "__main__":
    findings.main(law_holds, "law holds (behaviour changed upstream?)")
