"""Standalone reproduction for the vLLM maintainers: after a request's EAGLE draft position
passes max_model_len, the next draft step restarts from the clamped position 0 and writes
the draft token's KV into position 1 of the request's first block. Needs torch, Triton and
vLLM's released package only (no specdec):

    PYTHONPATH=/path/to/site-packages-with-vllm python vllm_draft_step_after_max_len.py

On a CUDA GPU it runs compiled Triton; without one Triton's interpreter. Exit 1 while the
bug reproduces.

Report text:

  Title: [Spec Decode][EAGLE] Draft steps after a request passes max_model_len write KV
  into its first block (prefix-cached)

  SpecDecodeBaseProposer.propose (0.18+: eagle.py, later llm_base_proposer.py) runs
  eagle_step_update_slot_mapping_and_metadata once per draft step and passes the
  positions it wrote (self.positions[:batch_size]) to the next step. For a request whose
  position reaches max_model_len, the kernel writes the clamped position 0 there and the
  padding slot, as intended. But the next step reads that 0 as the request's position,
  computes 1 (< max_model_len), and writes a real slot: block_table[req, 0] * block_size
  + 1 (the step after it + 2, and so on). The draft tokens' KV overwrites the draft
  layers' KV at positions 1, 2, ... of the request's first block. With prefix caching that block is shared with other requests of the same
  prompt start and stays cached after this request finishes, so their drafter reads a
  corrupted key/value (acceptance drops; outputs stay correct since the target verifies).
  Before PR #33503 (read in 0.14.1) the loop incremented the unclamped positions and
  clamped a copy, so later steps kept writing PADDING_SLOT_ID. Reached with
  num_speculative_tokens >= 3 by any request that generates up to max_model_len.
  Expected: a step past max_model_len, and every later step of that request, writes
  PADDING_SLOT_ID (e.g. keep the unclamped position in a separate buffer, or treat an
  input position of 0 with seq_len 1 as past the end). Found by specdec's
  kernel_draft_step_slots law."""
from __future__ import annotations

import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
else:  # a vLLM folder without its compiled op library (a trimmed copy): no kernel here uses it
    import importlib
    import types
    try:
        importlib.import_module("vllm._C_stable_libtorch")
    except ImportError:
        sys.modules["vllm._C_stable_libtorch"] = types.ModuleType("vllm._C_stable_libtorch")

from vllm.v1.spec_decode.utils import (  # noqa: E402
    PADDING_SLOT_ID, eagle_step_update_slot_mapping_and_metadata)


def main() -> int:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    block_size, max_model_len = 4, 16
    # One request whose last verified token sits at position 15 = max_model_len - 1; its
    # four blocks are 7, 6, 12, 3 (block 7 holds positions 0-3).
    table = torch.tensor([[7, 6, 12, 3]], dtype=torch.int32, device=dev)
    seq_lens = torch.tensor([16], dtype=torch.int32, device=dev)
    proposer_positions = torch.zeros(1, dtype=torch.int64, device=dev)  # self.positions
    slot_buffer = torch.zeros(1, dtype=torch.int64, device=dev)         # _slot_mapping_buffer
    positions = torch.tensor([15], dtype=torch.int64, device=dev)  # the first step's gather
    writes = []
    for step in (1, 2, 3):  # num_speculative_tokens = 4: three steps after the first draft
        eagle_step_update_slot_mapping_and_metadata(
            positions_1d=positions, block_table_tensor=table, seq_lens=seq_lens,
            block_size=block_size, max_model_len=max_model_len,
            out_clamped_positions=proposer_positions[:1], out_slot_mapping=slot_buffer[:1],
            input_batch_size=1)
        positions = proposer_positions[:1]  # what the proposer passes to the next step
        writes.append(int(slot_buffer[0]))
        print(f"draft step {step}: true position {15 + step}, slot {writes[-1]}")
    bad = [s for s in writes if s != PADDING_SLOT_ID]
    print(f"steps past max_model_len ({max_model_len}) writing a real KV slot: {len(bad)} of "
          f"3 ({bad}; block 7 holds slots 28-31)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
