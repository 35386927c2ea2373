"""Negative controls of kernel_tree_build's chain builder (CHAIN_TREE_BUILD): a builder written
as plain loops from the contract's words passes; the same builder with one mistake a real
one makes is rejected. The real one: SGLang 0.5.23's build_chain_tree (the pinned release,
where installed)."""
from __future__ import annotations

import pytest
import torch

from harness.adapters.foreign.install import installed
from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.laws.kernel_tree_build import CHAIN, LAW
from harness.runners.kernel_suite import first_failure
from harness.strategies.kernel_inputs import KernelCase

FOUND = 40  # examples a control may take to be caught


class LoopChainTree:
    name = engine = "loop-chain-tree"
    components = frozenset({Component.CHAIN_TREE_BUILD})
    why_not = {c: "a control of one component" for c in Component
               if c is not Component.CHAIN_TREE_BUILD}
    accepts = {**DEFAULT_ACCEPTS, "tree_mask_modes": (1,)}
    row_of_batch = False  # controls: req_to_token read at batch row b, not req_pool_indices[b]
    diagonal = True       # controls: False leaves a node out of its own mask row

    def version(self) -> str:
        return "0"

    def chain_tree_build(self, bonus, *, draft_tokens, seq_lens, req_to_token,
                         req_pool_indices, mrope):
        bs, w = draft_tokens.shape[0], draft_tokens.shape[1] + 1
        mask, pos, tokens, loc = [], [], [], []
        for b in range(bs):
            row = b if self.row_of_batch else int(req_pool_indices[b])
            for t in range(w):
                mask += [j < t or (j == t and self.diagonal) for j in range(w)]
                pos.append(int(seq_lens[b]) + t)
                tokens.append(int(bonus[b]) if t == 0 else int(draft_tokens[b, t - 1]))
                loc.append(int(req_to_token[row, int(seq_lens[b]) + t]))
        links = torch.tensor([[b * w + t for t in range(w)] for b in range(bs)])
        nxt = torch.tensor([[t + 1 if t + 1 < w else -1 for t in range(w)]] * bs)
        return {"mask": torch.tensor(mask), "positions": torch.tensor(pos),
                "retrieve_index": links, "next_token": nxt,
                "next_sibling": torch.full((bs, w), -1), "tokens": torch.tensor(tokens),
                "out_cache_loc": torch.tensor(loc),
                "mrope_positions": torch.tensor([pos] * 3) if mrope else None}


class SlotsOfTheBatchRow(LoopChainTree):
    row_of_batch = True


class MaskWithoutTheDiagonal(LoopChainTree):
    diagonal = False


def test_the_loop_builder_passes():
    assert first_failure(LAW.name, LoopChainTree(), FOUND) is None


def test_slots_of_the_batch_row_are_rejected():
    exc = first_failure(LAW.name, SlotsOfTheBatchRow(), FOUND)
    assert exc is not None and exc.check == "chain_out_cache_loc", exc


def test_mask_without_the_diagonal_is_rejected():
    exc = first_failure(LAW.name, MaskWithoutTheDiagonal(), FOUND)
    assert exc is not None and exc.check == "mask", exc


@pytest.mark.skipif(not installed("sglang", "0.5.23"), reason="sglang 0.5.23 is not installed: "
                    "python -m harness foreign install sglang==0.5.23")
def test_sglang_chain_builder_holds_on_a_chain():
    """The pinned release has the component, called through the law, M-RoPE and not."""
    from harness.adapters.registry import get_kernels
    kernels = get_kernels("sglang-kernels@0.5.23", "cpu")
    assert Component.CHAIN_TREE_BUILD in kernels.components
    for mrope in (False, True):
        case = KernelCase(law=LAW.name, engine=kernels.engine, seed=3, knobs={
            "component": CHAIN, "bs": 3, "topk": 1, "spec_steps": 4, "ndt": 5,
            "orphans": False, "seq_lens": [5, 1, 17, 9], "mode": 1, "mrope": mrope})
        assert LAW.check(kernels, case) == {"nodes": 15}
