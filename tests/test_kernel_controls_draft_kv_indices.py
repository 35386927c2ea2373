"""Negative controls of kernel_draft_kv_indices: an adapter that builds the draft decode KV
index lists with a plain loop of its own (not the reference's code) passes the law, and the
same loop made wrong the way a kernel's mask goes wrong by one is rejected."""
from __future__ import annotations

import torch

from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.base.failure import OracleFailure
from harness.laws.kernel_draft_kv_indices import LAW
from harness.runners.kernel_suite import first_failure

FOUND = 60  # examples a control may take to be caught


def failure(kernels, examples: int = FOUND) -> OracleFailure | None:
    return first_failure(LAW.name, kernels, examples)


class LoopKernels:
    """Draft decode KV indices from the contract's words, one entry at a time: a kernel that
    writes every entry of its row and leaves -1 where its mask stops short."""
    name = engine = "loop-kernels"
    components = frozenset({Component.DRAFT_DECODE_KV_INDICES})
    why_not = {c: "a control of one component" for c in Component
               if c is not Component.DRAFT_DECODE_KV_INDICES}
    accepts = dict(DEFAULT_ACCEPTS)
    prefix_short = 0   # prefix positions left unwritten at its end
    drafts_short = 0   # newest draft slots left unwritten

    def version(self) -> str:
        return "0"

    def _branch_start(self, n: int, k: int, topk: int, steps: int, page: int) -> int:
        if page == 1 or topk == 1:
            return n + k * steps
        last = n % page
        pages_per_branch = (last + steps + page - 1) // page
        return n - last + k * pages_per_branch * page + last

    def draft_decode_kv_indices(self, req_to_token, req_pool_indices, seq_lens, topk,
                                num_steps, page_size):
        rows, ptrs = [], []
        for i in range(num_steps):
            flat, ptr = [], [0]
            for r, n in zip(req_pool_indices.tolist(), seq_lens.tolist()):
                table = req_to_token[r].tolist()
                for k in range(topk):
                    start = self._branch_start(n, k, topk, num_steps, page_size)
                    prefix = table[:n - self.prefix_short] + [-1] * min(n, self.prefix_short)
                    drafts = table[start:start + i + 1]
                    cut = min(len(drafts), self.drafts_short)
                    flat += prefix + drafts[:len(drafts) - cut] + [-1] * cut
                    ptr.append(len(flat))
            rows.append(torch.tensor(flat, dtype=torch.int32))
            ptrs.append(ptr)
        return {"kv_indices": rows, "kv_indptr": torch.tensor(ptrs, dtype=torch.int32)}


class NewestSlotMissing(LoopKernels):
    drafts_short = 1  # the extend mask `offset < iters - 1`: step i's own slot never written


class PrefixOneShort(LoopKernels):
    prefix_short = 1  # the copy mask `offset < seq_len - 1`: the last prefix token dropped


def test_loop_kernels_pass():
    assert failure(LoopKernels(), examples=40) is None


def test_draft_part_missing_the_newest_slot_is_rejected():
    exc = failure(NewestSlotMissing())
    assert exc is not None and exc.check == "kv_indices", exc
    assert "draft step" in exc.detail, exc.detail


def test_prefix_read_one_short_is_rejected():
    exc = failure(PrefixOneShort())
    assert exc is not None and exc.check == "kv_indices", exc
    assert "prefix position" in exc.detail, exc.detail


def test_reference_worked_example():
    """Section 4's example: branch 1 of prefix 6 (page 4, topk 2, steps 3) reads the prefix,
    its tail at the original or the copy (positions 12, 13), then positions 14, 15."""
    from harness.references.layout import draft_branch_reads
    assert draft_branch_reads(list(range(100, 124)), prefix_len=6, topk=2, num_steps=3,
                              page_size=4, branch=1, step=1) == [
        (100,), (101,), (102,), (103,), (104, 112), (105, 113), (114,), (115,)]


def test_specdec_kernels_pass_the_same_draws():
    """The law is not written for the loop alone: specdec's page-table reads pass it too."""
    from harness.adapters.specdec_kernels import SpecdecKernels
    assert failure(SpecdecKernels(), examples=30) is None
