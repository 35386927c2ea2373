"""Megatron sharding of a full model, in place: every rank builds the same full model (same
seed, or the same checkpoint) and keeps its slice, so tp N holds exactly tp 1's weights.

q/k/v and gate/up are column-parallel (each projection sliced by output rows before they
are fused, so the fused GEMM stays [q_r; k_r; v_r]), o_proj and down_proj row-parallel
(sliced by input columns, summed by an all-reduce), KV heads split (rank r: KV heads
r*Hkv/N .. and their query heads), the embedding and LM head vocabulary-parallel (shards of ceil(V/N) rows: V need not divide). The EAGLE
head's fc over [embedding, hidden] is replicated: both inputs and its output are full."""
from __future__ import annotations

import torch
from torch import nn

from specdec.config import ModelConfig
from specdec.model.eagle import EagleHead
from specdec.model.layers import MLP
from specdec.model.llama import Attention, LlamaModel
from specdec.tp.comm import TPComm


def check_divisible(cfg: ModelConfig, tp_size: int, what: str = "model") -> None:
    """tp_size must split the KV heads (hence the query heads) and the MLP; the vocabulary
    need not divide (shards of ceil(V/tp) rows, the last one shorter)."""
    if cfg.num_kv_heads % tp_size:
        raise ValueError(f"tp_size={tp_size} must divide the {what}'s num_kv_heads="
                         f"{cfg.num_kv_heads}: allowed tp sizes are the divisors of "
                         f"{cfg.num_kv_heads}")
    if (tp_size - 1) * -(-cfg.vocab_size // tp_size) >= cfg.vocab_size:
        raise ValueError(f"tp_size={tp_size} is too many ranks for the {what}'s vocab_size="
                         f"{cfg.vocab_size}: every rank needs rows of the vocab-parallel "
                         "embedding and LM head")
    if cfg.intermediate_size % tp_size:
        raise ValueError(f"tp_size={tp_size} must divide the {what}'s intermediate_size="
                         f"{cfg.intermediate_size}")


def _rows(w: torch.Tensor, start: int, n: int) -> torch.Tensor:
    return w.detach()[start:start + n].clone()


def _cols(w: torch.Tensor, start: int, n: int) -> torch.Tensor:
    return w.detach()[:, start:start + n].contiguous()


def _shard_attention(m: Attention, comm: TPComm) -> None:
    r, n, d = comm.rank, comm.world, m.head_dim
    hq, hkv = m.num_heads // n, m.num_kv_heads // n
    m.q_proj.weight = nn.Parameter(_rows(m.q_proj.weight, r * hq * d, hq * d), False)
    m.k_proj.weight = nn.Parameter(_rows(m.k_proj.weight, r * hkv * d, hkv * d), False)
    m.v_proj.weight = nn.Parameter(_rows(m.v_proj.weight, r * hkv * d, hkv * d), False)
    m.o_proj.weight = nn.Parameter(_cols(m.o_proj.weight, r * hq * d, hq * d), False)
    m.num_heads, m.num_kv_heads, m.qkv_weight, m.tp = hq, hkv, None, comm


def _shard_mlp(m: MLP, comm: TPComm) -> None:
    i = m.gate_proj.weight.shape[0] // comm.world
    start = comm.rank * i
    m.gate_proj.weight = nn.Parameter(_rows(m.gate_proj.weight, start, i), False)
    m.up_proj.weight = nn.Parameter(_rows(m.up_proj.weight, start, i), False)
    m.down_proj.weight = nn.Parameter(_cols(m.down_proj.weight, start, i), False)
    m.gate_up_weight, m.tp = None, comm


def _shard_vocab(emb: nn.Module, comm: TPComm) -> None:
    first, count = comm.vocab_rows(emb.weight.shape[0])
    emb.weight = nn.Parameter(_rows(emb.weight, first, count), False)


@torch.no_grad()
def shard_model(model: nn.Module, comm: TPComm) -> nn.Module:
    """Keep rank `comm.rank`'s shard of a full LlamaModel or EagleHead (before fuse_weights).
    An EAGLE head shares the (already sharded) target's embedding and LM head."""
    check_divisible(model.cfg, comm.world, "drafter" if isinstance(model, EagleHead) else "model")
    for m in model.modules():
        if isinstance(m, Attention):
            _shard_attention(m, comm)
        elif isinstance(m, MLP):
            _shard_mlp(m, comm)
    if isinstance(model, LlamaModel):
        _shard_vocab(model.embed_tokens, comm)
        if model.lm_head is not None:
            _shard_vocab(model.lm_head, comm)
        if model.logit_bias is not None:  # a bias on the LM head's rows is split like them
            first, count = comm.vocab_rows(model.logit_bias.shape[0])
            model.logit_bias = model.logit_bias[first:first + count].clone()
    elif model.embed_tokens is not None:  # an EAGLE head with its own embedding
        _shard_vocab(model.embed_tokens, comm)
    model.tp = comm
    return model
