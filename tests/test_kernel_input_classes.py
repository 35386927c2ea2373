"""Each input class the slot, tree and draft-input laws draw on purpose (kernel_kv_slots'
CLASSES, kernel_draft_kv_indices' CLASSES, kernel_draft_inputs' CLASSES and kernel_inputs'
TREE_CLASSES, counted as corners by `harness check`) has a negative control: an adapter with
one mistake of the kind that lives only in that class, which the law must reject within a
few examples drawn in the class, while the unplanted adapter passes the same draws. (The
chain-sampling classes have theirs in test_chain_input_classes.py; kernel_verify_commit's and
kernel_draft_step_slots' in their own control files.)"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401,I001  (before triton)

import pytest
import torch

from harness.adapters.specdec_kernels import SpecdecKernels
from harness.laws import kernel_draft_inputs, kernel_draft_kv_indices, kernel_kv_slots
from harness.runners.kernel_suite import first_failure
from harness.strategies import kernel_inputs
from harness.strategies.runs import default_device
from tests.test_kernel_controls_draft_inputs import IgnoresDiscard, LoopDraftInputs
from tests.test_kernel_controls_draft_kv_indices import LoopKernels

DEVICE = default_device()
FOUND = 40  # examples of the class a control may take to be caught


# kernel_tree_build (kernel_inputs.TREE_CLASSES)
class ChainLeafLinkedToRoot(SpecdecKernels):
    """A topk-1 fast path whose link buffers start at 0, not -1: the chain's last node has
    next_token 0 (the root) instead of none."""

    def tree_build(self, parent_list, *, topk, ndt, **kw):
        out = super().tree_build(parent_list, topk=topk, ndt=ndt, **kw)
        if topk == 1:
            nxt = out["next_token"].clone()
            nxt[:, ndt - 1] = 0
            out = {**out, "next_token": nxt}
        return out


class OneStepSiblingsUnlinked(SpecdecKernels):
    """With one draft step the candidates are taken as a chain's: no sibling links."""

    def tree_build(self, parent_list, *, spec_steps, **kw):
        out = super().tree_build(parent_list, spec_steps=spec_steps, **kw)
        if spec_steps == 1:
            out = {**out, "next_sibling": torch.full_like(out["next_sibling"], -1)}
        return out


class FullSelectionLastNodeLost(SpecdecKernels):
    """A selection that keeps every candidate overruns a buffer sized one short: the last
    node's position is left at the root's."""

    def tree_build(self, parent_list, *, topk, spec_steps, ndt, seq_lens, **kw):
        out = super().tree_build(parent_list, topk=topk, spec_steps=spec_steps, ndt=ndt,
                                 seq_lens=seq_lens, **kw)
        if ndt - 1 == kernel_inputs.num_candidates(topk, spec_steps):
            pos = out["positions"].clone().reshape(len(seq_lens), ndt)
            pos[:, -1] = pos[:, 0]
            out = {**out, "positions": pos.reshape(out["positions"].shape)}
        return out


class SingleRequestIgnoresSeqLens(SpecdecKernels):
    """A batch of one built without its prefix: positions from 0."""

    def tree_build(self, parent_list, *, seq_lens, **kw):
        out = super().tree_build(parent_list, seq_lens=seq_lens, **kw)
        if len(seq_lens) == 1:
            out = {**out, "positions": out["positions"] - seq_lens[0].to(out["positions"])}
        return out


class OneTokenPrefixAsEmpty(SpecdecKernels):
    """A one-token prefix taken as empty: that request's tree positions start one early."""

    def tree_build(self, parent_list, *, seq_lens, ndt, **kw):
        out = super().tree_build(parent_list, seq_lens=seq_lens, ndt=ndt, **kw)
        pos = out["positions"].clone().reshape(len(seq_lens), ndt)
        pos[seq_lens == 1] -= 1
        return {**out, "positions": pos.reshape(out["positions"].shape)}


TREE = {"chain": ChainLeafLinkedToRoot, "single_step": OneStepSiblingsUnlinked,
        "all_candidates": FullSelectionLastNodeLost, "batch_one": SingleRequestIgnoresSeqLens,
        "one_token_prefix": OneTokenPrefixAsEmpty}


# kernel_kv_slots (its CLASSES)
class AlignedPrefixGivenATail(SpecdecKernels):
    """A prefix that ends on a page taken as one with a partial page (last = page, not 0):
    the draft slots laid out as for the length before it."""

    def draft_cache_locs(self, req_to_token, *, seq_lens, page_size, **kw):
        if page_size > 1 and bool((seq_lens % page_size == 0).all()):
            seq_lens = seq_lens - 1
        return super().draft_cache_locs(req_to_token, seq_lens=seq_lens, page_size=page_size,
                                        **kw)


class OneSlotTailNotCopied(SpecdecKernels):
    """The copy loop runs `last - 1` times: a one-slot tail is never copied into the later
    branches' first pages."""

    def draft_cache_locs(self, req_to_token, *, seq_lens, page_size, req_pool_indices, **kw):
        out = super().draft_cache_locs(req_to_token, seq_lens=seq_lens, page_size=page_size,
                                       req_pool_indices=req_pool_indices, **kw)
        tails = {int(req_to_token[r, s - 1]) for r, s in zip(req_pool_indices.tolist(),
                                                                seq_lens.tolist())
                 if s % page_size == 1}
        return {**out, "copies": [(a, b) for a, b in out["copies"] if a not in tails]}


class SingleRequestReadsRowZero(SpecdecKernels):
    """A batch of one reads req_to_token row 0, not its pool row."""

    def draft_cache_locs(self, req_to_token, *, req_pool_indices, **kw):
        if len(req_pool_indices) == 1:
            req_pool_indices = torch.zeros_like(req_pool_indices)
        return super().draft_cache_locs(req_to_token, req_pool_indices=req_pool_indices, **kw)

    def req_to_token_write(self, req_to_token, req_pool_indices, start, end, out_cache_loc):
        if len(req_pool_indices) == 1:
            req_pool_indices = torch.zeros_like(req_pool_indices)
        return super().req_to_token_write(req_to_token, req_pool_indices, start, end,
                                          out_cache_loc)


class EmptyRangeWritesOne(SpecdecKernels):
    """Offsets into out_cache_loc summed with max(end - start, 1): an empty range writes one
    slot, and every later request reads its slots one late."""

    def req_to_token_write(self, req_to_token, req_pool_indices, start, end, out_cache_loc):
        width = req_to_token.shape[1]
        loc, at, ends = [], 0, []
        for s, e in zip(start.tolist(), end.tolist()):
            n = max(e - s, 1) if s < width else e - s
            loc += out_cache_loc[at:at + n].tolist() + [0] * (n - len(out_cache_loc[at:at + n]))
            at += n
            ends.append(s + n)
        return super().req_to_token_write(req_to_token, req_pool_indices, start,
                                          torch.tensor(ends), torch.tensor(loc))


class ChainDraftAfterTheBonus(SpecdecKernels):
    """A topk-1 path that starts the drafts one past seq_len (as if the bonus took a slot)."""

    def draft_cache_locs(self, req_to_token, *, seq_lens, topk, **kw):
        return super().draft_cache_locs(req_to_token, seq_lens=seq_lens + (topk == 1),
                                        topk=topk, **kw)


KV = {"page_aligned": AlignedPrefixGivenATail, "page_plus_one": OneSlotTailNotCopied,
      "batch_one": SingleRequestReadsRowZero, "empty_ranges": EmptyRangeWritesOne,
      "chain": ChainDraftAfterTheBonus}


# kernel_draft_kv_indices (its CLASSES), on the contract's own loop
class OneTokenPrefixSkipped(LoopKernels):
    """A one-token prefix is not read (a copy loop from position 1)."""

    def draft_decode_kv_indices(self, req_to_token, req_pool_indices, seq_lens, **kw):
        self.prefix_short = 1 if bool((seq_lens == 1).any()) else 0
        return super().draft_decode_kv_indices(req_to_token, req_pool_indices, seq_lens, **kw)


class AlignedBranchesOnePageLate(LoopKernels):
    """With no partial page, branches k >= 1 still skip a page for the tail they don't have."""

    def _branch_start(self, n, k, topk, steps, page):
        start = super()._branch_start(n, k, topk, steps, page)
        return start + page if page > 1 and k and n % page == 0 else start


class SingleRequestRowZero(LoopKernels):
    """A batch of one reads req_to_token row 0, not its pool row."""

    def draft_decode_kv_indices(self, req_to_token, req_pool_indices, seq_lens, **kw):
        if len(req_pool_indices) == 1:
            req_pool_indices = torch.zeros_like(req_pool_indices)
        return super().draft_decode_kv_indices(req_to_token, req_pool_indices, seq_lens, **kw)


class ChainNewestSlotMissing(LoopKernels):
    """A topk-1 path whose mask stops one short: the step's own slot is not read."""

    def draft_decode_kv_indices(self, req_to_token, req_pool_indices, seq_lens, topk, **kw):
        self.drafts_short = int(topk == 1)
        return super().draft_decode_kv_indices(req_to_token, req_pool_indices, seq_lens,
                                               topk=topk, **kw)


class OneStepReadsNoDraft(LoopKernels):
    """With one draft step, the step reads the prefix only (its loop over steps is empty)."""

    def draft_decode_kv_indices(self, req_to_token, req_pool_indices, seq_lens, *, num_steps,
                                **kw):
        self.drafts_short = int(num_steps == 1)
        return super().draft_decode_kv_indices(req_to_token, req_pool_indices, seq_lens,
                                               num_steps=num_steps, **kw)


KV_INDICES = {"seq_len_one": OneTokenPrefixSkipped, "page_aligned": AlignedBranchesOnePageLate,
              "batch_one": SingleRequestRowZero, "chain": ChainNewestSlotMissing,
              "single_step": OneStepReadsNoDraft}


# kernel_draft_inputs (its CLASSES), on the contract's own loop
class _Extend(LoopDraftInputs):
    def draft_extend_inputs(self, seq_lens, num_drafts, num_accepted, layout):
        out = super().draft_extend_inputs(seq_lens, num_drafts, num_accepted, layout)
        return self.planted(out, seq_lens, num_drafts, num_accepted)


class NoneAcceptedLastIndexEarly(_Extend):
    """With every draft rejected the last index is taken one before the bonus's."""

    def planted(self, out, seq_lens, num_drafts, num_accepted):
        if bool((num_accepted == 0).all()):
            out["last_token_indices"] = out["last_token_indices"] - 1
        return out


class AllAcceptedPositionsShifted(_Extend):
    """With every draft accepted, positions counted from the bonus (one late)."""

    def planted(self, out, seq_lens, num_drafts, num_accepted):
        if bool((num_accepted == num_drafts).all()) and int(num_drafts.max()) > 0:
            out["positions"] = out["positions"] + 1
        return out


class NoDraftsLastIndexPastRow(_Extend):
    """A batch that drafted nothing samples past its one verified token."""

    def planted(self, out, seq_lens, num_drafts, num_accepted):
        if int(num_drafts.max()) == 0:
            out["last_token_indices"] = out["last_token_indices"] + 1
        return out


class SingleRequestPositionsFromZero(_Extend):
    """A batch of one positioned without its prefix."""

    def planted(self, out, seq_lens, num_drafts, num_accepted):
        if len(seq_lens) == 1:
            out["positions"] = out["positions"] - int(seq_lens[0])
        return out


DRAFT_INPUTS = {"none_accepted": NoneAcceptedLastIndexEarly,
                "all_accepted": AllAcceptedPositionsShifted,
                "no_drafts": NoDraftsLastIndexPastRow,
                "batch_one": SingleRequestPositionsFromZero, "discarded": IgnoresDiscard}

LAWS = {  # law -> (where its classes live, the attribute, controls, the unplanted adapter)
    "kernel_tree_build": (kernel_inputs, "TREE_CLASSES", TREE, lambda: SpecdecKernels(DEVICE)),
    "kernel_kv_slots": (kernel_kv_slots, "CLASSES", KV, lambda: SpecdecKernels(DEVICE)),
    "kernel_draft_kv_indices": (kernel_draft_kv_indices, "CLASSES", KV_INDICES, LoopKernels),
    "kernel_draft_inputs": (kernel_draft_inputs, "CLASSES", DRAFT_INPUTS, LoopDraftInputs),
}
CASES = [(law, cls) for law, (_, _, controls, _) in LAWS.items() for cls in sorted(controls)]


def _build(planted):
    return planted(DEVICE) if issubclass(planted, SpecdecKernels) else planted()


@pytest.mark.parametrize("law", sorted(LAWS))
def test_every_class_has_a_control(law):
    home, attr, controls, _ = LAWS[law]
    assert set(controls) == set(getattr(home, attr)) - {"plain"}


@pytest.mark.parametrize("law,cls", CASES)
def test_a_mistake_of_the_class_is_caught_in_it(law, cls, monkeypatch):
    home, attr, controls, right = LAWS[law]
    monkeypatch.setattr(home, attr, (cls,))
    planted = controls[cls]
    exc = first_failure(law, _build(planted), FOUND)
    assert exc is not None, f"{law}/{cls}: {planted.__name__} passed: {planted.__doc__}"
    assert first_failure(law, right(), FOUND) is None
