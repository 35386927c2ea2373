"""Sampling from target logits for the sampled (temperature > 0) requests of a batch.

Greedy requests never come here: their path stays the argmax one, bit for bit.
- probs: softmax((logits - rowmax) / T), then top-k, then top-p, renormalised, in fp32.
  Subtracting the row max first keeps a tiny T from overflowing into inf / NaN.
- coins: three independent streams (draft noise, acceptance, final draw), each keyed by the
  request's seed and the step's position, never by the batch (specdec/random_streams.py).
- tokens are drawn by `tree_speculative_sampling_target_only` on a one-node tree (root only, no
  drafts): the same fixed-point sampler as the speculative verify, on every backend.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.greedy import argmax, argmax_ref
from specdec import faults
from specdec.host import tensor_to_device, to_device
from specdec.random_streams import ACCEPT, DRAFT, FINAL, request_seed, stream_coins


@dataclass
class BatchSampling:
    """The sampled requests of a batch with their knobs and coins.

    Index spaces: `rows` holds batch positions (0..bs-1 in the round's order; not request-pool
    rows, not padded lanes). Every other tensor is indexed by subset position: entry i is the
    i-th sampled request, batch position rows[i]. Only when every request samples do the two
    coincide."""

    rows: torch.Tensor          # [ns] int64: batch position of each sampled request
    temperature: torch.Tensor   # [ns] fp32
    top_k: torch.Tensor         # [ns] int64, 0 = no cut
    top_p: torch.Tensor         # [ns] fp32
    accept_coins: torch.Tensor  # [ns, n_accept] fp32: coin j decides node j's children
    final_coins: torch.Tensor   # [ns] fp32: the bonus / recovery / one-token draw
    draft_coins: torch.Tensor   # [ns, n_draft] fp32: draft token i (probabilistic drafting)
    cuts_top_k: bool            # some row has top_k > 0 (else the top-k sort is skipped)
    cuts_top_p: bool            # some row has top_p < 1 (else the top-p sort is skipped)


def batch_sampling(reqs, *, engine_seed: int, positions: list[int], n_accept: int, device,
                   n_draft: int = 0, spans: list[int] | None = None,
                   offsets: torch.Tensor | None = None) -> BatchSampling | None:
    """None when every request is greedy. positions[i]: where request i's first new token goes
    (the coins' key, with its seed: specdec/random_streams.py).

    Overlap (contract section 10): when the host does not know that position yet (the
    round before is in flight), `spans[i]` candidates positions[i] + c, c < spans[i], are
    drawn on the host and the device picks candidate `offsets[i]` (a device tensor over the
    whole batch): the coins are those the synchronous engine draws, bit for bit."""
    idx = [i for i, r in enumerate(reqs) if not r.sampling.greedy]
    if not idx:
        return None
    spans = spans or [1] * len(reqs)
    width = max(spans[i] for i in idx)
    seeds = [(request_seed(reqs[i], engine_seed), positions[i], spans[i]) for i in idx]
    # The draft's noise has a stream of its own (vLLM #54282 keyed it like the acceptance coin).
    draft = ACCEPT if faults.on("draft_noise_shares_accept_stream") else DRAFT
    # Each request's draws of the streams it uses, side by side: one host-to-device copy.
    widths = [(ACCEPT, n_accept), (FINAL, 1), (draft, n_draft)]
    coins = torch.stack([torch.stack([torch.cat([stream_coins(stream, s, pos + min(c, span - 1), n)
                                                 for stream, n in widths if n])
                                      for c in range(width)])
                         for s, pos, span in seeds])
    sp = [reqs[i].sampling for i in idx]
    rows, top_k = to_device(device, idx, [s.top_k for s in sp])
    coins = tensor_to_device(device, coins)
    knobs = tensor_to_device(device, torch.tensor([[s.temperature, s.top_p] for s in sp],
                                                  dtype=torch.float32))
    if width == 1:
        coins = coins[:, 0]
    else:  # the device knows the position: pick that candidate's coins
        pick = offsets[rows].clamp(0, width - 1)
        coins = coins[torch.arange(len(idx), device=coins.device), pick]
    accept, final, drafts = coins.split([n for _, n in widths], dim=1)
    return BatchSampling(
        rows, knobs[:, 0].contiguous(), top_k, knobs[:, 1].contiguous(),
        accept, final[:, 0], drafts,
        any(s.top_k > 0 for s in sp), any(s.top_p < 1.0 for s in sp))

def draft_inputs(bsamp: BatchSampling | None, bs: int, steps: int,
                 device) -> dict[str, torch.Tensor]:
    """Probabilistic drafting's per-row knobs and draft coins for all bs rows of a round,
    indexed by batch position (scattered from subset positions through bsamp.rows; greedy
    rows keep temperature 0: they draft the argmax)."""
    f32 = torch.float32
    out = {"temperature": torch.zeros(bs, dtype=f32, device=device),
           "top_k": torch.zeros(bs, dtype=torch.int64, device=device),
           "top_p": torch.ones(bs, dtype=f32, device=device),
           "draft_coins": torch.zeros(bs, steps, dtype=f32, device=device)}
    if bsamp is not None:
        for name, x in (("temperature", bsamp.temperature), ("top_k", bsamp.top_k),
                        ("top_p", bsamp.top_p), ("draft_coins", bsamp.draft_coins)):
            out[name].index_copy_(0, bsamp.rows, x)
    out["draft_coins"] = out["draft_coins"].reshape(-1)
    return out


def target_probs(logits: torch.Tensor, bsamp: BatchSampling) -> torch.Tensor:
    """logits [ns, R, V] (R rows per request, by subset position: the caller gathers
    logits[bsamp.rows]) -> filtered, renormalised fp32 probs, by subset position."""
    return filtered_probs(logits, temperature=bsamp.temperature, top_k=bsamp.top_k,
                          top_p=bsamp.top_p,
                          cut_k=bsamp.cuts_top_k, cut_p=bsamp.cuts_top_p)


def filtered_probs(logits: torch.Tensor, *, temperature: torch.Tensor, top_k: torch.Tensor,
                   top_p: torch.Tensor, cut_k: bool = True, cut_p: bool = True) -> torch.Tensor:
    """logits [n, R, V] with per-request knobs [n] -> softmax((logits - rowmax) / T), top-k,
    then top-p, fp32. cut_k / cut_p False skip a cut no row asks for (host flags: a captured
    graph passes True, and top_k 0 / top_p 1 then keep everything).

    A row whose filters are off (top_k 0 or >= V, top_p 1) is the plain softmax, bit for bit,
    whatever the flags: it is never renormalised. Only a row with top_p < 1 is renormalised
    (top-k alone needs none: its softmax runs over the kept logits). The top-p mass before a
    token is summed in float64 and compared with top_p times the row's total, so neither the
    float32 softmax's rounding of its sum nor a float32 cumsum can cut a token whose mass
    before it is below top_p, at top_p = 1 or just below. No host sync, no data-dependent
    control flow: runs inside captured graphs."""
    x = logits.float()
    x = (x - x.amax(-1, keepdim=True)) / temperature[:, None, None]
    vocab = x.shape[-1]
    if cut_k:  # two full-vocab sorts per row are the cost: only when asked for
        srt = torch.sort(x, dim=-1, descending=True).values
        k = torch.where(top_k > 0, top_k, vocab).clamp(max=vocab)
        kth = srt.gather(-1, (k - 1)[:, None, None].expand(-1, x.shape[1], 1))
        x = x.masked_fill(x < kth, float("-inf"))  # ties with the k-th logit stay
    probs = torch.softmax(x, dim=-1)
    if not cut_p:
        return probs
    p_sorted, order = torch.sort(probs, dim=-1, descending=True)
    # Keep a token while the mass strictly before it is below top_p (the first always stays),
    # as a fraction of the row's total (float32 probs need not sum to exactly 1). top_p == 1
    # keeps everything (even a float64 mass before may round up to the total in the tail).
    top_p = top_p[:, None, None]
    csum = torch.cumsum(p_sorted, -1, dtype=torch.float64)
    before = csum - p_sorted.double()
    drop_sorted = (before >= top_p.double() * csum[..., -1:]) & (top_p < 1.0)
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    probs = probs.masked_fill(drop, 0.0)
    return torch.where(top_p < 1.0, probs / probs.sum(-1, keepdim=True), probs)


def draw_from(probs: torch.Tensor, coins: torch.Tensor) -> torch.Tensor:
    """One token per row of probs [n, V] by inverse CDF: the first i whose cumulative mass
    exceeds coin * total (strict, so a token of probability 0 is never drawn; past the end,
    the last token with mass). No host sync: runs inside captured graphs (the draft's noise)."""
    cdf = probs.double().cumsum(-1)
    u = (coins.double() * cdf[:, -1])[:, None]
    strict = not faults.on("coin_le_cdf_accepts_zero_prob")  # left search: coin <= cdf
    tok = torch.searchsorted(cdf, u, right=strict)[:, 0]
    idx = torch.arange(probs.shape[-1], device=probs.device)
    last = torch.where(probs > 0, idx, 0).amax(-1)
    return torch.where(tok < probs.shape[-1], tok, last)


def sample_tokens(kernels, probs: torch.Tensor, final_coins: torch.Tensor) -> torch.Tensor:
    """One token per row of probs [ns, V], via the acceptance kernel on a root-only tree."""
    ns, dev = probs.shape[0], probs.device
    predicts = torch.zeros(ns, dtype=torch.int32, device=dev)
    one = torch.full((ns, 1), -1, dtype=torch.int64, device=dev)
    kernels.tree_speculative_sampling_target_only(
        predicts, torch.full((ns, 1), -1, dtype=torch.int32, device=dev),
        torch.zeros(ns, dtype=torch.int32, device=dev), torch.zeros_like(one),
        torch.arange(ns, device=dev).view(ns, 1), one, one, final_coins.view(ns, 1).contiguous(),
        final_coins.contiguous(), probs.view(ns, 1, -1).contiguous(),
        torch.zeros(ns, 1, probs.shape[1], dtype=torch.float32, device=dev))
    return predicts.long()


def greedy_tokens(logits: torch.Tensor) -> torch.Tensor:
    """Each row's argmax (int64): the two-launch Triton kernel on CUDA, torch.argmax elsewhere;
    the same rule bit for bit, ties to the first index (kernels/greedy.py)."""
    return (argmax if logits.is_cuda else argmax_ref)(logits)


def choose_tokens(kernels, logits: torch.Tensor, bsamp: BatchSampling | None) -> torch.Tensor:
    """One token per row of logits [bs, V] (batch position): argmax (greedy rows, exactly as
    before); the sampled ones, drawn by subset position, are written back to their batch
    positions bsamp.rows."""
    tokens = greedy_tokens(logits)
    if bsamp is not None:
        probs = target_probs(logits[bsamp.rows][:, None, :], bsamp)[:, 0]
        tokens[bsamp.rows] = sample_tokens(kernels, probs, bsamp.final_coins)
    return tokens
