"""The top-k / top-p hand-over of SGLang's entry (harness/adapters/sglang_filters.py): the
rows handed over, put through FlashInfer's threshold semantics (which SGLang's Triton renorm
matches: top-k keeps every probability >= the k-th largest, top-p every one >= the first
ascending value whose cumulative mass reaches 1 - top_p), give back the law's p, for
requests of every mode; and a filter read from another request's value does not."""
from __future__ import annotations

import torch

from harness.adapters import sglang_filters as SF


def _renorm(probs: torch.Tensor, pivots: torch.Tensor) -> torch.Tensor:
    kept = torch.where(probs >= pivots[:, None], probs, 0.0)
    return kept / kept.sum(-1, keepdim=True)


def top_k(probs, ks):
    srt = probs.sort(-1, descending=True).values
    return _renorm(probs, srt.gather(1, (ks - 1).clamp(0, probs.shape[-1] - 1)[:, None])[:, 0])


def top_p(probs, ps):
    srt = probs.sort(-1).values
    cut = torch.searchsorted(srt.cumsum(-1), (1 - ps)[:, None].to(srt), right=False)
    return _renorm(probs, srt.gather(1, cut.clamp(max=probs.shape[-1] - 1))[:, 0])


def _batch(gen, bs=6, width=3, vocab=9):
    p = torch.rand(bs, width, vocab, generator=gen, dtype=torch.float64)
    p[torch.rand(bs, width, vocab, generator=gen) < 0.4] = 0
    p[..., 0] += 0.05                      # every row keeps a token
    banned = torch.zeros(bs, vocab, dtype=torch.bool)
    banned[::2, -1] = True                 # a banned token: zero at every position
    p[banned[:, None, :].expand_as(p)] = 0
    return p / p.sum(-1, keepdim=True), banned


def _pipeline(handed, ks, ps):
    bs, w, v = handed.shape
    rows = handed.reshape(bs * w, v)
    rows = top_k(rows, ks.repeat_interleave(w))
    return top_p(rows, ps.repeat_interleave(w)).reshape(bs, w, v)


def test_the_pipeline_gives_back_p_in_every_mode():
    gen = torch.Generator().manual_seed(0)
    modes = set()
    for trial in range(40):
        p, banned = _batch(gen)
        seeds = torch.arange(6) + 6 * trial
        greedy = torch.zeros(6, dtype=torch.bool)
        handed, ks, ps = SF.filters(p, greedy, seeds, banned)
        modes |= {"top_k" if k < 9 else "top_p" if q < 1 else "none" for k, q in zip(ks, ps)}
        assert torch.allclose(_pipeline(handed, ks, ps), p, atol=1e-9)
        tailed = (handed > 0) & (p == 0)
        assert not (tailed & banned[:, None, :]).any()
    assert modes == {"none", "top_k", "top_p"}


def test_a_filter_of_another_request_changes_p():
    gen = torch.Generator().manual_seed(1)
    moved = 0
    for trial in range(40):
        p, banned = _batch(gen)
        greedy, seeds = torch.zeros(6, dtype=torch.bool), torch.arange(6) + 6 * trial
        handed, ks, ps = SF.filters(p, greedy, seeds, banned)
        moved += not torch.allclose(_pipeline(handed, ks.roll(1), ps.roll(1)), p, atol=1e-9)
    assert moved > 20
