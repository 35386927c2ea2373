"""Overlap scheduling (contract section 10): the device-side state that round i+1 derives
its inputs from, and a launched round whose results are still on their way to the host.

With `Engine(overlap=True)` the scheduler queues round i+1 before it reads round i's results.
What round i+1 needs from round i never goes through the host: every round writes each
request's committed length and pending (bonus) token into `RowState` (by request row), and
the next round gathers them there for the requests whose host copy lags. The synchronous
engine runs the same code (launch, then resolve the same round at once), with the host's
exact values, so the two modes differ only in when the host reads (and in the gather a round
skips when none of its host values lags: it would return them unchanged).
"""
from __future__ import annotations

import torch

PLACEHOLDER = -1  # a host input the device fills in: the value is still in flight


def lagging(host_inputs) -> tuple[bool, bool]:
    """Whether the seq list and the pending list of a round's host inputs (rows, seq,
    pending) hold a value the device must fill in: any negative one, as `RowState.inputs`'s
    gather reads them."""
    _, seq, pending = host_inputs
    return min(seq, default=0) < 0, min(pending, default=0) < 0


class UnresolvedRead(RuntimeError):
    """The host read a round's results before its event said they were there."""


class RowState:
    """Per request row, on the device: the committed target length and the pending bonus
    token after the last round that ran the row. Row 0 (padding) is never written.
    Index space: request-pool rows (a request's `row`, the rounds' req_pool_indices), never
    batch positions: `inputs` gathers a round's rows into batch order, `commit` scatters
    back."""

    def __init__(self, rows: int, device: torch.device) -> None:
        self.seq_lens = torch.zeros(rows, dtype=torch.int64, device=device)
        self.pending = torch.zeros(rows, dtype=torch.int64, device=device)

    def inputs(self, rows: torch.Tensor, host_seq: torch.Tensor, host_pending: torch.Tensor,
               gather: tuple[bool, bool] = (True, True)):
        """(seq_lens, pending) of a round: the host's value, or where the host passes
        PLACEHOLDER (its copy lags one round) the device's. Sync-free torch ops.

        `gather`: per list (seq, pending), whether the host's holds any PLACEHOLDER
        (`lagging` says, from the host's own lists). A list without one is the answer as it
        is, so its gather is skipped: the synchronous engine's step then queues six kernels
        fewer before its launch."""
        seq = (torch.where(host_seq >= 0, host_seq, self.seq_lens[rows]) if gather[0]
               else host_seq)
        pending = (torch.where(host_pending >= 0, host_pending, self.pending[rows])
                   if gather[1] else host_pending)
        return seq, pending

    def commit(self, rows: torch.Tensor, seq_lens: torch.Tensor, pending: torch.Tensor) -> None:
        self.seq_lens.index_copy_(0, rows, seq_lens)
        self.pending.index_copy_(0, rows, pending)


class InFlight:
    """A launched round: its requests and its results (int64 tensors, concatenated) copied
    without blocking into pinned host memory, with an event. `wait()` is the only way to the
    values. On CPU the work is done when queued; the stand-in models the event as a flag, and
    `peek()` before `wait()` raises, so the CPU tier keeps the GPU's ordering rules."""

    def __init__(self, kind: str, reqs: list, results: list[torch.Tensor]) -> None:
        self.kind, self.reqs = kind, list(reqs)
        flat = [t.reshape(-1).long() for t in results]
        # One result (a decode step's tokens) is copied from where it is: no cat kernel.
        flat = flat[0] if len(flat) == 1 else torch.cat(flat)
        if flat.device.type == "cuda":
            self._host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
            self._host.copy_(flat, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host, self._event = flat.clone(), None
        self._ready = False

    def peek(self) -> list[int]:
        if not self._ready:
            raise UnresolvedRead(f"the host read a {self.kind} round's results before its event")
        return self._host.tolist()

    def wait(self) -> list[int]:
        if self._event is not None:
            self._event.synchronize()
        self._ready = True
        return self.peek()
