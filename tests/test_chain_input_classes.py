"""Each input class the chain-sampling laws draw on purpose (harness/strategies/chain_inputs.py,
INPUT_CLASSES) has a negative control: specdec's own kernels behind the kernel-adapter door
with one mistake of the kind that lives only in that class, which kernel_chain_acceptance must
reject within a few examples drawn in the class; the unwrapped kernels pass the same draws.
(no_drafts needs an adapter that takes ragged drafts, which specdec's kernels do not.)"""
from __future__ import annotations

import kernels._triton_env  # noqa: F401,I001  (before triton)

import pytest
import torch

from harness.adapters.specdec_kernels import SpecdecKernels
from harness.strategies import chain_inputs
from harness.runners.kernel_suite import first_failure
from harness.strategies.runs import default_device

DEVICE = default_device()
FOUND = 30  # examples of the class a control may take to be caught


class _Planted(SpecdecKernels):
    def chain_sampling(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant, **coins):
        return self.planted(draft_ids, num_drafts=num_drafts, draft_probs=draft_probs,
                            target_probs=target_probs, greedy=greedy, seed=seed, variant=variant,
                            **coins)

    def right(self, draft_ids, **kw):
        return SpecdecKernels.chain_sampling(self, draft_ids, **kw)


class MaskOnlyAtTheBonus(_Planted):
    """The target's mask (grammar, allowed ids, bad words) applied at the bonus position
    only: at draft positions the sampler reads the unmasked distribution."""

    def planted(self, draft_ids, *, target_probs, **kw):
        unmasked = torch.where(target_probs[:, :-1] == 0, 1.0, target_probs[:, :-1])
        p = torch.cat([unmasked / unmasked.sum(-1, keepdim=True), target_probs[:, -1:]], 1)
        return self.right(draft_ids, target_probs=p, **kw)


class BansOfTheFirstRequest(_Planted):
    """A per-request ban (allowed ids, bad words) looked up for request 0 whatever the row,
    as an allowed-ids mask indexed by draft row instead of by its request would."""

    def planted(self, draft_ids, *, target_probs, num_drafts, **kw):
        p = target_probs.clone()
        first = (p[0, :int(num_drafts[0]) + 1] == 0).all(0)
        for b in range(1, p.shape[0]):
            own = (p[b, :int(num_drafts[b]) + 1] == 0).all(0) & ~first
            p[b][:, own] = p[b].max(-1, keepdim=True).values
            p[b] /= p[b].sum(-1, keepdim=True)
        return self.right(draft_ids, target_probs=p, num_drafts=num_drafts, **kw)


class MaskedRowFindsNothing(_Planted):
    """A search for the recovered or bonus token (a running sum against a coin) that finds
    nothing in a fully masked (NaN) row and writes its end, V, as the token."""

    def planted(self, draft_ids, *, target_probs, **kw):
        out = self.right(draft_ids, target_probs=target_probs, **kw)
        for b in range(out.shape[0]):
            n = int((out[b] != -1).sum()) - 1
            if target_probs[b, n].isnan().all():
                out[b, n] = target_probs.shape[-1]
        return out


class RepeatAccepted(_Planted):
    """A fast path for a drafter in a loop: a greedy row's draft equal to the draft it just
    accepted is taken without comparing it with the target."""

    def planted(self, draft_ids, *, num_drafts, target_probs, greedy, **kw):
        out = self.right(draft_ids, num_drafts=num_drafts, target_probs=target_probs,
                         greedy=greedy, **kw)
        for b in range(out.shape[0]):
            n, nd = int((out[b] != -1).sum()) - 1, int(num_drafts[b])
            if bool(greedy[b]) and 1 <= n < nd and draft_ids[b, n] == draft_ids[b, n - 1]:
                out[b, n] = draft_ids[b, n]
                out[b, n + 1] = int(target_probs[b, n + 1].argmax())
        return out


class OneTokenRowsAcceptAll(_Planted):
    """A fast path for rows the sampling parameters leave one token (top-k 1): every draft
    accepted, as if the drafter could not be wrong."""

    def planted(self, draft_ids, *, num_drafts, target_probs, greedy, **kw):
        out = self.right(draft_ids, num_drafts=num_drafts, target_probs=target_probs,
                         greedy=greedy, **kw)
        for b in range(out.shape[0]):
            if not bool(greedy[b]) and bool(((target_probs[b] > 0).sum(-1) == 1).all()):
                n = int(num_drafts[b])
                out[b, :n] = draft_ids[b, :n]
                out[b, n] = int(target_probs[b, n].argmax())
        return out


class BatchOfOneDropsTheBonus(_Planted):
    """A single-request path that forgets the token after the accepted drafts."""

    def planted(self, draft_ids, **kw):
        out = self.right(draft_ids, **kw)
        if out.shape[0] == 1:
            n = int((out[0] != -1).sum())
            out[0, n - 1] = -1
        return out


class FullChainBonusOneEarly(_Planted):
    """With every draft accepted, the bonus drawn from the last draft's distribution p[K-1],
    not p[K] (an index that only full chains reach)."""

    def planted(self, draft_ids, *, target_probs, **kw):
        shifted = torch.cat([target_probs[:, :-1], target_probs[:, -2:-1]], 1)
        return self.right(draft_ids, target_probs=shifted, **kw)


class MixedBatchAllSampled(_Planted):
    """A mixed batch routed whole to the sampler: its greedy rows are sampled."""

    def planted(self, draft_ids, *, greedy, **kw):
        if bool(greedy.any()) and not bool(greedy.all()):
            greedy = torch.zeros_like(greedy)
        return self.right(draft_ids, greedy=greedy, **kw)


class InclusiveCoinComparison(_Planted):
    """Acceptance as u <= p/q instead of u < p/q: a coin of exactly 0.0 accepts a draft the
    target gives probability 0 (vLLM 0.9's float32 coins met it once in 2^24 draws)."""

    def planted(self, draft_ids, *, num_drafts, target_probs, greedy, coins=None, **kw):
        out = self.right(draft_ids, num_drafts=num_drafts, target_probs=target_probs,
                         greedy=greedy, coins=coins, **kw)
        for b in range(out.shape[0] if coins is not None else 0):
            n, nd = int((out[b] != -1).sum()) - 1, int(num_drafts[b])
            if not bool(greedy[b]) and n < nd and float(coins[b, n]) == 0.0:
                out[b, n] = draft_ids[b, n]
                out[b, n + 1] = int(target_probs[b, n + 1].argmax())
        return out


CONTROLS = {
    "edge_coins": (InclusiveCoinComparison, {"accepts_zero_prob"}),
    "masked_drafts": (MaskOnlyAtTheBonus, {"accepts_zero_prob"}),
    "banned_tokens": (BansOfTheFirstRequest, {"accepts_zero_prob", "support", "greedy"}),
    "nonfinite_rows": (MaskedRowFindsNothing, {"token_range"}),
    "repeated_drafts": (RepeatAccepted, {"greedy"}),
    "single_token": (OneTokenRowsAcceptAll, {"accepts_zero_prob"}),
    # A dropped bonus leaves the last accepted draft reading as the recovered token.
    "batch_one": (BatchOfOneDropsTheBonus, {"shape", "recovered_support", "support"}),
    "full_drafts": (FullChainBonusOneEarly, {"support", "greedy"}),
    "mixed_greedy": (MixedBatchAllSampled, {"greedy"}),
}


def test_every_class_but_no_drafts_has_a_control():
    assert set(CONTROLS) == set(chain_inputs.INPUT_CLASSES) - {"plain", "no_drafts"}


@pytest.mark.parametrize("cls", sorted(CONTROLS))
def test_a_mistake_of_the_class_is_caught_in_it(cls, monkeypatch):
    monkeypatch.setattr(chain_inputs, "input_classes", lambda accepts: (cls,))
    planted, checks = CONTROLS[cls]
    exc = first_failure("kernel_chain_acceptance", planted(DEVICE), FOUND)
    assert exc is not None, f"{cls}: {planted.__name__} passed: {planted.__doc__}"
    assert exc.check in checks, str(exc)
    assert first_failure("kernel_chain_acceptance", SpecdecKernels(DEVICE), FOUND) is None
