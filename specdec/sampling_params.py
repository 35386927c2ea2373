"""Per-request sampling parameters (the seam between the request lifecycle and acceptance)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 is greedy (top_k/top_p/seed are then ignored). top_k 0 keeps the whole
    vocabulary; top_p 1.0 keeps all mass. `seed` makes a sampled request reproducible whatever
    else shares its batch; None derives one from the engine seed and the request id.
    Generation stops after max_new_tokens or at the first token in stop_token_ids (kept)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)
                and self.temperature >= 0):
            raise ValueError(f"temperature={self.temperature!r} must be a finite number >= 0")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k={self.top_k!r} must be an integer >= 0 (0: no top-k cut)")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p={self.top_p!r} must be in (0, 1]")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"seed={self.seed!r} must be None or an integer >= 0")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def check_vocab(self, vocab_size: int) -> None:
        if self.top_k > vocab_size:
            raise ValueError(f"top_k={self.top_k} exceeds the vocabulary size {vocab_size}")
        for t in self.stop_token_ids:
            if not 0 <= t < vocab_size:
                raise ValueError(f"stop token {t} is outside the vocabulary [0, {vocab_size})")


GREEDY = SamplingParams()
