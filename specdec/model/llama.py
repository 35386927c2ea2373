"""A Llama-architecture model over the paged KV pool: GQA attention, RoPE, SwiGLU."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch
from specdec.config import ModelConfig
from specdec.model.layers import (MLP, RMSNorm, RotaryEmbedding, fuse_linears, fused_weight,
                                  reduce_norm, reduced)


class Attention(nn.Module):
    tp = None  # a TPComm once sharded (specdec/tp/shard.py): heads local, o_proj row-parallel

    def __init__(self, cfg: ModelConfig, layer_id: int) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, cfg.hidden_size, bias=False)
        self.qkv_weight: torch.Tensor | None = None  # fuse_weights(): [(Hq + 2 Hkv) D, H]

    def fuse_weights(self) -> None:
        if fused_weight(self.qkv_weight, self.q_proj) is None:
            self.qkv_weight = fuse_linears(self.q_proj, self.k_proj, self.v_proj)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, rope: RotaryEmbedding,
                fb: ForwardBatch, backend) -> torch.Tensor:
        n, d = x.shape[0], self.head_dim
        w = fused_weight(self.qkv_weight, self.q_proj)
        qkv = (F.linear(x, w) if w is not None else
               torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1))
        nq, nkv = self.num_heads * d, self.num_kv_heads * d
        q = qkv[:, :nq].view(n, self.num_heads, d)
        k = qkv[:, nq:nq + nkv].view(n, self.num_kv_heads, d)
        v = qkv[:, nq + nkv:].view(n, self.num_kv_heads, d)
        # The backend rotates q and k at `positions` (fused with the KV store) and attends.
        # Sharded, the rank's partial sum: DecoderLayer reduces it fused with the norm after it.
        out = backend.forward(q, k=k, v=v, layer_id=self.layer_id, fb=fb, rope=rope,
                              positions=positions)
        return self.o_proj(out.reshape(n, -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int, input_norm: bool = True) -> None:
        super().__init__()
        # The EAGLE head's only layer has no input norm (its input is the fc output).
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps) if input_norm else None
        self.self_attn = Attention(cfg, layer_id)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, *, residual, positions, rope, fb, backend):
        """The residual stream is `x + residual` (residual None: just x, the first layer).
        Returns (this layer's MLP output, the stream before it): each add is fused into the
        norm that follows it, here or in the next layer (or the model's final norm). On a TP
        rank the MLP output is the rank's partial sum, and so is `x` when residual is given:
        the all-reduce is fused into that norm too (reduce_norm)."""
        tp = self.mlp.tp
        if self.input_layernorm is None:
            residual = x if residual is None else reduced(tp, x) + residual
            h = residual
        elif residual is None:  # x: the embedding, whole on every rank
            residual, h = x, self.input_layernorm(x)
        else:
            h, residual = reduce_norm(tp, self.input_layernorm, x, residual)
        h = self.self_attn(h, positions, rope, fb, backend)
        h, residual = reduce_norm(tp, self.post_attention_layernorm, h, residual)
        return self.mlp(h), residual


def fuse_weights(module: nn.Module) -> nn.Module:
    """Fuse q/k/v and gate/up projections of every layer in `module` (one GEMM each). Call it
    once the weights are on their device, in their dtype, with their values."""
    for m in module.modules():
        if isinstance(m, (Attention, MLP)):
            m.fuse_weights()
    return module


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

    shifted = False  # as a drafter: row at position p consumes token p (contract section 3)
    tp = None  # a TPComm once sharded: embedding and LM head hold this rank's vocab rows

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.rope = RotaryEmbedding.for_config(cfg)
        bias = None
        if cfg.logit_bias:  # not a weight: seeded init and checkpoints leave it alone
            bias = torch.zeros(cfg.vocab_size)
            for tok, value in cfg.logit_bias:
                bias[tok] = value
        self.register_buffer("logit_bias", bias, persistent=False)

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def compute_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits: sharded, each rank's rows gathered before any argmax,
        top-k or sampling reads them."""
        logits = F.linear(h, self.lm_head_weight).float()
        if self.logit_bias is not None:  # this rank's rows of it, once sharded
            logits = logits + self.logit_bias.float()
        if self.tp is None or faults.on("tp_vocab_shard_argmax_local"):
            return logits  # the fault: the local shard's logits, its indices taken as tokens
        return self.tp.gather_last(logits, self.cfg.vocab_size)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        if self.tp is None:
            return self.embed_tokens(ids)
        return self.tp.vocab_embed(self.embed_tokens.weight, ids, self.cfg.vocab_size)

    def forward(self, fb: ForwardBatch, backend, logit_rows: torch.Tensor | None = None):
        x, residual = self.embed(fb.input_ids), None
        for layer in self.layers:
            x, residual = layer(x, residual=residual, positions=fb.positions, rope=self.rope,
                                fb=fb, backend=backend)
        h, _ = reduce_norm(self.tp, self.norm, x, residual)
        return self.compute_logits(h if logit_rows is None else h[logit_rows]), h
