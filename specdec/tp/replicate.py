"""How rank 0's engine runs on every rank: each call that changes engine state (generate,
add_request, step, abort) is sent to the workers, which run the same call on identical
engines. The scheduler is the same deterministic code on every rank and reads the same
inputs: the calls, and the tokens, which are identical on every rank because the logits are
gathered to the full vocabulary and the coins are keyed by (seed, request, position). So
admissions, page allocations, retractions, padding and graph decisions are the same
everywhere without shipping them.

That rests on the ranks agreeing, so with `tp_check` it is checked: after each call every
rank's state digest (tokens, sequence lengths, rows, pages, the allocator, the call's
result) must equal rank 0's, and before each captured phase runs every rank's decision
(graph or eager, padded size) must equal rank 0's: a rank entering a collective with other
shapes would make gloo abort the process (or NCCL hang)."""
from __future__ import annotations

import functools


class TPDivergence(RuntimeError):
    """A worker rank's state or decision differs from rank 0's."""


def state_digest(engine, result=None) -> dict:
    """What must be identical on every rank after a call."""
    s = engine.scheduler
    alloc = engine.memory.allocator
    return {"running": [(r.rid, r.row, r.seq_len, list(r.output), list(r.pages))
                        for r in s.running],
            "waiting": [(r.rid, r.seq_len, list(r.output)) for r in s.waiting],
            "finished": sorted((rid, tuple(o.tokens), o.finish_reason)
                               for rid, o in s.finished.items()),
            "owner": list(alloc.owner), "free": sorted(alloc._free),
            "retractions": s.retractions, "stats": str(engine.stats), "result": repr(result)}


def _first_difference(a: dict, b: dict) -> str:
    for key in a:
        if a[key] != b.get(key):
            return f"{key}: rank 0 has {str(a[key])[:200]}, this rank {str(b.get(key))[:200]}"
    return "?"


def check_replies(replies: list, mine_digest) -> list:
    """Raise for a worker's error or a digest differing from rank 0's; the per-rank values."""
    for rank, (status, digest, _value) in enumerate(replies[1:], start=1):
        if status != "ok":
            raise TPDivergence(f"tp rank {rank} failed where rank 0 did not: {digest}")
        if mine_digest is not None and digest != mine_digest:
            raise TPDivergence(f"tp rank {rank} diverged from rank 0 after the call: "
                               + _first_difference(mine_digest, digest))
    return [v for _, _, v in replies]


def replicated(method):
    """Rank 0: send the call to every worker, run it here, then (tp_check) compare states.
    A worker, or a nested call, runs it locally."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        group = getattr(self, "tp_group", None)
        if group is None or group.executing:
            return method(self, *args, **kwargs)
        return run_everywhere(self, group, method, args, kwargs)
    return call


def run_everywhere(engine, group, method, args, kwargs):
    from specdec.tp.group import TPWorkerError
    check = engine.tp_check
    group.send(("call", method.__name__, args, kwargs, check))
    group.executing = True
    try:
        result = method(engine, *args, **kwargs)
        replies = group.replies(("ok", state_digest(engine, result) if check else None, None))
    except TPDivergence:
        group.alive = False  # the workers that disagreed have ended
        raise
    except Exception as exc:
        why = group.worker_failure(wait_s=2.0)
        if why is not None:  # the worker's failure is the cause; this rank's error follows it
            group.alive = False
            raise TPWorkerError(why) from exc
        raise
    finally:
        group.executing = False
    check_replies(replies, replies[0][1])
    return result


def each_rank(engine, fn, *args) -> list:
    """fn(engine_of_rank_r, *args) on every rank (fn: a module-level function, pickled to
    the workers); the results in rank order. Harness probes: KV shards, accounting."""
    group = engine.tp_group
    if group is None:
        return [fn(engine, *args)]
    group.send(("each", fn, args))
    try:
        mine = fn(engine, *args)
    except Exception:
        group.replies(("ok", None, None))
        raise
    return check_replies(group.replies(("ok", None, mine)), None)


def agree(group, what: tuple) -> None:
    """Every rank's decision `what` equals rank 0's, before the collectives that need it."""
    out = group.replies(what)
    for rank, theirs in enumerate(out[1:], start=1):
        if theirs != out[0]:
            raise TPDivergence(f"tp rank {rank} would run {theirs}, rank 0 runs {out[0]}: "
                               "ranks must pad to the same bucket and replay or run eager alike")
