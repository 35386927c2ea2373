"""Continuous batching: a waiting queue, a running batch, admission, retraction, finishing.

One `step()`: admit waiting requests (first come, first served) while the next round still
fits the free KV pages, prefill them, then run one speculative round (or plain decode step)
over every running request. Requests finish at different steps and leave; new ones join at
any step. When the running requests grow past the free pages, the newest are retracted
(SGLang-style): pages and request row released, committed tokens kept, and they go back to
the front of the waiting queue; on readmission the prefill runs over prompt + committed
output, with the pending bonus token kept pending, which rebuilds target KV, draft KV and
the draft's carried state.

Overlap (`Engine(overlap=True)`, contract section 10): step() launches round i+1, then
resolves round i (waits for its results, appends tokens, finishes requests). A request that
finished in round i has already been launched into round i+1: those tokens are discarded,
and its pages and request row are released when round i+1 resolves (`deferred`), never while
a round that may write them is in flight. Retraction first resolves the round in flight.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from specdec import faults
from specdec.memory.allocator import OutOfSlots
from specdec.request import Req


@dataclass
class RequestOutput:
    rid: int
    prompt: list[int]
    tokens: list[int]            # generated so far; final when finish_reason is set
    finish_reason: str | None    # None while live, else "length", "stop" or "abort"
    accept_lens: list[int] = field(default_factory=list)  # per resolved speculative round


def _output(req: Req, reason: str | None) -> RequestOutput:
    return RequestOutput(req.rid, list(req.prompt), req.visible_output(), reason,
                         list(req.accept_lens))


class Scheduler:
    def __init__(self, engine) -> None:
        self.e = engine
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.live: dict[int, Req] = {}                  # waiting or running, by rid
        self.finished: dict[int, RequestOutput] = {}    # finished or aborted, by rid
        self.retractions = 0
        self.inflight = None      # overlap: the launched round not yet resolved (InFlight)
        self.deferred: list[Req] = []   # finished or aborted, pages held for the round in flight
        self._insert: set[int] = set()  # deferred rids whose committed pages go to the prefix tree

    # -- entry points -----------------------------------------------------------------------
    def add(self, req: Req) -> None:
        self.waiting.append(req)
        self.live[req.rid] = req  # rids grow with arrival (Engine._submit): newest = largest

    def abort(self, rid: int) -> RequestOutput:
        """Drop a waiting or running request; its output so far is returned (finish reason
        "abort"). An id that is unknown, or already finished or aborted (a second abort),
        raises ValueError and changes nothing. A running request's pages and row are free on
        return, except under overlap when it is in the round in flight: they are released
        when that round resolves (its tokens for the request are discarded); until then it
        is listed by `holding()` and the accounting counts its pages as held, not leaked."""
        req = self.live.pop(rid, None)
        if req is None:
            state = "already finished or aborted" if rid in self.finished else "unknown"
            raise ValueError(f"abort({rid!r}): no live request with that id ({state})")
        if req in self.running:
            self.running.remove(req)
            self._release(req)   # nothing enters the prefix tree
        else:
            self.waiting.remove(req)
        out = self.finished[rid] = _output(req, "abort")
        return out

    def step(self) -> list[RequestOutput]:
        """Admit, prefill, one round; returns the requests that finished in this step (under
        overlap: those whose finishing round resolved in it)."""
        done = self._admit()
        done += self._retract_until_fits()
        flight = None
        if self.running:
            flight = self.e.rounds.launch(self.running)
        if self.e.overlap:  # round i+1 is queued: now wait for round i
            flight, self.inflight = self.inflight, flight
        if flight is not None:
            self._resolve(flight)
            done += self._finish_done()
        return done

    def drain(self) -> list[RequestOutput]:
        """Resolve the round in flight (if any): afterwards the host is up to date and every
        deferred release is done. Returns the requests that finished."""
        flight, self.inflight = self.inflight, None
        if flight is None:
            return []
        self._resolve(flight)
        return self._finish_done()

    def holding(self) -> list[Req]:
        """Requests that own pages now: the running ones and the deferred releases."""
        return self.running + self.deferred

    # -- a round's results -----------------------------------------------------------------
    def _resolve(self, flight) -> None:
        def apply(r: Req, advance: int, tokens: list[int]) -> bool:
            # Finished or aborted in an earlier round: this round ran for nothing.
            if r.rid not in self.live and not faults.on("overlap_finish_late_tokens"):
                return False
            return self.e.rounds.commit(r, advance, tokens)

        self.e.rounds.resolve(flight, apply)
        for r in [r for r in self.deferred if not r.unresolved]:
            self.deferred.remove(r)
            self.e.memory.release(r, insert=r.rid in self._insert)
            self._insert.discard(r.rid)

    def _release(self, req: Req, insert: bool = False) -> None:
        """Pages and row back now, or once the round in flight that runs `req` resolves
        (only then may its committed pages enter the prefix tree: no round writes them)."""
        if req.unresolved:
            self.deferred.append(req)
            if insert:
                self._insert.add(req.rid)
        else:
            self.e.memory.release(req, insert)

    # -- admission and retraction -----------------------------------------------------------
    def _round_pages(self, reqs: list[Req]) -> int:
        """Pages `reqs` still need for the next round, beyond what they own."""
        ends = self.e.rounds.reserve_ends(reqs)
        return sum(self.e.memory.pages_needed(r, end) for r, end in zip(reqs, ends))

    def _admit(self) -> list[RequestOutput]:
        mem = self.e.memory
        need = self._round_pages(self.running)
        new: list[Req] = []
        # First come, first served: stop at the first request that does not fit (no skipping,
        # so a long request is not starved by short ones behind it). Admit only what the next
        # round can also run, or the newcomer would be retracted right away. Free pages
        # include what the prefix tree can give back (mem.available).
        while self.waiting and len(self.holding()) + len(new) < self.e.max_batch:
            head = self.waiting[0]
            if mem.prefix is not None:
                mem.prefix.lock(head)  # its shared prefix pages: locked, no longer evictable
            end = self.e.rounds.step_ends([len(head.prefill_tokens)])[0]
            pages = mem.pages_needed(head, end)  # beyond the shared pages, if any
            if need + pages > mem.available:
                if mem.prefix is not None:
                    mem.prefix.unlock(head)  # a waiting request holds nothing
                break
            need += pages
            new.append(self.waiting.popleft())
        free = mem.available
        if not new:
            if self.waiting and not self.running and not self.deferred:  # add_request refuses
                # what cannot fit alone; deferred pages come back when the round in flight resolves
                raise OutOfSlots(f"request {self.waiting[0].rid} cannot be admitted into an "
                                 f"empty batch ({free} pages free)")
            return []
        for r in new:
            mem.admit(r)
        self.running.extend(new)
        self.e.rounds.prefill(new)
        return self._finish_done()  # max_new_tokens 1, or a stop token first

    def _retract_until_fits(self) -> list[RequestOutput]:
        done = []
        free = self.e.memory.available
        while self.running and self._round_pages(self.running) > free:
            if self.inflight is not None:  # resolve first: exact lengths, deferred pages back
                done += self.drain()
                free = self.e.memory.available
                continue
            if len(self.running) == 1:  # add_request refuses what cannot fit alone
                raise OutOfSlots(f"request {self.running[0].rid} cannot run its next round "
                                 f"even alone: {self._round_pages(self.running)} pages needed, "
                                 f"{free} free")
            victim = max(self.running, key=lambda r: r.rid)  # the newest arrival
            self.running.remove(victim)
            # Output (committed tokens + pending bonus) is kept; its committed pages may go to
            # the prefix tree so that it hits its own prefix when it resumes.
            self.e.memory.release(victim, insert=self.e.prefix_on_retract)
            self.waiting.appendleft(victim)  # retracted newest first: the oldest ends up first
            self.retractions += 1
            free = self.e.memory.available
        return done

    def _finish_done(self) -> list[RequestOutput]:
        out = []
        for r in [r for r in self.running if r.done]:
            if self.e.recorder is not None:
                self.e.recorder.on_finish(self.e, [r])  # snapshot KV before the pages go
            self.running.remove(r)
            self._release(r, insert=True)  # committed pages enter the prefix tree
            del self.live[r.rid]
            out.append(_output(r, r.finish()[0]))
            self.finished[r.rid] = out[-1]
        return out

    def output(self, rid: int) -> RequestOutput:
        if rid in self.live:
            return _output(self.live[rid], None)
        if rid in self.finished:
            return self.finished[rid]
        raise ValueError(f"output({rid!r}): unknown request id")
