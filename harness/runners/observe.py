"""What `harness repro` prints of a failing example besides the law's message: the
observables the law judged. Every Engine built while the example runs is watched: its
configuration, each request it was given (prompt, sampling parameters, arrival step), what it
returned (tokens, finish reason), its statistics, and, where the law attached a trace
(specdec/trace.py), each round's committed lengths, drafts and accept lengths."""
from __future__ import annotations

import contextlib

MAX_REQUESTS = 12
MAX_ROUNDS = 12


class _Watched:
    def __init__(self, engine) -> None:
        self.engine, self.requests, self.steps = engine, [], 0


@contextlib.contextmanager
def engines_watched():
    """Within: every Engine constructed, its add_request and step calls, recorded (the
    engine's behaviour is untouched). Yields the list of watched engines."""
    from specdec.engine import Engine
    watched: list[_Watched] = []
    init, add, step = Engine.__init__, Engine.add_request, Engine.step

    def watched_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._watched = _Watched(self)
        watched.append(self._watched)

    def watched_add(self, prompt, *args, **kwargs):
        rid = add(self, prompt, *args, **kwargs)
        w = getattr(self, "_watched", None)
        if w is not None:
            w.requests.append((rid, list(prompt), args, kwargs, w.steps))
        return rid

    def watched_step(self):
        w = getattr(self, "_watched", None)
        if w is not None:
            w.steps += 1
        return step(self)

    Engine.__init__, Engine.add_request, Engine.step = watched_init, watched_add, watched_step
    try:
        yield watched
    finally:
        Engine.__init__, Engine.add_request, Engine.step = init, add, step


def describe(watched: list[_Watched]) -> str:
    """The observables of every watched engine, as text."""
    out = []
    for n, w in enumerate(watched):
        e = w.engine
        out.append(f"engine {n}: spec={e.spec} page_size={e.page_size} overlap={e.overlap} "
                   f"cuda_graph={e.cuda_graph} device={e.device} stats={e.stats}")
        for rid, prompt, args, kwargs, step in w.requests[:MAX_REQUESTS]:
            try:
                o = e.output(rid)
                got = f"-> {o.tokens} ({o.finish_reason})"
            except Exception as exc:  # noqa: BLE001 - a request the engine lost says so
                got = f"-> no output ({type(exc).__name__}: {exc})"
            params = [*args, *(f"{k}={v}" for k, v in kwargs.items())]
            out.append(f"  request {rid} at step {step}: prompt {prompt} {params} {got}")
        if len(w.requests) > MAX_REQUESTS:
            out.append(f"  ... {len(w.requests) - MAX_REQUESTS} more requests")
        rounds = getattr(getattr(e, "recorder", None), "rounds", None) or []
        for i, r in enumerate(rounds[:MAX_ROUNDS]):
            fields = {k: getattr(r, k) for k in ("seq_lens", "draft_tokens", "accept_lens")
                      if getattr(r, k, None) is not None}
            out.append(f"  round {i}: " + " ".join(f"{k}={v.tolist()}" for k, v in
                                                    fields.items()))
        if len(rounds) > MAX_ROUNDS:
            out.append(f"  ... {len(rounds) - MAX_ROUNDS} more rounds")
    return "\n".join(out)
