"""What the phases of a round are handed instead of the engine: a model with the backend over
its KV pool, where each request's KV lives, and the observers attached from outside."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ModelKV:
    """A model and the attention backend over its own KV pool (`backend.pool`): what a
    forward of that model reads and writes besides its inputs."""

    model: torch.nn.Module
    backend: object  # specdec.attention.backend.AttentionBackend


@dataclass(frozen=True)
class Paging:
    """Where every request's KV lives, the same in the target and the draft pool (contract
    section 1): req_to_token maps (request row, position) to a slot; page_size is how a
    page-granular reader sees it."""

    req_to_token: torch.Tensor  # int32 [max_reqs + 1, max_context]
    page_size: int

    @property
    def device(self) -> torch.device:
        return self.req_to_token.device


class Hooks:
    """The engine's observers, attached at any time after construction, so the phases hold
    this object and read it at each call: the harness's trace recorder (specdec/trace.py)
    and the bench's phase timer (specdec/phase_timer.py). None, the default, costs nothing."""

    def __init__(self) -> None:
        self.recorder = None
        self.phase_timer = None


class HookAttribute:
    """An attribute of the engine read and set through its `hooks` (engine.recorder = ...)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj.hooks, self.name)

    def __set__(self, obj, value) -> None:
        setattr(obj.hooks, self.name, value)
