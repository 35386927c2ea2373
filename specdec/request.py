"""A request's host-side state."""
from __future__ import annotations

from dataclasses import dataclass, field

from specdec import faults
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
    unresolved: int = 0   # launched rounds whose results the host has not read (overlap: 0 or 1)
    # Tokens committed by each of its resolved speculative rounds (accepted drafts + the bonus:
    # what Stats calls acceptance length), in round order; one int per request-round.
    accept_lens: list[int] = field(default_factory=list)
    # Prefix cache: the first cached_len // page_size pages are the tree's (shared, read-only)
    cached_len: int = 0                                # positions reused, not recomputed
    matched_len: int = 0                               # tokens the tree matched
    prefix_node: object = field(default=None, repr=False)  # the locked tree node

    @property
    def alloc_len(self) -> int:
        """Positions covered by owned pages (times page size: allocation is page aligned)."""
        return len(self.pages)

    @property
    def done(self) -> bool:
        return self.finish()[0] is not None

    def finish(self) -> tuple[str | None, int]:
        """(finish reason, visible length): ("stop", i + 1) at the first stop token i within
        max_new_tokens, else ("length", max_new_tokens) once that many exist, else (None, all).
        The stop check comes first: one round may accept a stop token and run past the cap."""
        n = len(self.output)
        if faults.on("finish_cap_before_stop") and n >= self.max_new_tokens:
            return "length", self.max_new_tokens  # SGLang #33758: the cap checked first
        i = self.stop_index()
        if i is not None:
            return "stop", i + 1
        return ("length", self.max_new_tokens) if n >= self.max_new_tokens else (None, n)

    def stop_index(self) -> int | None:
        """Index in output of the first stop token within max_new_tokens, else None."""
        stop = self.sampling.stop_token_ids
        if stop:
            for i, t in enumerate(self.output[:self.max_new_tokens]):
                if t in stop:
                    return i
        return None

    def visible_output(self) -> list[int]:
        """What the caller sees: at most max_new_tokens, cut just after the first stop token
        (tokens a round accepted past it are dropped)."""
        return self.output[:self.finish()[1]]

    @property
    def prefill_tokens(self) -> list[int]:
        """What a (re-)prefill runs over: the prompt, plus every committed output token when
        a retracted request resumes (the pending bonus output[-1] stays pending)."""
        return self.prompt + self.output[:-1]

    @property
    def pending_token(self) -> int:
        return self.output[-1]

    def all_tokens(self) -> list[int]:
        return self.prompt + self.output
