"""The torch.compile peer (the gpt-fast approach): a plain dense-KV decode step over our
LlamaModel's own weights and layers, compiled with mode="reduce-overhead".

Our engine's forward goes through paged metadata and Triton kernels that torch.compile does
not trace; this one is what compile is good at: static shapes, a static KV cache [layers,
batch, kv_heads, S, head_dim] written in place at `pos`, attention over all S positions with
a mask (S = the context the bench runs at, so it reads the same KV the engine does).
"""
from __future__ import annotations

import torch
from torch import nn

from specdec.model.llama import LlamaModel


class DenseDecoder(nn.Module):
    def __init__(self, model: LlamaModel, max_batch: int, max_seq: int) -> None:
        super().__init__()
        self.model = model  # shared weights, nothing copied
        cfg, w = model.cfg, model.embed_tokens.weight
        shape = (cfg.num_layers, max_batch, cfg.num_kv_heads, max_seq, cfg.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=w.dtype, device=w.device), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=w.dtype, device=w.device), persistent=False)

    def forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """ids [B] at position pos ([1], the same for the whole batch); returns logits [B, V]."""
        m, b = self.model, ids.shape[0]
        x = m.embed_tokens(ids)
        positions = pos.expand(b)
        valid = torch.arange(self.k_cache.shape[3], device=ids.device) <= pos  # [S]
        for i, layer in enumerate(m.layers):
            a = layer.self_attn
            nh, nkv, d = a.num_heads, a.num_kv_heads, a.head_dim
            h = layer.input_layernorm(x)
            q = a.q_proj(h).view(b, nh, d)
            k = a.k_proj(h).view(b, nkv, d)
            v = a.v_proj(h).view(b, nkv, d)
            q, k = m.rope(positions, q, k)
            kc, vc = self.k_cache[i, :b], self.v_cache[i, :b]  # [B, nkv, S, D]
            kc.index_copy_(2, pos, k.unsqueeze(2))
            vc.index_copy_(2, pos, v.unsqueeze(2))
            # GQA without expanding K/V: the nh/nkv query heads of a KV head share one matmul.
            qg = q.view(b, nkv, nh // nkv, d)
            s = torch.matmul(qg, kc.transpose(-1, -2)).float() * d ** -0.5  # [B, nkv, g, S]
            p = torch.softmax(s.masked_fill(~valid, float("-inf")), dim=-1).to(vc.dtype)
            x = x + a.o_proj(torch.matmul(p, vc).reshape(b, nh * d))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return m.compute_logits(m.norm(x))


def compiled_step(model: LlamaModel, max_batch: int, max_seq: int, mode: str):
    """(decoder, step fn). mode "none" runs the dense step uncompiled (CPU smoke tests)."""
    dec = DenseDecoder(model, max_batch, max_seq)
    if mode == "none":
        return dec, dec
    # Static addresses: cudagraph trees then neither copy nor refuse the mutated caches.
    torch._dynamo.mark_static_address(dec.k_cache)
    torch._dynamo.mark_static_address(dec.v_cache)
    return dec, torch.compile(dec, mode=mode, fullgraph=True)
