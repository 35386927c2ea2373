"""vLLM V1's EAGLE draft step slot mapping (DRAFT_STEP_SLOTS), called as
`SpecDecodeBaseProposer.propose` calls it (v1/spec_decode/llm_base_proposer.py, 0.18+:
`_update_positions_dependent_metadata`): `eagle_step_update_slot_mapping_and_metadata`
(v1/spec_decode/utils.py) once per draft step after the first.

As the caller passes them: the first step's positions are a fresh gather of the target's
(`self.positions[token_indices_to_sample]`), every later step's the proposer's own
`self.positions[:batch_size]`, the buffer the kernel wrote the clamped positions into;
`common_attn_metadata.seq_lens` (int32) updated in place; the block table the batch's rows
of the input batch's table (int32, max_model_len / block_size wide); the slot mapping
written into `_slot_mapping_buffer[:input_batch_size]` (int64, zeros when the proposer is
built), input_batch_size past the batch where a CUDA graph pads it. Before 0.18 the step is
torch inside `EagleProposer.propose`: no function to call."""
from __future__ import annotations

import importlib

import torch

FUNCTION = "eagle_step_update_slot_mapping_and_metadata"
HOME = "vllm.v1.spec_decode.utils"
WHY_NOT = ("before 0.18 the draft step's positions, seq_lens and slot mapping are computed "
           "in torch inside EagleProposer.propose (v1/spec_decode/eagle.py), no function")


def find():
    """The release's step function, or None."""
    try:
        return getattr(importlib.import_module(HOME), FUNCTION, None)
    except ImportError:
        return None


def draft_step_slots(fn, *, device: str, positions, block_table, seq_lens, block_size,
                     max_model_len, padded_bs, steps) -> dict:
    bs = positions.shape[0]
    positions_buf = torch.zeros(padded_bs, dtype=torch.int64, device=device)
    slot_buf = torch.zeros(padded_bs, dtype=torch.int64, device=device)
    table = block_table.to(torch.int32).to(device)
    lens = seq_lens.to(torch.int32).to(device)
    current = positions.to(torch.int64).to(device)  # the first step's: a fresh gather
    out = {"positions": [], "slot_mapping": [], "seq_lens": []}
    for _ in range(steps):
        fn(positions_1d=current, block_table_tensor=table, seq_lens=lens,
           block_size=block_size, max_model_len=max_model_len,
           out_clamped_positions=positions_buf[:bs], out_slot_mapping=slot_buf[:padded_bs],
           input_batch_size=padded_bs)
        current = positions_buf[:bs]  # what _update_positions_dependent_metadata returns
        out["positions"].append(current.cpu().clone())
        out["slot_mapping"].append(slot_buf[:padded_bs].cpu().clone())
        out["seq_lens"].append(lens.cpu().clone())
    return out
