"""The eagle_draft law (harness/laws/eagle_draft.py): it holds on chains and trees, eager and
captured, and it is not vacuous: planted mistakes in the EAGLE head's inputs that keep the
output tokens lossless (a branch continuing its own hidden state instead of its parent's;
a carried hidden state not refreshed after the draft extend) each fail it."""
from __future__ import annotations

import pytest

import specdec.spec.draft_decode_phase as draft_decode_phase
from harness.base.failure import OracleFailure
from harness.laws.eagle_draft import prop_eagle_draft
from harness.strategies.configs import RunConfig
from harness.strategies.runs import default_device
from specdec.memory.req_pool import DraftStatePool

DEVICE = default_device()
TREE = RunConfig(topk=2, num_steps=3, ndt=6, page_size=4, draft="eagle", batch_size=3,
                 max_prompt_len=12, max_new_tokens=10, seed=5)
CONFIGS = [TREE, RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", batch_size=2,
                           max_prompt_len=12, max_new_tokens=10, seed=6, cuda_graph=True),
           RunConfig(topk=4, num_steps=4, ndt=8, page_size=16, draft="eagle", batch_size=4,
                     max_prompt_len=20, max_new_tokens=12, seed=7, overlap=True, cuda_graph=True)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.topk}-{c.num_steps}-{c.ndt}")
def test_law_holds(cfg):
    prop_eagle_draft(cfg, DEVICE)


def _not_reparented(monkeypatch):
    right = draft_decode_phase.select_top_k_tokens

    def wrong(i, *, topk_p, topk_index, hidden_states, scores, topk):
        ids, hidden, scores, info = right(i, topk_p=topk_p, topk_index=topk_index,
                                          hidden_states=hidden_states, scores=scores, topk=topk)
        return ids, (hidden if i == 0 else hidden_states), scores, info
    monkeypatch.setattr(draft_decode_phase, "select_top_k_tokens", wrong)


def _carried_hidden_stale(monkeypatch):
    right = DraftStatePool.store

    def wrong(self, rows, hidden, *rest):
        kept = self.hidden[rows].clone()
        right(self, rows, hidden, *rest)
        self.hidden[rows] = kept
    monkeypatch.setattr(DraftStatePool, "store", wrong)


@pytest.mark.parametrize("plant", [_not_reparented, _carried_hidden_stale],
                         ids=["hidden_not_reparented", "carried_hidden_stale"])
def test_planted_mistakes_fail(monkeypatch, plant):
    plant(monkeypatch)
    with pytest.raises(OracleFailure) as info:
        prop_eagle_draft(TREE, DEVICE)
    assert info.value.check == "eagle_draft"
