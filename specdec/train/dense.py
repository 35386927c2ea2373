"""Dense, differentiable forwards over the engine's own modules (LlamaModel, EagleHead).

The engine's forward is paged and for inference; training needs a batched [B, T] forward with
autograd. These run the same math on the same parameters: RMSNorm normalised in fp32 and
scaled in the input dtype, rotate-half RoPE from the model's own tables, SwiGLU, and the
residual adds where DecoderLayer.forward puts them. The checkpoint round-trip test holds the
two paths to the same logits in fp32.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from kernels.norm import rms_norm_ref
from kernels.rope import rotate_ref
from specdec.model.eagle import EagleHead
from specdec.model.llama import Attention, DecoderLayer, LlamaModel

# (attention module, its input [B, T, H], cos, sin) -> attention output [B, T, Hq*D]
AttendFn = Callable[[Attention, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def rope_rows(model, n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [n, 1, D] for positions 0 .. n-1 (broadcast over [B, n, heads, D])."""
    return (model.rope.cos[:n].to(device)[:, None, :], model.rope.sin[:n].to(device)[:, None, :])


def project_qkv(attn: Attention, h: torch.Tensor, cos, sin):
    """q [B, Hq, T, D], k and v [B, Hq, T, D] (KV heads repeated for their query groups, as
    the engine's GQA maps query head i to KV head i // group)."""
    b, t, _ = h.shape
    d, nq, nkv = attn.head_dim, attn.num_heads, attn.num_kv_heads
    q = rotate_ref(attn.q_proj(h).view(b, t, nq, d), cos, sin)
    k = rotate_ref(attn.k_proj(h).view(b, t, nkv, d), cos, sin)
    v = attn.v_proj(h).view(b, t, nkv, d)
    k, v = (x.repeat_interleave(nq // nkv, dim=2) for x in (k, v))
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


def causal_attention(attn: Attention, h: torch.Tensor, cos, sin) -> torch.Tensor:
    q, k, v = project_qkv(attn, h, cos, sin)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(h.shape[0], h.shape[1], -1)


def layer_forward(layer: DecoderLayer, *, x, residual, cos, sin, attend: AttendFn):
    """DecoderLayer.forward, dense: returns (MLP output, the residual stream before it)."""
    if layer.input_layernorm is None:  # the EAGLE head's layer: its input is the fc output
        residual = x if residual is None else x + residual
        h = residual
    elif residual is None:
        residual, h = x, rms_norm_ref(x, layer.input_layernorm.weight, layer.input_layernorm.eps)
    else:
        h, residual = rms_norm_ref(x, layer.input_layernorm.weight, layer.input_layernorm.eps,
                                   residual)
    h = layer.self_attn.o_proj(attend(layer.self_attn, h=h, cos=cos, sin=sin))
    post = layer.post_attention_layernorm
    h, residual = rms_norm_ref(h, post.weight, post.eps, residual)
    mlp = layer.mlp
    return mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h)), residual


def target_hidden(model: LlamaModel, ids: torch.Tensor) -> torch.Tensor:
    """Post-final-norm hidden states [B, T, H] of token ids [B, T] at positions 0 .. T-1 (the
    states LlamaModel.forward returns and the EAGLE head consumes)."""
    cos, sin = rope_rows(model, ids.shape[1], ids.device)
    x, residual = model.embed_tokens(ids), None
    for layer in model.layers:
        x, residual = layer_forward(layer, x=x, residual=residual, cos=cos, sin=sin,
                                    attend=causal_attention)
    h, _ = rms_norm_ref(x, model.norm.weight, model.norm.eps, residual)
    return h


def logits_of(model: LlamaModel, h: torch.Tensor) -> torch.Tensor:
    """Full-vocabulary fp32 logits, as LlamaModel.compute_logits."""
    return F.linear(h, model.lm_head_weight).float()


def unroll_mask(n: int, step: int, device) -> torch.Tensor:
    """Which keys draft step `step` attends to, [n, (step+1)*n] (True = attend), as the engine
    drafts: the row at position p in step s runs as draft decode forward s-1 after a prefix
    ending at p-s. It sees the draft-extend keys (step 0, computed from the target's true
    hidden states) at positions <= p - s, and step j's own key at position p - s + j for
    j = 1 .. s (its ancestors, then itself). Step 0 is plain causal."""
    p = torch.arange(n, device=device)[:, None]
    q = torch.arange(n, device=device)[None, :]
    blocks = [q <= p - step] + [q == p - step + j for j in range(1, step + 1)]
    return torch.cat(blocks, dim=1)


def head_unroll(head: EagleHead, ids: torch.Tensor, hidden: torch.Tensor,
                steps: int) -> list[torch.Tensor]:
    """The head's output features [B, T-1, H] for each of `steps` drafting depths.

    Row p consumes (hidden_p, token t_{p+1}) at position p (the shift of EagleHead) and
    predicts the target's h_{p+1}. Step 0 takes the target's hidden states (the draft
    extend); step s > 0 takes step s-1's prediction of the row before (its own feature, as
    draft decode does), attending per unroll_mask. Rows p < s of step s have no such input
    (zeros) and must be left out of the loss."""
    target = head.target
    emb = target.embed_tokens(ids[:, 1:])
    n = emb.shape[1]
    cos, sin = rope_rows(head, n, ids.device)
    feats = hidden[:, :-1]
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    outs = []
    for s in range(steps):
        mask = unroll_mask(n, s, ids.device)

        def attend(attn, *, h, cos, sin, s=s, mask=mask):
            q, k, v = project_qkv(attn, h, cos, sin)
            keys.append(k)
            values.append(v)
            kk, vv = torch.cat(keys, dim=2), torch.cat(values, dim=2)
            if s == 0:
                out = F.scaled_dot_product_attention(q, kk, vv, is_causal=True)
            else:
                out = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
            return out.transpose(1, 2).reshape(h.shape[0], h.shape[1], -1)

        x = head.fc(torch.cat([emb, feats.to(emb.dtype)], dim=-1))
        out, residual = layer_forward(head.layers[0], x=x, residual=None, cos=cos, sin=sin,
                                      attend=attend)
        f = out + residual
        outs.append(f)
        feats = torch.cat([torch.zeros_like(f[:, :1]), f[:, :-1]], dim=1)
    return outs
