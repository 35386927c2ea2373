"""A drawn case's requests through an adapter: shape-checked runs, the plain continuation,
and the stop ids that engine_finish draws from a request's prompt and unstopped output. Here,
below the laws, because an adapter's recorded findings ask what a case draws (`CaseDraws`)
before the case runs."""
from __future__ import annotations

import random
from dataclasses import replace
from functools import cached_property

from harness.adapters.protocol import Completion, Request, check_completion
from harness.strategies.configs import STOP_PAST_CAP


def run(adapter, requests: list[Request], spec) -> list[Completion]:
    """The adapter's completions, shape-checked (a malformed one is an adapter error)."""
    outs = adapter.generate(list(requests), spec)
    if len(outs) != len(requests):
        raise ValueError(f"{adapter.name}: {len(outs)} completions for {len(requests)} requests")
    for r, c in zip(requests, outs):
        check_completion(r, c)
    return outs


def plain_continuation(adapter, requests: list[Request], extra: int = 0) -> list[Completion]:
    """Plain (non-speculative) decoding of the requests without stops, `extra` tokens past
    each cap."""
    return run(adapter, [replace(r, stop_token_ids=(), max_new_tokens=r.max_new_tokens + extra)
                         for r in requests], None)


def draw_stops(rng: random.Random, prompt, continuation: list[int], cap: int) -> tuple:
    """One to three stop ids: before the cap, first occurring past it, from the prompt, or
    absent from both (each kind when it exists)."""
    seen_before = set(continuation[:cap])
    kinds = {
        "before_cap": sorted(seen_before),
        "past_cap": sorted(set(continuation[cap:]) - seen_before),
        "prompt": sorted(set(prompt)),
        "absent": [t for t in range(max(continuation + list(prompt)) + 2)
                   if t not in continuation and t not in prompt][:4],
    }
    kinds = {k: v for k, v in kinds.items() if v}
    stops = set()
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(sorted(kinds))
        stops.add(rng.choice(kinds[kind]))
    return tuple(sorted(stops))


def unstopped(adapter, case, reqs) -> list:
    """What the stops are drawn from and the outputs compared with: the plain greedy
    continuation run STOP_PAST_CAP past each cap, or the same seeded speculative requests."""
    if case.temperature == 0:
        return plain_continuation(adapter, reqs, STOP_PAST_CAP)
    return run(adapter, reqs, case.spec_obj)


def drawn_stops(case, reqs, refs) -> list[tuple]:
    """Each request's stop ids, drawn from its prompt and its unstopped output `refs`."""
    rng = random.Random(case.seed ^ 0x5709)
    return [draw_stops(rng, r.prompt, c.tokens, r.max_new_tokens) for r, c in zip(reqs, refs)]


class CaseDraws:
    """What a case draws on an adapter, computed when first asked: its `requests` (made by
    `requests_for`) and the stop ids engine_finish draws for them (`stops`, which runs the
    adapter). A recorded finding's `matches(adapter, case, draws)` reads it."""

    def __init__(self, adapter, case, requests: list[Request]) -> None:
        self.adapter, self.case, self.requests = adapter, case, requests

    @cached_property
    def stops(self) -> list[tuple]:
        return drawn_stops(self.case, self.requests,
                           unstopped(self.adapter, self.case, self.requests))
