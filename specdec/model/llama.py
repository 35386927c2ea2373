"""A Llama-architecture model over the paged KV pool: GQA attention, RoPE, SwiGLU."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from specdec.attention.forward_batch import ForwardBatch
from specdec.config import ModelConfig
from specdec.model.layers import MLP, RMSNorm, RotaryEmbedding


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, rope: RotaryEmbedding,
                fb: ForwardBatch, backend) -> torch.Tensor:
        n = x.shape[0]
        q = self.q_proj(x).view(n, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(n, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(n, self.num_kv_heads, self.head_dim)
        q, k = rope(positions, q, k)
        out = backend.forward(q, k, v, self.layer_id, fb)
        return self.o_proj(out.reshape(n, -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int, input_norm: bool = True) -> None:
        super().__init__()
        # The EAGLE head's only layer has no input norm (its input is the fc output).
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps) if input_norm else nn.Identity()
        self.self_attn = Attention(cfg, layer_id)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, positions, rope, fb, backend):
        h = x + self.self_attn(self.input_layernorm(x), positions, rope, fb, backend)
        return h + self.mlp(self.post_attention_layernorm(h))


def init_weights(module: nn.Module, seed: int, head_scale: float = 4.0) -> None:
    """Seeded random weights, scaled so that logits are well separated (few greedy ties)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in sorted(module.named_parameters()):
        with torch.no_grad():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                scale = 1.0 / math.sqrt(p.shape[-1])
                if name.endswith("lm_head.weight"):
                    scale *= head_scale
                p.copy_(scale * torch.randn(p.shape, generator=gen))


class LlamaModel(nn.Module):
    """Target (and standalone draft). forward returns (logits of `logit_rows`, hidden states);
    the hidden states are post-final-norm, the input the EAGLE head consumes."""

    shifted = False  # as a drafter: row at position p consumes token p (conventions section 3)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.rope = RotaryEmbedding.for_config(cfg)

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def compute_logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.lm_head_weight).float()

    def forward(self, fb: ForwardBatch, backend, logit_rows: torch.Tensor | None = None):
        x = self.embed_tokens(fb.input_ids)
        for layer in self.layers:
            x = layer(x, fb.positions, self.rope, fb, backend)
        h = self.norm(x)
        return self.compute_logits(h if logit_rows is None else h[logit_rows]), h
