"""The EAGLE drafter's inputs after a verify round, from the contract alone (protocol.py
DRAFT_EXTEND_INPUTS / DRAFT_NEXT_TOKEN): plain loops over plain lists, no engine's code.

A verify round runs request b's pending token (position seq_lens[b]) and its num_drafts[b]
drafts; num_accepted[b] of the drafts are accepted, so v = num_accepted[b] + 1 tokens are
verified (the pending token and the accepted drafts: their hidden states, with the tokens
after them, feed the drafter's next forward)."""
from __future__ import annotations

# The form's token ids (harness/adapters/kernel_protocol.py, DRAFT_EXTEND_INPUTS): the verify
# batch's token at flat index j is VERIFY_ID + j, request b's next token NEXT_ID + b.
VERIFY_ID, NEXT_ID = 1000, 2000


def starts(widths: list[int]) -> list[int]:
    """Exclusive prefix sums: where each request's run begins in a flat batch."""
    out, at = [], 0
    for w in widths:
        out.append(at)
        at += w
    return out


def draft_extend(seq_lens: list[int], num_drafts: list[int], num_accepted: list[int],
                 layout: str) -> dict:
    """positions: flat index -> position for the verified tokens only (padded layouts leave
    the rejected drafts' entries undefined, so they are absent); last_token_indices: each
    request's last verified token; source_indices (packed): flat index -> verify-batch index."""
    verify_start = starts([n + 1 for n in num_drafts])
    verified = [a + 1 for a in num_accepted]
    start = verify_start if layout == "padded" else starts(verified)
    positions, source = {}, {}
    for b, (s, v) in enumerate(zip(seq_lens, verified)):
        for i in range(v):
            positions[start[b] + i] = s + i
            source[start[b] + i] = verify_start[b] + i
    last = [start[b] + v - 1 for b, v in enumerate(verified)]
    # The drafter's input ids: the verified tokens shifted by one (each position takes the
    # token after it), the request's next token last (VERIFY_ID + flat verify index,
    # NEXT_ID + request: the ids the form hands the engine).
    input_ids = {}
    for b, v in enumerate(verified):
        for i in range(v - 1):
            input_ids[start[b] + i] = VERIFY_ID + verify_start[b] + i + 1
        input_ids[last[b]] = NEXT_ID + b
    total = sum(num_drafts) + len(num_drafts) if layout == "padded" else sum(verified)
    return {"positions": positions, "last_token_indices": last,
            "source_indices": source if layout == "packed" else None,
            "input_ids": input_ids,
            "num_rejected": [n - a for n, a in zip(num_drafts, num_accepted)],
            "query_start_loc": start + [total],
            # the drafter attends to what the verify round wrote, rejected drafts included
            # (a padded layout keeps their slots; the next round overwrites them)
            "seq_lens": [s + n + 1 for s, n in zip(seq_lens, num_drafts)]
            if layout == "padded" else [s + v for s, v in zip(seq_lens, verified)],
            "total": total}


def next_token(sampled: list[list[int]], discard: list[bool], backup: list[int]) -> dict:
    """The token the drafter continues from: a kept row's last emitted token (tokens end at
    the first -1), else the backup token; valid_count counts the emitted tokens (0 for a
    discarded request)."""
    tokens, counts = [], []
    for row, drop, bk in zip(sampled, discard, backup):
        emitted = [] if drop else row[:row.index(-1)] if -1 in row else list(row)
        tokens.append(emitted[-1] if emitted else bk)
        counts.append(len(emitted))
    return {"next_token": tokens, "valid_count": counts}
