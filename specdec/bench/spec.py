"""`python -m specdec bench spec`: one speculative round, phase by phase, in decode steps.

Phases come from the engine's phase-timer hook (specdec/phase_timer.py): draft decode,
verify (tree build + the verify forward), accept and compaction, draft extend; "host" is the
rest of the round's wall time (reservation, tensor building, bookkeeping, launch gaps not
inside a phase). The round's cost is divided by one graph decode step of the same target
and batch, measured in the same run: that quotient is the break-even mean acceptance length
(plain decode commits one token per step).
"""
from __future__ import annotations

import time

from specdec import Engine, SpecConfig
from specdec.bench.common import (e2e_rows, engine_step_ms, fast_weights, free, live_batch,
                                  median, sync, time_ms)
from specdec.engine import DTYPES
from specdec.phase_timer import PHASES, PhaseTimer
from specdec.rounds import RoundRunner
from specdec.validate import reserve_margin

DEFAULT_CONFIGS = [(1, 3, 4), (4, 4, 8)]  # (topk, num_steps, ndt)


def parse_configs(text: str) -> list[tuple[int, int, int]]:
    """"1,3,4;4,4,8" -> [(1, 3, 4), (4, 4, 8)]."""
    return [tuple(int(x) for x in c.split(",")) for c in text.split(";") if c.strip()]


def decode_step_ms(model, *, device, dtype, batch_sizes, context, iters,
                   warmup) -> dict[int, float]:
    """The graph decode step of the plain target, per batch size (the round's unit)."""
    with fast_weights(device, DTYPES[dtype]):
        eng = Engine(model=model, spec=None, device=device, dtype=dtype,
                     max_batch=max(batch_sizes), max_context=context + warmup + iters + 8)
    graph = RoundRunner(eng, True, batch_sizes, False)
    graph.capture_all()  # none inside a timing
    eng.rounds = graph
    out = {}
    for bs in batch_sizes:
        with live_batch(eng, bs, context) as reqs:
            out[bs] = median(time_ms(lambda: graph.decode_step(reqs), device, iters, warmup))
    return out


def _rounds(eng, reqs, device, iters, warmup) -> tuple[list[float], list[dict]]:
    """Wall ms of each timed round and its phase breakdown."""
    for _ in range(warmup):
        eng.rounds.spec_round(reqs)
    timer, walls = PhaseTimer(device), []
    eng.phase_timer = timer
    try:
        for _ in range(iters):
            sync(device)
            t0 = time.perf_counter()
            eng.rounds.spec_round(reqs)
            sync(device)
            walls.append((time.perf_counter() - t0) * 1e3)
    finally:
        eng.phase_timer = None
    return walls, timer.rounds()


def _phase_row(model, *, bs, cfg, walls, phases, step_ms, accept_len, context, iters) -> dict:
    """The phase row of one (model, bs, config), printed as one line."""
    topk, steps, ndt = cfg
    round_ms = median(walls)
    ph = {p: median([r.get(p, 0.0) for r in phases]) for p in PHASES}
    # Medians do not add: host is what makes the stacked bar the median round.
    ph["host"] = round_ms - sum(ph.values())
    row = {"model": model, "bs": bs, "topk": topk, "num_steps": steps, "ndt": ndt,
           "round_ms": round_ms, "phases_ms": ph, "decode_step_ms": step_ms,
           "round_in_decode_steps": round_ms / step_ms,
           "break_even_acceptance_length": round_ms / step_ms,
           "mean_acceptance_length_random_weights": accept_len,
           "context": context, "rounds_timed": iters}
    parts = " ".join(f"{k}={v:.3f}" for k, v in ph.items())
    print(f"{model:>9} bs={bs:<3} topk={topk} steps={steps} ndt={ndt}: round "
          f"{round_ms:.3f} ms = {row['round_in_decode_steps']:.2f} decode steps "
          f"(break-even acceptance {row['break_even_acceptance_length']:.2f}) [{parts}]",
          flush=True)
    return row


def _engine_step_rows(eng, *, model, bs, cfg, step_ms, context, iters, warmup) -> list[dict]:
    """The round through `Engine.step()`, synchronous and with overlap scheduling."""
    topk, steps, ndt = cfg
    out = []
    for name, ov in (("engine-step", False), ("overlap", True)):
        ms = engine_step_ms(eng, bs=bs, prompt_len=context, iters=iters, warmup=warmup, overlap=ov)
        out.append({"model": model, "bs": bs, "topk": topk, "num_steps": steps,
                    "ndt": ndt, "impl": name, "round_ms": ms,
                    "round_in_decode_steps": ms / step_ms})
        print(f"{model:>9} bs={bs:<3} topk={topk} steps={steps} ndt={ndt}: {name} "
              f"{ms:.3f} ms = {ms / step_ms:.2f} decode steps", flush=True)
    return out


def _bench_config(model, *, cfg, device, dtype, batch_sizes, step_ms, context, iters,
                  warmup) -> tuple[list[dict], list[dict]]:
    """One (model, config) at every batch size: phase rows and engine-step rows."""
    topk, steps, ndt = cfg
    spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
    # Every round may commit num_steps + 1 tokens.
    ctx = context + (warmup + iters) * (steps + 1) + reserve_margin(spec, 1) + 8
    with fast_weights(device, DTYPES[dtype]):
        eng = Engine(model=model, spec=spec, draft="eagle", device=device, dtype=dtype,
                     max_batch=max(batch_sizes), max_context=ctx, cuda_graph=True,
                     cuda_graph_bs=batch_sizes)
        eng.capture_graphs()  # none inside a timing
    rows, steps_rows = [], []
    for bs in batch_sizes:
        a0, q0 = eng.stats.accepted, eng.stats.req_rounds
        with live_batch(eng, bs, context) as reqs:
            walls, phases = _rounds(eng, reqs, device, iters, warmup)
        req_rounds = eng.stats.req_rounds - q0
        accept_len = (eng.stats.accepted - a0 + req_rounds) / max(req_rounds, 1)
        rows.append(_phase_row(model, bs=bs, cfg=cfg, walls=walls, phases=phases,
                               step_ms=step_ms[bs], accept_len=accept_len,
                               context=context, iters=iters))
        steps_rows += _engine_step_rows(eng, model=model, bs=bs, cfg=cfg, step_ms=step_ms[bs],
                                        context=context, iters=iters, warmup=warmup)
    del eng
    free(device)
    return rows, steps_rows


def _e2e(model, cfg, device, dtype, e2e_tokens) -> list[dict]:
    """`generate()` of e2e_tokens tokens at bs 1 and 8, with and without overlap."""
    topk, steps, ndt = cfg
    spec = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)

    def build(overlap, model=model, spec=spec):
        with fast_weights(device, DTYPES[dtype]):
            eng = Engine(model=model, spec=spec, draft="eagle", device=device,
                         dtype=dtype, max_batch=8, max_context=e2e_tokens + 96, cuda_graph=True,
                         cuda_graph_bs=[1, 8], overlap=overlap)
            eng.capture_graphs()  # none inside a timing
            return eng
    return [dict(model=model, topk=topk, num_steps=steps, ndt=ndt, **r)
            for r in e2e_rows(build, new_tokens=e2e_tokens)]


ROUND_CONVENTION = ("round_ms: median wall time of a round (synchronized); phases: "
                    "median per phase of CUDA-event (CPU: perf_counter) segments; host "
                    "= round_ms - sum of the phase medians. break_even_acceptance_length "
                    "= round_ms / decode_step_ms (graph decode step, same target and bs, "
                    "same run): speculation pays when the mean acceptance length "
                    "(tokens committed per request-round) exceeds it.")


def run(device: str, *, dtype: str, models: list[str], batch_sizes: list[int], context: int,
        iters: int, warmup: int, configs=DEFAULT_CONFIGS, e2e_tokens: int = 256) -> tuple[list[dict], dict]:
    """Besides the phase rows: extra["engine_step"], the round through `Engine.step()` in
    steady state, synchronous and with overlap scheduling, in decode steps; extra["e2e"],
    `generate()` of 256 tokens at bs 1 and 8 with and without overlap (first config)."""
    rows, steps_rows, e2e_all = [], [], []
    for model in models:
        step_ms = decode_step_ms(model, device=device, dtype=dtype, batch_sizes=batch_sizes,
                                 context=context, iters=iters, warmup=warmup)
        free(device)  # that engine died with decode_step_ms
        for cfg in configs:
            cfg_rows, cfg_steps = _bench_config(model, cfg=tuple(cfg), device=device, dtype=dtype,
                                                batch_sizes=batch_sizes,
                                                step_ms=step_ms, context=context, iters=iters,
                                                warmup=warmup)
            rows += cfg_rows
            steps_rows += cfg_steps
            if e2e_tokens and tuple(cfg) == tuple(configs[0]):
                e2e_all += _e2e(model, tuple(cfg), device, dtype, e2e_tokens)
    extra = {"engine_step": steps_rows, "e2e": e2e_all, "context": context, "iters": iters, "warmup": warmup, "dtype": dtype,
             "draft": "eagle", "cuda_graph": True, "phases": list(PHASES) + ["host"],
             "convention": ROUND_CONVENTION}
    return rows, extra
