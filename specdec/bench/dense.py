"""The torch.compile peer (the gpt-fast approach): a plain dense-KV decode step over our
LlamaModel's own weights, compiled with mode="reduce-overhead".

Everything here is plain torch for inductor to fuse (none of our Triton kernels): RMSNorm,
rotate-half RoPE and SwiGLU written out, one fused q/k/v and one gate/up GEMM (the weights
the engine fuses, as gpt-fast's `wqkv`), and per-layer static KV caches `[B, Hkv, S, D]`
written in place at `pos` (`cache[:, :, pos] = k`, as gpt-fast's KVCache). B is the batch
being measured (one compile per batch size, as gpt-fast compiles for its batch); S the
context the bench runs at, so attention reads the same KV the engine does.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kernels.activation import silu_mul_ref
from kernels.norm import rms_norm_ref
from kernels.rope import rotate_ref
from specdec.model.layers import fused_weight
from specdec.model.llama import LlamaModel, fuse_weights


class DenseDecoder(nn.Module):
    def __init__(self, model: LlamaModel, batch: int, max_seq: int) -> None:
        super().__init__()
        self.model = fuse_weights(model)  # shared weights, nothing copied
        # Resolved here, not in forward: dynamo cannot trace fused_weight's data_ptr check.
        self.qkv = [fused_weight(l.self_attn.qkv_weight, l.self_attn.q_proj) for l in model.layers]
        self.gate_up = [fused_weight(l.mlp.gate_up_weight, l.mlp.gate_proj) for l in model.layers]
        cfg, w = model.cfg, model.embed_tokens.weight
        shape = (batch, cfg.num_kv_heads, max_seq, cfg.head_dim)
        for i in range(cfg.num_layers):
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape, dtype=w.dtype, device=w.device),
                                 persistent=False)
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape, dtype=w.dtype, device=w.device),
                                 persistent=False)

    def caches(self):
        return [(getattr(self, f"k_cache_{i}"), getattr(self, f"v_cache_{i}"))
                for i in range(self.model.cfg.num_layers)]

    def forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """ids [B] at position pos ([1], the same for the whole batch); returns logits [B, V]."""
        m, b = self.model, ids.shape[0]
        x = m.embed_tokens(ids)
        cos, sin = m.rope.cos[pos][:, None, :], m.rope.sin[pos][:, None, :]
        for layer, (kc, vc), w_qkv, w_gate_up in zip(m.layers, self.caches(), self.qkv, self.gate_up):
            a = layer.self_attn
            nh, nkv, d = a.num_heads, a.num_kv_heads, a.head_dim
            h = rms_norm_ref(x, layer.input_layernorm.weight, layer.input_layernorm.eps)
            qkv = F.linear(h, w_qkv)
            q, k, v = qkv.split([nh * d, nkv * d, nkv * d], dim=-1)
            q = rotate_ref(q.view(b, nh, d), cos, sin)
            k = rotate_ref(k.view(b, nkv, d), cos, sin)
            kc[:, :, pos] = k.unsqueeze(2)
            vc[:, :, pos] = v.view(b, nkv, 1, d)
            # GQA without expanding K/V: the nh/nkv query heads of a KV head share one matmul.
            valid = torch.arange(kc.shape[2], device=ids.device) <= pos  # [S]
            qg = q.view(b, nkv, nh // nkv, d)
            s = torch.matmul(qg, kc.transpose(-1, -2)).float() * d ** -0.5  # [B, nkv, g, S]
            p = torch.softmax(s.masked_fill(~valid, float("-inf")), dim=-1).to(vc.dtype)
            x = x + a.o_proj(torch.matmul(p, vc).reshape(b, nh * d))
            mlp, post = layer.mlp, layer.post_attention_layernorm
            h = rms_norm_ref(x, post.weight, post.eps)
            gate_up = F.linear(h, w_gate_up)
            x = x + mlp.down_proj(silu_mul_ref(gate_up))
        return m.compute_logits(rms_norm_ref(x, m.norm.weight, m.norm.eps))


def compiled_step(model: LlamaModel, batch: int, max_seq: int, mode: str):
    """(decoder, step fn) for `batch` rows. mode "none" runs the dense step uncompiled (CPU
    smoke tests)."""
    dec = DenseDecoder(model, batch, max_seq)
    if mode == "none":
        return dec, dec
    # Static addresses: cudagraph trees then neither copy nor refuse the mutated caches.
    for kc, vc in dec.caches():
        torch._dynamo.mark_static_address(kc)
        torch._dynamo.mark_static_address(vc)
    return dec, torch.compile(dec, mode=mode, fullgraph=True)
