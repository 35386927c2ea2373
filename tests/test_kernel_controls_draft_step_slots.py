"""Negative controls of kernel_draft_step_slots: an adapter that runs the drafter's steps as
plain loops (written from the contract's words, not from the reference) passes the law; the
same loops with one mistake a real step makes are rejected."""
from __future__ import annotations

import torch

from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.laws.kernel_draft_step_slots import LAW
from harness.runners.kernel_suite import first_failure

FOUND = 60  # examples a control may take to be caught


class LoopDraftSteps:
    """Each step: position + 1, its block's slot, seq_len + 1; past the model's length no
    write (-1) and position 0 for RoPE; padding rows -1. It keeps the true position apart
    from the one it hands RoPE."""
    name = engine = "loop-draft-steps"
    components = frozenset({Component.DRAFT_STEP_SLOTS})
    why_not = {c: "a control of one component" for c in Component
               if c is not Component.DRAFT_STEP_SLOTS}
    accepts = dict(DEFAULT_ACCEPTS)
    block_lag = 0           # controls: the block looked up this many positions back
    writes_padding = True   # controls: False leaves the graph-padding rows as they were
    steps_from_clamped = False  # controls: the next step starts from the position RoPE got

    def version(self) -> str:
        return "0"

    def draft_step_slots(self, positions, block_table, seq_lens, *, block_size,
                         max_model_len, padded_bs, steps):
        true = positions.tolist()
        lens = seq_lens.tolist()
        table = block_table.tolist()
        slots_buf = [0] * padded_bs
        out = {"positions": [], "slot_mapping": [], "seq_lens": []}
        for _ in range(steps):
            rope = []
            for b in range(len(true)):
                q = true[b] + 1
                if q >= max_model_len:
                    slots_buf[b], lens[b] = -1, 1
                    rope.append(0)
                else:
                    block = max(0, q - self.block_lag) // block_size
                    slots_buf[b] = table[b][block] * block_size + q % block_size
                    lens[b] = min(lens[b] + 1, max_model_len)
                    rope.append(q)
                true[b] = rope[b] if self.steps_from_clamped else q
            if self.writes_padding:
                slots_buf[len(true):] = [-1] * (padded_bs - len(true))
            out["positions"].append(torch.tensor(rope))
            out["slot_mapping"].append(torch.tensor(slots_buf))
            out["seq_lens"].append(torch.tensor(lens))
        return out


class BlockOfThePreviousPosition(LoopDraftSteps):
    block_lag = 1


class UnwrittenGraphPadding(LoopDraftSteps):
    writes_padding = False


class SteppingFromTheClampedPosition(LoopDraftSteps):
    steps_from_clamped = True


def test_the_loop_steps_pass():
    assert first_failure(LAW.name, LoopDraftSteps(), FOUND) is None


def test_block_of_the_previous_position_is_rejected():
    exc = first_failure(LAW.name, BlockOfThePreviousPosition(), FOUND)
    assert exc is not None and exc.check == "slot", exc


def test_unwritten_graph_padding_is_rejected():
    exc = first_failure(LAW.name, UnwrittenGraphPadding(), FOUND)
    assert exc is not None and exc.check == "padding", exc


def test_stepping_from_the_clamped_position_is_rejected():
    exc = first_failure(LAW.name, SteppingFromTheClampedPosition(), FOUND)
    assert exc is not None and exc.check == "past_end_slot", exc
