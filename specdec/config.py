"""Model shapes and speculative configuration, validated on construction."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from specdec import defaults as D


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-architecture shape. Weights are seeded random unless loaded."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    max_position: int = 8192
    # RoPE frequency scaling as in a Hugging Face config (None: plain RoPE), e.g. {"rope_type":
    # "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    # "original_max_position_embeddings": 8192}. Kept out of the hash (a dict is unhashable).
    rope_scaling: dict | None = field(default=None, hash=False)
    # An additive bias on the LM head's logits, ((token id, value), ...): the harness's seam
    # models (`tiny+bias:0=9,319=7`) make the engine emit ids that rarely win otherwise.
    logit_bias: tuple = ()

    def __post_init__(self) -> None:
        for entry in self.logit_bias:
            tok, value = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, 0.0)
            if not (isinstance(tok, int) and 0 <= tok < self.vocab_size and math.isfinite(value)):
                raise ValueError(f"logit_bias entry {entry!r}: expected (token id in "
                                 f"[0, {self.vocab_size}), finite value)")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even (RoPE rotates pairs)")


MODEL_SHAPES: dict[str, ModelConfig] = {
    # CPU tests: two layers, GQA 4:2, untied head, a vocabulary that is no power of two.
    "tiny": ModelConfig(vocab_size=320, hidden_size=64, intermediate_size=128, num_layers=2,
                        num_heads=4, num_kv_heads=2, head_dim=16),
    # An odd vocabulary: tensor parallelism's vocab shards are uneven (161 + 160 rows).
    "tiny-odd": ModelConfig(vocab_size=321, hidden_size=64, intermediate_size=128, num_layers=2,
                            num_heads=4, num_kv_heads=2, head_dim=16),
    "tiny-tied": ModelConfig(vocab_size=320, hidden_size=64, intermediate_size=128, num_layers=2,
                             num_heads=4, num_kv_heads=2, head_dim=16, tie_word_embeddings=True),
    # Long-context tests, scaled down: llama3 RoPE scaling whose original length (128) the CPU
    # tier crosses within a few hundred positions, and room for the GPU tier's thousands.
    "tiny-long": ModelConfig(vocab_size=320, hidden_size=64, intermediate_size=128, num_layers=2,
                             num_heads=4, num_kv_heads=2, head_dim=16, max_position=8192,
                             rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 128}),
    "small": ModelConfig(vocab_size=4096, hidden_size=512, intermediate_size=1408, num_layers=4,
                         num_heads=8, num_kv_heads=4, head_dim=64),
    "llama-1b": ModelConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                            num_layers=16, num_heads=32, num_kv_heads=8, head_dim=64,
                            rope_theta=500000.0, tie_word_embeddings=True),
    "llama-8b": ModelConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                            num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
                            rope_theta=500000.0),
}


BIAS_SEP = "+bias:"


def is_shape_name(name: str) -> bool:
    """A shape name, plain or with a logit bias (`tiny+bias:0=9,319=7`)."""
    return name.partition(BIAS_SEP)[0] in MODEL_SHAPES


def model_config(name: str) -> ModelConfig:
    """A shape by name; `NAME+bias:ID=VALUE,...` adds a bias to those ids' logits."""
    base, sep, bias = name.partition(BIAS_SEP)
    if base not in MODEL_SHAPES:
        raise ValueError(f"unknown model shape {base!r}; known shapes: {sorted(MODEL_SHAPES)}")
    if not sep:
        return MODEL_SHAPES[base]
    entries = []
    for item in bias.split(","):
        tok, _, value = item.partition("=")
        try:
            entries.append((int(tok), float(value)))
        except ValueError:
            raise ValueError(f"model={name!r}: bias entry {item!r} is not ID=VALUE (an integer "
                             "token id and a number), as in 'tiny+bias:0=9,319=7'") from None
    if len({t for t, _ in entries}) != len(entries):
        raise ValueError(f"model={name!r}: a token id is biased twice")
    return replace(MODEL_SHAPES[base], logit_bias=tuple(entries))


DRAFT_SAMPLING = ("greedy", "probabilistic")


def max_draft_tokens(topk: int, num_steps: int) -> int:
    """The most tree nodes (root included) that topk and num_steps can produce."""
    return topk + (num_steps - 1) * topk * topk + 1


@dataclass(frozen=True, kw_only=True)
class SpecConfig:
    """EAGLE drafting: branching factor, draft depth and verify-tree size (root included).

    draft_sampling: "greedy" drafts the draft's top tokens; "probabilistic" samples a chain's
    drafts (topk 1) from the draft's filtered distribution q for sampled requests and accepts
    with probability min(1, p/q) (contract section 12). Trees keep the target-only rule."""

    topk: int = D.TOPK
    num_steps: int = D.NUM_STEPS
    num_draft_tokens: int = field(default=0)   # 0: num_steps + 1 for a chain
    draft_sampling: str = D.DRAFT_SAMPLING

    def __post_init__(self) -> None:
        if self.topk < 1:
            raise ValueError(f"topk={self.topk} must be >= 1")
        if self.num_steps < 1:
            raise ValueError(f"num_steps={self.num_steps} must be >= 1")
        ndt = self.num_draft_tokens or (self.num_steps + 1 if self.topk == 1 else 0)
        if ndt == 0:
            raise ValueError(f"num_draft_tokens must be given when topk={self.topk} > 1")
        object.__setattr__(self, "num_draft_tokens", ndt)
        if self.topk == 1 and ndt != self.num_steps + 1:
            raise ValueError(
                f"num_draft_tokens={ndt} must equal num_steps + 1 = {self.num_steps + 1} when topk == 1"
            )
        top = max_draft_tokens(self.topk, self.num_steps)
        if not 2 <= ndt <= top:
            raise ValueError(
                f"num_draft_tokens={ndt} is not in [2, {top}] (topk={self.topk}, "
                f"num_steps={self.num_steps} give at most topk + (num_steps-1)*topk^2 + 1 = {top})"
            )
        if self.draft_sampling not in DRAFT_SAMPLING:
            raise ValueError(f"draft_sampling={self.draft_sampling!r}: expected one of "
                             f"{list(DRAFT_SAMPLING)}")
        if ndt > 64:
            raise ValueError(f"num_draft_tokens={ndt} exceeds the supported maximum of 64")

    @property
    def ndt(self) -> int:
        return self.num_draft_tokens

    @property
    def probabilistic(self) -> bool:
        """Sampled requests draft by sampling (chains only; trees draft their top tokens)."""
        return self.draft_sampling == "probabilistic" and self.topk == 1

    def check_vocab(self, vocab_size: int) -> None:
        if self.topk > vocab_size:
            raise ValueError(f"topk={self.topk} exceeds the vocabulary size {vocab_size}")
