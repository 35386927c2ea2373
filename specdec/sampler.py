"""Sampling from target logits for the sampled (temperature > 0) requests of a batch.

Greedy requests never come here: their path stays the argmax one, bit for bit.
- probs: softmax((logits - rowmax) / T), then top-k, then top-p, renormalised, in fp32.
  Subtracting the row max first keeps a tiny T from overflowing into inf / NaN.
- coins: a request's random numbers depend only on (its seed, the position of the first token
  being chosen), never on the batch or the round: a CPU torch.Generator seeded per request per
  step, drawing a fixed number of coins, moved to the device afterwards.
- tokens are drawn by `tree_speculative_sampling_target_only` on a one-node tree (root only, no
  drafts): the same fixed-point sampler as the speculative verify, on every backend.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def mix_seed(a: int, b: int) -> int:
    """A 63-bit seed from two integers; stable across processes (unlike a salted hash)."""
    return _splitmix64(_splitmix64(a & _MASK64) ^ (b & _MASK64)) >> 1


def request_seed(req, engine_seed: int) -> int:
    """SamplingParams.seed, else one derived from the engine seed and the request id."""
    s = req.sampling.seed
    return s if s is not None else mix_seed(engine_seed + (1 << 32), req.rid)


@dataclass
class BatchSampling:
    """The sampled rows of a batch (indices into it) with their knobs and coins."""

    rows: torch.Tensor          # [ns] int64 batch indices of sampled requests
    temperature: torch.Tensor   # [ns] fp32
    top_k: torch.Tensor         # [ns] int64, 0 = no cut
    top_p: torch.Tensor         # [ns] fp32
    coins: torch.Tensor         # [ns, n_coins] fp32; column 0 is the final-draw coin
    cuts_top_k: bool            # some row has top_k > 0 (else the top-k sort is skipped)
    cuts_top_p: bool            # some row has top_p < 1 (else the top-p sort is skipped)


def batch_sampling(reqs, engine_seed: int, positions: list[int], n_coins: int,
                   device) -> BatchSampling | None:
    """None when every request is greedy. positions[i]: where request i's first new token goes
    (the coin key, with its seed)."""
    idx = [i for i, r in enumerate(reqs) if not r.sampling.greedy]
    if not idx:
        return None
    coins = torch.stack([torch.rand(n_coins, generator=torch.Generator().manual_seed(
        mix_seed(request_seed(reqs[i], engine_seed), positions[i]))) for i in idx])
    sp = [reqs[i].sampling for i in idx]
    return BatchSampling(
        torch.tensor(idx, dtype=torch.int64, device=device),
        torch.tensor([s.temperature for s in sp], dtype=torch.float32, device=device),
        torch.tensor([s.top_k for s in sp], dtype=torch.int64, device=device),
        torch.tensor([s.top_p for s in sp], dtype=torch.float32, device=device),
        coins.to(device), any(s.top_k > 0 for s in sp), any(s.top_p < 1.0 for s in sp))


def target_probs(logits: torch.Tensor, bsamp: BatchSampling) -> torch.Tensor:
    """logits [ns, R, V] (R rows per request) -> filtered, renormalised fp32 probs."""
    x = logits.float()
    x = (x - x.amax(-1, keepdim=True)) / bsamp.temperature[:, None, None]
    vocab = x.shape[-1]
    if bsamp.cuts_top_k:  # two full-vocab sorts per row are the cost: only when asked for
        srt = torch.sort(x, dim=-1, descending=True).values
        k = torch.where(bsamp.top_k > 0, bsamp.top_k, vocab).clamp(max=vocab)
        kth = srt.gather(-1, (k - 1)[:, None, None].expand(-1, x.shape[1], 1))
        x = x.masked_fill(x < kth, float("-inf"))  # ties with the k-th logit stay
    probs = torch.softmax(x, dim=-1)
    if not bsamp.cuts_top_p:
        return probs
    p_sorted, order = torch.sort(probs, dim=-1, descending=True)
    # Keep a token while the mass strictly before it is below top_p (the first always stays).
    # top_p == 1 keeps everything (an fp32 cumsum may pass 1.0 in the tail).
    top_p = bsamp.top_p[:, None, None]
    drop_sorted = ((torch.cumsum(p_sorted, -1) - p_sorted) >= top_p) & (top_p < 1.0)
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    probs = probs.masked_fill(drop, 0.0)
    return probs / probs.sum(-1, keepdim=True)


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


def choose_tokens(kernels, logits: torch.Tensor, bsamp: BatchSampling | None) -> torch.Tensor:
    """One token per row of logits [bs, V]: argmax (greedy rows, exactly as before), sampled
    rows overwritten."""
    tokens = torch.argmax(logits, dim=-1)
    if bsamp is not None:
        probs = target_probs(logits[bsamp.rows][:, None, :], bsamp)[:, 0]
        tokens[bsamp.rows] = sample_tokens(kernels, probs, bsamp.coins[:, 0])
    return tokens
