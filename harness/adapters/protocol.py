"""The engine adapter protocol: what the harness needs from a speculative engine to check it.

Write one class, register it, and every law your engine can serve runs against it
(`python -m harness check --engine yours`, `pytest --engine yours`). docs/adapters.md walks
through the worked example (harness/adapters/transformers_assisted.py).

What you map
------------
`generate(requests, spec)` runs a batch of `Request`s and returns one `Completion` each, in
order. A request is: prompt token ids, `max_new_tokens`, `stop_token_ids` (generation ends
at the first one produced, which is kept), `temperature` (0 = greedy) / `top_k` (0 = whole
vocabulary) / `top_p` (1.0 = all mass), filtered in that order, and `seed` (the request's own
random stream; `None` only for greedy). `spec` holds the speculative knobs: `drafter` (the
draft: your engine's names, plus "self" = the target drafts for itself when you declare
SELF_DRAFT), `draft_length` (tokens drafted per round, or the tree depth), `topk`
(branching; 1 = a chain), and `extra` (your own knobs, as (name, value) pairs). `spec=None`
asks for plain, non-speculative decoding of the same target. A completion is the generated
tokens (prompt excluded, stop token kept) and `finish_reason`: "stop" when it ends with a stop
token, "length" when it has `max_new_tokens` tokens.

`spec_space(**fixed)` returns a Hypothesis strategy of the `Spec`s your engine accepts, every
knob you want drawn as an axis; a law may fix some fields (`drafter="self"`, `topk=1`).
`settings` is a dict (JSON) of what the harness may draw about the engine itself besides
the spec (for example the dtype); `build(device, **settings)` rebuilds the adapter from it,
so that a failure replays from one printed line.

What you declare
----------------
`observables`: a set of `Observable`s, what your engine lets the harness see beyond tokens
and finish reasons. Each law names the observables it needs (its `NEEDS`); a law your adapter
cannot serve is reported as "not applicable: needs X", never as passed.

- ACCEPT_LENGTHS: every completion carries `rounds`, one `Round(start, drafted, accepted)`
  per speculative round the request took part in: the output tokens it had before the
  round, the drafts proposed along the verified path, and how many of them were accepted
  (the bonus / corrected token is not counted).
- TARGET_LOGITS: `target_logits(tokens)` returns the target model's logits (or
  log-probabilities: the laws only use softmax and top-2 margins, both shift invariant) after
  each prefix of `tokens`, a float tensor [len(tokens), vocab]; completions may also carry
  `logits` [len(tokens), vocab], the target's logits at each emitted position.
- SELF_DRAFT: `Spec(drafter="self")` makes the target draft for itself.
- BATCHING: `max_batch > 1`; a batch's requests do not influence each other.
- PLAIN_GREEDY: `generate(requests, None)` decodes greedily without speculation (the
  reference of the lossless and finish laws).
- SEEDED: the engine promises that a sampled request's tokens depend only on the request
  (prompt, knobs, seed) and the spec, not on earlier calls or (with BATCHING) its batch.
- PREFIX_STABLE_SAMPLING: each sampled draw is keyed by (seed, position), so a seeded
  request's tokens do not depend on its stop ids or its max_new_tokens: a request that stops
  early is the unstopped one cut (the finish law's sampled requests need it).
- WHITE_BOX: specdec's per-forward trace and KV pools (the structure, KV-content, graph,
  overlap, prefix-cache and TP laws). Only harness/adapters/specdec_engine.py has it.

Known findings: `known` (optional) lists the violations already found in your engine and
recorded (docs/findings/, each with an xfail(strict=True) regression test). The laws draw
around a known finding's cases, so that CI stays green until upstream fixes it (the strict
xfail then fails, and the entry is removed); SPECDEC_KNOWN_FINDINGS=include draws them too
(`python -m harness check --with-known`). A finding holds in some versions of an engine only:
`Known.versions` names those it was reproduced on, and an adapter lists in `known` only the
entries for the version it runs, so that on the others the laws draw those cases again.

Errors: raise ValueError naming the value and what is allowed for a request or spec your
engine refuses; the harness only draws what `spec_space` and `max_batch` allow.
"""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch


class Observable(str, enum.Enum):
    ACCEPT_LENGTHS = "accept_lengths"
    TARGET_LOGITS = "target_logits"
    SELF_DRAFT = "self_draft"
    BATCHING = "batching"
    PLAIN_GREEDY = "plain_greedy"
    SEEDED = "seeded"
    PREFIX_STABLE_SAMPLING = "prefix_stable_sampling"
    WHITE_BOX = "white_box"


@dataclass(frozen=True)
class Request:
    prompt: tuple[int, ...]
    max_new_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if not self.prompt:
            raise ValueError("prompt=(): a request needs at least one prompt token")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={self.max_new_tokens!r}: expected an integer >= 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ValueError(f"temperature={self.temperature}, top_k={self.top_k}, "
                             f"top_p={self.top_p}: need temperature >= 0, top_k >= 0, "
                             "0 < top_p <= 1")
        if self.temperature > 0 and self.seed is None:
            raise ValueError("a sampled request (temperature > 0) needs a seed")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Spec:
    drafter: str = "default"
    draft_length: int | None = None
    topk: int | None = None
    extra: tuple = ()  # ((name, value), ...): the engine's own knobs

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", tuple(tuple(kv) for kv in self.extra))

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.extra).get(name, default)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Round:
    start: int     # output tokens the request had before this round
    drafted: int   # drafts proposed along the verified path this round
    accepted: int  # of those, accepted (the bonus / corrected token not counted)


@dataclass
class Completion:
    tokens: list[int]
    finish_reason: str                  # "stop" or "length"
    rounds: list[Round] | None = None   # ACCEPT_LENGTHS
    logits: torch.Tensor | None = None  # TARGET_LOGITS: [len(tokens), vocab] at emitted positions


@dataclass(frozen=True)
class Known:
    """A recorded violation: which laws it breaks, where it is written up, and which drawn
    cases hit it (`matches(adapter, case, draws)`, evaluated before the case runs; `draws`
    is what the case draws: its requests, the stops engine_finish draws,
    harness/strategies/engine_runs.py), and on which versions of the engine it was
    reproduced (None: not tied to a version)."""
    id: str
    laws: tuple[str, ...]
    doc: str                      # docs/findings/<id>.py
    matches: Any                  # (adapter, EngineCase, CaseDraws) -> bool
    versions: frozenset[str] | None = None

    def holds_on(self, version: str) -> bool:
        return self.versions is None or version in self.versions


@runtime_checkable
class Adapter(Protocol):
    name: str                           # the --engine name
    observables: frozenset[Observable]
    vocab_size: int
    max_batch: int                      # 1 without BATCHING
    device: str
    settings: dict                      # JSON: build(device, **settings) rebuilds this adapter
    dtype: torch.dtype                  # the target's: sets the tie margin (harness ties)
    why_not: dict                       # Observable -> why this engine does not offer it
    known: tuple                        # Known findings (optional)

    @classmethod
    def build(cls, device: str, **settings) -> "Adapter": ...

    @classmethod
    def settings_space(cls, device: str): ...  # a strategy of `settings` dicts to draw

    def version(self) -> str: ...

    def spec_space(self, **fixed): ...  # a Hypothesis strategy of Spec

    def generate(self, requests: list[Request], spec: Spec | None) -> list[Completion]: ...

    def target_logits(self, tokens: list[int]) -> torch.Tensor: ...  # TARGET_LOGITS


def check_completion(req: Request, c: Completion) -> None:
    """Shape checks every law relies on (a malformed completion is an adapter bug, reported
    as such rather than as a law violation)."""
    if not isinstance(c.tokens, list) or any(not isinstance(t, int) for t in c.tokens):
        raise TypeError(f"Completion.tokens must be a list of int, got {c.tokens!r}")
    if c.finish_reason not in ("stop", "length"):
        raise ValueError(f"finish_reason={c.finish_reason!r}: expected 'stop' or 'length'")

