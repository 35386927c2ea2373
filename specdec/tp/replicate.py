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

from specdec import faults


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
            "deferred": [r.rid for r in s.deferred],
            "prefix_refs": (sorted(engine.memory.prefix.page_refs().items())
                            if engine.memory.prefix is not None else None),
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


def _peer_gone(exc: BaseException) -> bool:
    """A collective that failed because another rank ended (gloo: the peer closed or reset
    the connection; NCCL: the communicator was aborted)."""
    import torch.distributed as dist
    text = str(exc)
    return isinstance(exc, dist.DistError) or any(
        m in text for m in ("closed by peer", "Connection reset", "Broken pipe", "gloo",
                            "NCCL", "abort", "not been initialized"))


def replicated(method=None, *, validate: str | None = None):
    """Rank 0: send the call to every worker, run it here, then (tp_check) compare states.
    A worker, or a nested call, runs it locally. `validate`: the name of the method's input
    checks, run on rank 0 before anything is sent: bad input raises there, and the workers
    never see it (a worker's failure ends the group, see specdec/tp/group.py)."""
    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            group = getattr(self, "tp_group", None)
            if group is None or group.executing:
                return method(self, *args, **kwargs)
            if validate is not None:
                getattr(self, validate)(*args, **kwargs)
            return run_everywhere(self, group, method, args, kwargs)
        return call
    return wrap if method is None else wrap(method)


def run_everywhere(engine, group, method, args, kwargs):
    group.check_alive()
    group.use()
    check = engine.tp_check
    group.executing = True
    try:
        group.send(("call", method.__name__, args, kwargs, check, sorted(faults.enabled())))
        result = method(engine, *args, **kwargs)
        replies = collect(group, ("ok", state_digest(engine, result) if check else None, None))
    except TPDivergence:
        group.alive = False  # the ranks disagree
        raise
    except Exception as exc:
        raise _worker_cause(group, exc) from exc
    finally:
        group.executing = False
    check_replies(replies, replies[0][1])
    return result


def _worker_cause(group, exc: Exception) -> Exception:
    """Rank 0's exception while running a call, or the worker failure behind it: a worker
    that ended or hung makes rank 0's collectives fail with transport errors, which say
    nothing of it (the TPWorkerError names the rank, how it ended, its last words)."""
    from specdec.tp.workers import TPWorkerError
    group.alive = False  # a rank failed mid-call: the ranks no longer agree
    if isinstance(exc, TPWorkerError):
        return exc
    watched = group.failed is not None  # seen by rank 0's watchdog before this failed
    err = group.worker_failure(wait_s=2.0)
    if err is None:
        return exc
    if _peer_gone(exc) or watched:
        group.reported = True
        return TPWorkerError(str(err))
    exc.add_note(f"and on a worker: {str(err).splitlines()[0]}")
    return exc


def each_rank(engine, fn, *args) -> list:
    """fn(engine_of_rank_r, *args) on every rank (fn: a module-level function, pickled to
    the workers); the results in rank order. Harness probes: KV shards, accounting."""
    if engine.tp_group is None:
        return [fn(engine, *args)]
    return on_every_rank(engine.tp_group, engine, fn, *args)


def on_every_rank(group, engine, fn, *args) -> list:
    """fn(this rank's engine or None, *args) on every rank of `group`, in rank order."""
    group.check_alive()
    group.use()
    group.executing = True
    try:
        group.send(("each", fn, args))
        mine = fn(engine, *args)
        return check_replies(collect(group, ("ok", None, mine)), None)
    except TPDivergence:
        group.alive = False
        raise
    except Exception as exc:
        raise _worker_cause(group, exc) from exc
    finally:
        group.executing = False


def collect(group, mine) -> list:
    """Every rank's reply; a worker that ended or hung instead is raised here as the
    TPWorkerError that names it, and the group is marked broken."""
    try:
        return group.replies(mine)
    except Exception as exc:
        raise _worker_cause(group, exc) from exc


def agree(group, what: tuple) -> None:
    """Every rank's decision `what` equals rank 0's, before the collectives that need it."""
    out = group.replies(what)
    for rank, theirs in enumerate(out[1:], start=1):
        if theirs != out[0]:
            raise TPDivergence(f"tp rank {rank} would run {theirs}, rank 0 runs {out[0]}: "
                               "ranks must pad to the same bucket and replay or run eager alike")
