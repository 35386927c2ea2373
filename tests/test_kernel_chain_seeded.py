"""Negative controls of kernel_chain_seeded (harness/laws/kernel_chain_seeded.py): specdec's
chain sampler behind the kernel-adapter door, made per-request seeded (each row sampled
alone from its own seed, as vLLM's generator per request samples it), then with one mistake
each: a row's draws taken from its batch position rather than its seed, and draws from a
stream the seed does not reset. Both are caught; the right adapter passes the same draws."""
from __future__ import annotations

import kernels._triton_env  # noqa: F401,I001  (before triton)

import itertools

import torch

from harness.adapters.specdec_kernels import SpecdecKernels
from harness.runners.kernel_suite import first_failure
from harness.strategies.runs import default_device

DEVICE = default_device()
FOUND = 20


class RowSeeded(SpecdecKernels):
    """Each row sampled alone, from its own seed."""
    accepts = {**SpecdecKernels.accepts, "row_seeds": True}

    def row_seed(self, b, seed, row_seeds):
        return int(row_seeds[b]) if row_seeds is not None else seed + b

    def chain_sampling(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant, row_seeds=None):
        rows = []
        for b in range(draft_ids.shape[0]):
            one = slice(b, b + 1)
            rows.append(SpecdecKernels.chain_sampling(
                self, draft_ids[one], num_drafts=num_drafts[one],
                draft_probs=None if draft_probs is None else draft_probs[one],
                target_probs=target_probs[one], greedy=greedy[one],
                seed=self.row_seed(b, seed, row_seeds), variant=variant))
        return torch.cat(rows)


class SeededByPosition(RowSeeded):
    def row_seed(self, b, seed, row_seeds):
        return seed + b


class UnseededStream(RowSeeded):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = itertools.count()

    def row_seed(self, b, seed, row_seeds):
        return next(self.calls)


def test_the_right_adapter_passes():
    assert first_failure("kernel_chain_seeded", RowSeeded(DEVICE), FOUND) is None


def test_a_row_seeded_by_its_position_is_caught():
    exc = first_failure("kernel_chain_seeded", SeededByPosition(DEVICE), FOUND)
    assert exc is not None and exc.check == "neighbours", exc


def test_an_unseeded_draw_is_caught():
    exc = first_failure("kernel_chain_seeded", UnseededStream(DEVICE), FOUND)
    assert exc is not None and exc.check == "rerun", exc
