"""Llama building blocks: RMSNorm, rotary embedding, SwiGLU MLP.

Elementwise work runs in fused Triton kernels on CUDA and in their torch references
elsewhere (the CPU tier), as SGLang's CustomOp picks forward_cuda or forward_native: same
signatures, same results within rounding (kernels/ tests each pair).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kernels.activation import silu_mul, silu_mul_ref
from kernels.norm import rms_norm, rms_norm_ref


def on_device(x: torch.Tensor, triton_fn, ref_fn):
    """The Triton kernel for CUDA tensors, the torch reference otherwise."""
    return triton_fn if x.is_cuda else ref_fn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """norm(x); with `residual`, (norm(x + residual), x + residual) in one pass: the
        residual add of a layer fused into the next norm. Normalised in fp32, scaled in the
        input dtype, as transformers' LlamaRMSNorm does (kernels/norm.py)."""
        return on_device(x, rms_norm, rms_norm_ref)(x, self.weight, self.eps, residual)


def fuse_linears(*linears: nn.Linear) -> torch.Tensor:
    """One [sum(out), in] weight for projections of the same input, so one GEMM reads them all.
    Each Linear keeps its own parameter (names, state_dict, loading unchanged), now a view of
    the fused tensor: in-place writes to either stay visible to both."""
    fused = torch.cat([lin.weight.detach() for lin in linears], 0)
    start = 0
    for lin in linears:
        n = lin.weight.shape[0]
        lin.weight.data = fused[start:start + n]
        start += n
    return fused


def fused_weight(fused: torch.Tensor | None, first: nn.Linear) -> torch.Tensor | None:
    """`fused` if the Linears still view it (a later `.to()` gives them new storage: then
    None, and the caller runs the projections one by one)."""
    if fused is not None and first.weight.data_ptr() == fused.data_ptr() \
            and first.weight.device == fused.device:
        return fused
    return None


class RotaryEmbedding(nn.Module):
    """cos/sin tables for every position. The attention backend rotates q and k at the batch's
    positions, fused with the KV store (kernels/rope.py)."""

    def __init__(self, head_dim: int, max_position: int, theta: float,
                 inv_freq: torch.Tensor | None = None) -> None:
        super().__init__()
        if inv_freq is None:
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        t = torch.arange(max_position, dtype=torch.float64)
        freqs = torch.outer(t, inv_freq.double())
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("cos", emb.cos().float(), persistent=False)
        self.register_buffer("sin", emb.sin().float(), persistent=False)

    @classmethod
    def for_config(cls, cfg) -> "RotaryEmbedding":
        """The tables a ModelConfig asks for: its theta, its rope_scaling (llama3, linear)."""
        return cls(cfg.head_dim, cfg.max_position, cfg.rope_theta,
                   rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling))


ROPE_TYPES = ("default", "linear", "llama3")


def rope_inv_freq(head_dim: int, theta: float, scaling: dict | None) -> torch.Tensor:
    """Inverse frequencies [head_dim/2] (float64), scaled as transformers' rope_type says."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / float(scaling["factor"])
    if kind == "llama3":
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f"rope_scaling rope_type={kind!r} is not supported; expected one of "
                     f"{list(ROPE_TYPES)}")


class MLP(nn.Module):
    tp = None  # a TPComm once sharded (specdec/tp/shard.py): down_proj row-parallel

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.gate_up_weight: torch.Tensor | None = None  # fuse_weights(): [2I, H]

    def fuse_weights(self) -> None:
        if fused_weight(self.gate_up_weight, self.gate_proj) is None:
            self.gate_up_weight = fuse_linears(self.gate_proj, self.up_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = fused_weight(self.gate_up_weight, self.gate_proj)
        if w is None:
            gate_up = torch.cat([self.gate_proj(x), self.up_proj(x)], dim=-1)
        else:
            gate_up = F.linear(x, w)
        # Sharded, this is the rank's partial sum: the caller reduces it, with the norm
        # after it where there is one (reduce_norm).
        return self.down_proj(on_device(x, silu_mul, silu_mul_ref)(gate_up))


def reduce_norm(tp, norm: RMSNorm, x: torch.Tensor, residual: torch.Tensor | None):
    """`norm(x, residual)` where `x` is a row-parallel projection's output: on a TP rank (tp
    a TPComm) its partial sum, all-reduced first, fused with the add and the norm where the
    all-reduce path allows it (specdec/tp/comm.py). Returns (normed, stream)."""
    if tp is None:
        return (norm(x), x) if residual is None else norm(x, residual)
    return tp.all_reduce_norm(x, residual, norm.weight, norm.eps)


def reduced(tp, x: torch.Tensor) -> torch.Tensor:
    """A row-parallel projection's output summed over the ranks (x itself without TP)."""
    return x if tp is None else tp.all_reduce(x)
