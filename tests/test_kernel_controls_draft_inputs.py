"""Negative controls of kernel_draft_inputs: an adapter that implements the drafter's input
preparation by plain loops (written from the contract, not from the reference) passes the
law; the same adapter with one mistake a real kernel makes is rejected."""
from __future__ import annotations

import torch

from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.base.failure import OracleFailure
from harness.runners.kernel_suite import first_failure

LAW = "kernel_draft_inputs"
FOUND = 60  # examples a control may take to be caught


def failure(kernels, examples: int = FOUND) -> OracleFailure | None:
    return first_failure(LAW, kernels, examples)


class LoopDraftInputs:
    """Both components as one loop per request; `layout` picks where request b begins."""
    name = engine = "loop-draft-inputs"
    components = frozenset({Component.DRAFT_EXTEND_INPUTS, Component.DRAFT_NEXT_TOKEN})
    why_not: dict = {}
    accepts = {**DEFAULT_ACCEPTS, "ragged_drafts": True}
    shift = 0  # controls: added to every position

    def version(self) -> str:
        return "0"

    def last_index(self, begin: int, verified: int, previous: int) -> int:
        return begin + verified - 1

    def draft_extend_inputs(self, seq_lens, num_drafts, num_accepted, layout):
        total = int((num_drafts + 1).sum())
        positions = torch.full((total,), -7, dtype=torch.int64)
        source = torch.full((total,), -7, dtype=torch.int64)
        last = torch.zeros(len(seq_lens), dtype=torch.int64)
        verify_at = begin = previous = 0
        for b in range(len(seq_lens)):
            v = int(num_accepted[b]) + 1
            if layout == "padded":
                begin = verify_at
            for i in range(v):
                positions[begin + i] = int(seq_lens[b]) + i + self.shift
                source[begin + i] = verify_at + i
            last[b] = self.last_index(begin, v, previous)
            previous = int(last[b])
            verify_at += int(num_drafts[b]) + 1
            begin += v  # packed: the next request right after this one's verified tokens
        packed = layout == "packed"
        return {"positions": positions, "last_token_indices": last,
                "source_indices": source if packed else None}

    def draft_next_token(self, sampled, discard, backup, vocab_size):
        nxt, count = [], []
        for row, drop, bk in zip(sampled.tolist(), discard.tolist(), backup.tolist()):
            n = 0
            while n < len(row) and row[n] != -1 and not self.ignores(drop):
                n += 1
            nxt.append(row[n - 1] if n else bk)
            count.append(n)
        return {"next_token": torch.tensor(nxt), "valid_count": torch.tensor(count)}

    def ignores(self, drop: bool) -> bool:
        return drop


class PositionsOffByOne(LoopDraftInputs):
    components = frozenset({Component.DRAFT_EXTEND_INPUTS})
    shift = 1


class LastIndexOfPreviousRequest(LoopDraftInputs):
    """Request b samples at request b-1's last token (an off-by-one request offset)."""
    components = frozenset({Component.DRAFT_EXTEND_INPUTS})

    def last_index(self, begin, verified, previous):
        return previous if begin else begin + verified - 1


class IgnoresDiscard(LoopDraftInputs):
    """Discarded requests continue from their (garbage) sampled row."""
    components = frozenset({Component.DRAFT_NEXT_TOKEN})

    def ignores(self, drop: bool) -> bool:
        return False


def _caught(cls, checks) -> None:
    exc = failure(cls())
    assert exc is not None, f"{LAW} passed {cls.__name__}: {cls.__doc__}"
    assert exc.check in checks, str(exc)


def test_loop_adapter_passes():
    assert failure(LoopDraftInputs(), 80) is None


def test_positions_off_by_one_are_rejected():
    _caught(PositionsOffByOne, ("positions",))


def test_last_index_of_previous_request_is_rejected():
    _caught(LastIndexOfPreviousRequest, ("last_token_indices",))


def test_next_token_ignoring_discard_is_rejected():
    _caught(IgnoresDiscard, ("next_token", "valid_count"))
