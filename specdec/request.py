"""A request's host-side state."""
from __future__ import annotations

from dataclasses import dataclass, field

from specdec.sampling_params import GREEDY, SamplingParams


@dataclass
class Req:
    rid: int
    prompt: list[int]
    max_new_tokens: int
    sampling: SamplingParams = GREEDY
    row: int = -1                                      # req_pool_idx
    seq_len: int = 0                                   # committed target KV length
    output: list[int] = field(default_factory=list)    # output[-1] is the pending bonus token
    pages: list[int] = field(default_factory=list)     # owned KV pages, in position order

    @property
    def alloc_len(self) -> int:
        """Positions covered by owned pages (times page size: allocation is page aligned)."""
        return len(self.pages)

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new_tokens

    @property
    def pending_token(self) -> int:
        return self.output[-1]

    def all_tokens(self) -> list[int]:
        return self.prompt + self.output
