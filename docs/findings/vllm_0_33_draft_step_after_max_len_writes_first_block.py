"""Finding: vLLM's EAGLE drafter, once a request's draft position passes max_model_len,
starts the next draft step from the clamped position 0, so that step writes the draft
token's KV into position 1 of the request's first block (a real slot: with prefix caching
a block other requests share, and that stays cached after the request ends) instead of
writing nothing (found by the kernel_draft_step_slots law; unfixed in 0.33.0).

Law broken: kernel_draft_step_slots (harness/laws/kernel_draft_step_slots.py), check
past_end_slot:

  python docs/findings/vllm_0_33_draft_step_after_max_len_writes_first_block.py 0.33.0

  step 2, request 1 at position 17: slot 29, expected -1 (writes KV past the model's
  length); start positions [14, 15], block size 4, max_model_len 16, ...; block table
  [[11, 2, 10, 4], [7, 6, 12, 3]]

Request 1's last verified token is at position 15 = max_model_len - 1. Draft step 1 (its
position 16) is past the end: the kernel writes the padding slot and hands RoPE position
0. Step 2 starts from that 0, computes position 1, and writes slot 7 * 4 + 1 = 29, offset
1 of block 7, the request's first block.

What happens (v1/spec_decode/utils.py, eagle_step_slot_mapping_metadata_kernel, called by
eagle.py / llm_base_proposer.py's propose loop): the kernel reads the step's input
position, adds one, and where that reaches max_model_len writes 0 into
out_clamped_positions (the proposer's self.positions[:batch_size]) and the padding slot.
The caller then passes self.positions[:batch_size] to the next step as its input, so the
request's true draft position is lost: position 1 is "in range", and its slot is looked up
in block 0 (the step after it position 2, and so on). Before the fused kernel (PR #33503,
first in 0.18.0) the loop incremented the unclamped `positions` and clamped a copy, so
every later step stayed past the end and wrote the padding slot (read in 0.14.1's eagle.py).

Where it reaches production: V1 EAGLE / EAGLE-3 / draft-model speculation (the
autoregressive drafter, num_speculative_tokens >= 3), any request whose draft steps cross
max_model_len with a step left after (a request that generates up to the context limit,
in its last round). The write lands in the draft layers' KV cache (the drafter's own
layers; the target's KV is untouched), at position 1 of the request's first block: with
prefix caching on (V1's default) that block is shared by every request with the same
prompt start and stays in the cache after the request finishes, so later requests' drafter
attends to a corrupted key/value at position 1: lower acceptance, not wrong output (the
target verifies every token).

Bisected over every release on this finding's own case (`python -m harness findings`,
bench/results/findings-vllm-cpu-2026-11-28/REPORT.md): reproduces on every release from 0.18.0 to 0.33.0, n/a before.

Verdict: bug, unfixed in the newest release. The kernel is in every release from 0.18.0 to
0.33.0 (the sweep's source cache: v1/spec_decode/utils.py of each release); reproduced on
0.18.0, 0.19.0, 0.25.0, 0.29.0 and 0.33.0; 0.17.1 and earlier have no such function (n/a).
Standalone with the report text: docs/findings/standalone/vllm_draft_step_after_max_len.py.

Run: `python docs/findings/vllm_0_33_draft_step_after_max_len_writes_first_block.py
[RELEASE]` (default 0.33.0; exit 1 while it reproduces). Regression:
tests/test_findings_kernels.py.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_draft_step_slots", "vllm-kernels", "0.33.0"
SEED = 7
KNOBS = {"input_class": "model_end", "bs": 2, "block_size": 4, "max_model_len": 16,
         "steps": 3, "padding": 0}
REPRODUCED_ON = ("0.18.0", "0.19.0", "0.25.0", "0.29.0", "0.33.0")
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)
