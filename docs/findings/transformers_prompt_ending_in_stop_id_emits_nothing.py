"""Finding: when the prompt's last token is one of the eos/stop ids and the first round of
assisted generation drafts nothing, generate() returns no new token at all (plain generate
returns one).

Law broken: engine_finish (harness/laws/engine_finish.py): finish reason "length" with 0 of
max_new_tokens 1 tokens, where the plain continuation is [114]. Found on the GPU host
(transformers 5.17.0) by `python -m harness check --engine transformers --device cuda`; the
case replays on CPU too:

  python -m harness repro engine_finish --device cpu --config '{"batch_size": 1,
  "engine": "transformers", "max_new_tokens": 1, "max_prompt_len": 1, "n": 0, "seed": 1,
  "settings": {"dtype": "float32", "model_seed": 0, "pad_token_id": null}, "spec":
  {"draft_length": null, "drafter": "other", "extra": [["schedule", "constant"],
  ["confidence", 0.0], ["ngram", 1]], "topk": null}, "temperature": 0.0, "top_k": 0,
  "top_p": 1.0}'

(prompt [291], stops [114, 291]: the law draws stop ids from the prompt too.)

What happens (transformers 5.17, generation/utils.py, _assisted_decoding): each round
computes `is_done_candidate = stopping_criteria(candidate_input_ids, None)` on the
candidate sequence, and when it is true and every draft matched, `n_matches -= 1`
("Ensure we don't generate beyond max_len or an EOS token"). The candidate generator drafts
nothing when there is no room (AssistedCandidateGenerator: min(num_assistant_tokens,
max_length - len - 1) = 0 for max_new_tokens 1) or no n-gram match (prompt lookup, any
max_new_tokens). The candidate sequence is then the prompt itself, EosTokenCriteria sees the
prompt's last token, candidate_length = n_matches = 0 becomes n_matches = -1, and
`valid_tokens = selected_tokens[:, :0]` commits nothing; the sequence still ends in an eos
id, so the loop stops. The target's token (its argmax, or its sample) is dropped.
Prompts ending in an eos id are ordinary (a chat template's end-of-turn token that is also
a generation eos, `add_eos_token=True` tokenizers).

Verdict: bug, fixed upstream. transformers 5.24 no longer has is_done_candidate: it crops
the accepted tokens at the first eos among the new ones (huggingface/transformers PR
#48981 "[generate] Always correctly restrict assisted decoding with max length/eos token",
which replaced PR #47931 / issue #47912, an eos accepted mid-block). No upstream issue
names this symptom (an empty output); the PR removes its cause. Reproduced on 5.17.0 (CPU
and H100); 5.24.0 passes.

Run: `python docs/findings/transformers_prompt_ending_in_stop_id_emits_nothing.py` (exit 1
while it holds). Regression: tests/test_findings_transformers.py, xfail strict on the
versions it was reproduced on (the adapter's KNOWN entry names them).
"""
from __future__ import annotations

import json

from harness.runners import findings
from harness.adapters.protocol import Request, Spec
from harness.adapters.transformers_assisted import TransformersAdapter
from harness.laws import engine_finish

CASE = json.loads("""{"batch_size": 1, "engine": "transformers", "max_new_tokens": 1,
"max_prompt_len": 1, "n": 0, "seed": 1, "settings": {"dtype": "float32", "model_seed": 0,
"pad_token_id": null}, "spec": {"draft_length": null, "drafter": "other", "extra":
[["schedule", "constant"], ["confidence", 0.0], ["ngram", 1]], "topk": null},
"temperature": 0.0, "top_k": 0, "top_p": 1.0}""")
PROMPT = (291,)
ASSISTANT = Spec("other", None, None, (("schedule", "constant"), ("confidence", 0.0)))
LOOKUP = Spec("prompt_lookup", None, None, (("ngram", 1),))


def demonstration() -> str:
    """The prompt's last token as the only stop id: plain, assistant, prompt lookup."""
    adapter = TransformersAdapter("cpu", "float32", 0)
    rows = []
    for label, spec, cap in (("plain", None, 1), ("assistant", ASSISTANT, 1),
                             ("assistant", ASSISTANT, 2), ("prompt lookup", LOOKUP, 4)):
        out = adapter.generate([Request(PROMPT, cap, stop_token_ids=PROMPT)], spec)[0]
        rows.append(f"{label} max_new_tokens {cap}: {out.tokens}")
    return f"prompt {list(PROMPT)}, stop {list(PROMPT)}: " + "; ".join(rows)


def law_holds() -> tuple[bool, str]:
    return findings.law_holds(engine_finish, CASE, demonstration())


if __name__ == "__main__":
    findings.main(law_holds)
