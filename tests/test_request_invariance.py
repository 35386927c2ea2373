"""Negative controls of request_invariance: three realistic mistakes, each planted by
monkeypatching, each changing a seeded request's tokens only when the batch around it changes
(the family the gate once passed green on 2 H100s). Each fixed example passes on the unbroken
engine, so the failure is the mistake's. `bench/invariance_controls.py` measures how often the
law's default-profile run catches each one."""
from __future__ import annotations

import pytest
import torch

import specdec.rounds as rounds
import specdec.spec.draft as draft
from harness.base.failure import OracleFailure
from harness.laws.request_invariance import InvarianceConfig, prop_request_invariance
from harness.strategies.runs import default_device
from specdec.scheduler import Scheduler

DEVICE = default_device()


def offsets_by_subset_position(monkeypatch) -> None:
    """Overlap: each sampled row's coin candidate picked by its place among the sampled
    rows, not its batch position (`offsets[:ns]` for `offsets[rows]`): right while the sampled
    rows are a prefix of the batch or every row lags alike."""
    right = rounds.batch_sampling

    def wrong(reqs, *, offsets=None, **kw):
        idx = [i for i, r in enumerate(reqs) if not r.sampling.greedy]
        if offsets is not None and idx:
            moved = offsets.clone()
            moved[torch.tensor(idx, device=offsets.device)] = offsets[:len(idx)]
            offsets = moved
        return right(reqs, offsets=offsets, **kw)
    monkeypatch.setattr(rounds, "batch_sampling", wrong)


def draft_coins_by_subset_position(monkeypatch) -> None:
    """Probabilistic drafting: the draft coins laid out by subset position, not scattered to
    each sampled row's batch position: a request's draft noise is its companions'."""
    right = draft.draft_inputs

    def wrong(bsamp, bs, steps, device):
        out = right(bsamp, bs, steps, device)
        if bsamp is not None:
            coins = torch.zeros(bs, steps, dtype=torch.float32, device=device)
            coins[:len(bsamp.rows)] = bsamp.draft_coins
            out["draft_coins"] = coins.reshape(-1)
        return out
    monkeypatch.setattr(draft, "draft_inputs", wrong)


def retraction_drops_the_pending_token(monkeypatch) -> None:
    """Retraction forgets the pending bonus token (it has no KV yet): the resumed request
    decides that position again, with the next round's coins. Greedy requests decide it the
    same way; sampled ones draw again."""
    right = Scheduler._retract_until_fits

    def wrong(self):
        before = self.retractions
        done = right(self)
        for r in list(self.waiting)[:self.retractions - before]:  # the victims, newest first
            r.output = r.output[:-1]
        return done
    monkeypatch.setattr(Scheduler, "_retract_until_fits", wrong)


BASE = dict(topk=1, num_steps=3, ndt=4, page_size=1, draft="perturbed:0.05",
            draft_sampling="greedy", subject_sampled=True, temperature=1.0, top_k=0,
            top_p=1.0, companions=3, position=2, arrival=2, overlap=False, cuda_graph=False,
            pressure=False)
EXAMPLES = {
    "offsets": InvarianceConfig(**{**BASE, "overlap": True, "seed": 0}),
    "draft_coins": InvarianceConfig(**{**BASE, "draft_sampling": "probabilistic", "seed": 0}),
    "retraction": InvarianceConfig(**{**BASE, "pressure": True, "position": 3, "seed": 0,
                                      "draft": "eagle"}),
}


@pytest.mark.parametrize("family, plant", [("offsets", offsets_by_subset_position),
                                           ("draft_coins", draft_coins_by_subset_position),
                                           ("retraction", retraction_drops_the_pending_token)])
def test_planted_family_is_caught(monkeypatch, family, plant):
    cfg = EXAMPLES[family]
    prop_request_invariance(cfg, DEVICE)  # the engine itself holds the law here
    plant(monkeypatch)
    with pytest.raises(OracleFailure) as info:
        prop_request_invariance(cfg, DEVICE)
    assert info.value.law == "request_invariance"
