"""One EAGLE autoregressive draft step, from the contract alone (kernel_protocol.py,
DRAFT_STEP_SLOTS): where each request's next draft token goes in its paged KV, as plain
arithmetic over plain lists, no engine's code.

A request whose last verified token sits at position q0 drafts its first token from it, then
each further draft step s = 1, 2, ... feeds the token drafted before it at position q0 + s.
That token's KV goes to the slot of position q0 + s in the request's own block table. A
position at or past the model's length has no slot: the step writes no KV there (the
padding slot), whatever position the kernel hands RoPE for it."""
from __future__ import annotations

PAD_SLOT = -1  # vLLM's PADDING_SLOT_ID: the attention backend skips the write


def slot(block_table_row: list[int], position: int, block_size: int) -> int:
    return block_table_row[position // block_size] * block_size + position % block_size


def draft_steps(start: list[int], block_table: list[list[int]], block_size: int,
                max_model_len: int, steps: int) -> list[dict]:
    """Per step s = 1 .. steps: each request's true position q0 + s, its slot (PAD_SLOT past
    the model's length) and whether it is past the end."""
    out = []
    for s in range(1, steps + 1):
        pos = [q + s for q in start]
        past = [p >= max_model_len for p in pos]
        out.append({"positions": pos, "past_end": past,
                    "slots": [PAD_SLOT if e else slot(row, p, block_size)
                              for p, e, row in zip(pos, past, block_table)]})
    return out
