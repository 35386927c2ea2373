"""Finding: transformers' assisted generation hides prompt tokens equal to pad_token_id
from the assistant, even when the caller passes an all-ones attention_mask.

Law broken: engine_self_draft (harness/laws/engine_self_draft.py). Found by `python -m
harness check --engine transformers --with-known` (adapter setting pad_token_id=0):

  python -m harness repro engine_self_draft --device cpu --config '{"batch_size": 1,
  "engine": "transformers", "max_new_tokens": 2, "max_prompt_len": 8, "n": 0,
  "seed": 16964, "settings": {"dtype": "float32", "model_seed": 0, "pad_token_id": 0},
  "spec": {"draft_length": null, "drafter": "self", "extra": [["schedule", "constant"],
  ["confidence", 0.0], ["ngram", 1]], "topk": 1}, "temperature": 0.0, "top_k": 0,
  "top_p": 1.0}'

What happens (transformers 5.24, generation/utils.py): generate() drops an attention_mask
that is all ones from model_kwargs ("we will never have padding"). The assistant's
candidate generator copies model_kwargs, so the assistant's own generate() call sees no mask
and infers one from the pad id (`_prepare_attention_mask_for_generation`: positions equal to
pad_token_id are masked when the pad id occurs in the input and differs from eos). Real
prompt tokens that happen to equal the pad id (pad = <unk> = 0 in many checkpoints, or any id
a chat template also uses) vanish from the drafter's context. Verification still corrects
every token, so the output is right; acceptance silently drops: with the target drafting for
itself, drafts are rejected at positions that are not ties (below: 10 target forwards instead
of 3 for the same 12 tokens).

Verdict: bug (acceptance-rate loss, outputs unaffected). Upstream: no issue found for this
exact symptom; the mask drop is huggingface/transformers PR #48803 "generate: drop an
all-ones attention mask from model_kwargs" (and #47951), whose follow-up #49019 "Fix assisted
decoding for VLM due to dropping attn mask" repaired another consequence of it for
assisted decoding.

Reproduced on transformers 5.24.0; on 5.17.0 the law holds on this case (CPU).

Run: `python docs/findings/transformers_assistant_masks_pad_ids.py` (prints the verdict;
exit 1 while the bug is present). Regression: tests/test_findings_transformers.py
(xfail strict: it fails, and so flags this file and the adapter's KNOWN entry for removal,
once transformers is fixed).
"""
from __future__ import annotations

import json

from harness.runners import findings
from harness.adapters.protocol import Request, Spec
from harness.adapters.transformers_assisted import TransformersAdapter
from harness.laws import engine_self_draft

CASE = json.loads("""{"batch_size": 1, "engine": "transformers", "max_new_tokens": 2,
"max_prompt_len": 8, "n": 0, "seed": 16964, "settings": {"dtype": "float32", "model_seed": 0,
"pad_token_id": 0}, "spec": {"draft_length": null, "drafter": "self", "extra": [["schedule",
"constant"], ["confidence", 0.0], ["ngram", 1]], "topk": 1}, "temperature": 0.0,
"top_k": 0, "top_p": 1.0}""")
PROMPT = (261, 122, 0, 19, 5, 0, 33)  # contains token 0 twice
SPEC = Spec("self", 4, 1, (("schedule", "constant"), ("confidence", 0.0)))


def rounds(pad_token_id):
    adapter = TransformersAdapter("cpu", "float32", 0, pad_token_id=pad_token_id)
    out = adapter.generate([Request(PROMPT, 12)], SPEC)[0]
    return out.tokens, out.rounds


def law_holds() -> tuple[bool, str]:
    """The law on the case it failed on, and how much acceptance a prompt with two pad ids
    loses (12 tokens, the target drafting 4 at a time for itself)."""
    failure = findings.replay(engine_self_draft, CASE)
    tokens0, rounds0 = rounds(0)
    tokens_none, rounds_none = rounds(None)
    rejected = [r for r in rounds0 if r.accepted < r.drafted]
    what = (f"{failure or 'engine_self_draft passes on the recorded case'}\n  pad_token_id=0: "
            f"{len(rounds0)} rounds, {len(rejected)} rejecting self-drafts; pad_token_id=None: "
            f"{len(rounds_none)} rounds; same tokens: {tokens0 == tokens_none}")
    return not rejected and failure is None, what


if __name__ == "__main__":
    findings.main(law_holds)
