"""Independent references. Nothing here calls the code under test's bookkeeping: no paged KV,
no attention metadata, no layout helper, no kernel. Each is written plainly from the
contract (docs/contract.md)."""
from __future__ import annotations

import dataclasses
import functools

import torch


class DenseCausalAttention:
    """Stands in for the attention backend: plain causal attention over one sequence, no KV
    pool. Records the K/V each layer computes, which is what a correct cache must hold."""

    def __init__(self, sm_scale: float, cfg=None) -> None:
        self.sm_scale = sm_scale
        self.cfg = cfg  # RoPE tables come from the model's config, not from its own tables
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}

    def forward(self, q, *, k, v, layer_id, fb, rope, positions):
        if self.cfg is not None:
            rope = _tables(self.cfg, int(positions.max()) + 1, positions.device)
        q, k = _rotate(q, rope, positions), _rotate(k, rope, positions)
        self.k[layer_id], self.v[layer_id] = k, v.clone()
        n, hq, d = q.shape
        rep = hq // k.shape[1]
        kf = k.float().repeat_interleave(rep, dim=1)
        vf = v.float().repeat_interleave(rep, dim=1)
        s = torch.einsum("qhd,khd->hqk", q.float(), kf) * self.sm_scale
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~causal, float("-inf"))
        return torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), vf).to(q.dtype)


def _tables(cfg, n: int, device):
    """cos/sin for positions 0..n-1 from the config's theta and scaling: a model's own table
    may be shorter than the positions it runs (vLLM #48894), the reference's never is.
    Built in blocks of 1024 positions and cached."""
    return _cached_tables(cfg, -(-n // 1024) * 1024, str(device))


@functools.lru_cache(maxsize=16)
def _cached_tables(cfg, n: int, device: str):
    from specdec.model.layers import RotaryEmbedding
    return RotaryEmbedding.for_config(dataclasses.replace(cfg, max_position=n)).to(device)


def _rotate(x, rope, positions):
    """Rotate-half RoPE at `positions` with the model's tables, in fp32, back to x's dtype."""
    cos = rope.cos[positions].float()[:, None, :]
    sin = rope.sin[positions].float()[:, None, :]
    x1, x2 = x.float().chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.float() * cos + rotated * sin).to(x.dtype)


class _Batch:
    """The few fields a model reads from a forward batch."""

    def __init__(self, input_ids, positions, hidden_states=None) -> None:
        self.input_ids, self.positions, self.hidden_states = input_ids, positions, hidden_states


@torch.no_grad()
def reference_prefill(model, tokens: list[int], device, positions=None, hidden_states=None):
    """Run `model` over `tokens` at `positions` (default 0..n-1) with dense causal attention.

    Returns (logits [n, V] float32, hidden [n, H], per-layer K and V [n, Hkv, D]).
    """
    ids = torch.tensor(tokens, dtype=torch.int64, device=device)
    pos = torch.arange(len(tokens), device=device) if positions is None else positions
    attn = DenseCausalAttention(model.cfg.head_dim ** -0.5, model.cfg)
    logits, hidden = model(_Batch(ids, pos, hidden_states), attn)
    return logits, hidden, attn.k, attn.v


def greedy_reference(model, prompt: list[int], n: int, device) -> tuple[list[int], list[float]]:
    """Greedy continuation by full recomputation each step (slow, obviously right), with the
    top-2 logit margin at each generated position."""
    tokens, margins = list(prompt), []
    for _ in range(n):
        logits, _, _, _ = reference_prefill(model, tokens, device)
        top2 = torch.topk(logits[-1], 2).values
        margins.append(float(top2[0] - top2[1]))
        tokens.append(int(torch.argmax(logits[-1])))
    return tokens[len(prompt):], margins


def top2_margins(model, prompt: list[int], output: list[int], device) -> list[float]:
    """Top-2 logit margin of the reference at each output position (one dense forward)."""
    seq = prompt + output[:-1]
    logits, _, _, _ = reference_prefill(model, seq, device)
    top2 = torch.topk(logits[len(prompt) - 1:], 2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).tolist()
