"""The overlap oracle (contract section 10): overlap scheduling changes when the host reads
a round's results, never what the engine computes.

Observables: the tokens, committed KV bytes, per-request resolved rounds and statistics of
an overlap and a synchronous engine (specdec/trace.py), accounting after every step.
Reference: the synchronous engine. Strategy: harness/strategies/configs.py run_configs
(no prefix cache)."""
from __future__ import annotations

import dataclasses
import random

import torch

from harness.base.failure import OracleFailure
from harness.base.liveness import Progress
from harness.strategies.drawn_run import build_engine, run_context, prompts_for, sampling_for
from harness.strategies.runs import default_device, new_token_counts
from harness.strategies.configs import RunConfig
from specdec.trace import TraceRecorder
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "overlap_equals_sync"  # the law whose checks this module raises (OracleFailure)

LATE_STEPS = (1, 2, 3, 5)  # when a late request is queued, drawn per request from the seed


def arrivals(cfg: RunConfig) -> list[int]:
    """The step each request is queued at: the first half of the batch at step 0, each of
    the rest at a step drawn from LATE_STEPS. The late ones join while rounds are in flight
    and take rows freed by finished requests, lagging the device by different depths in the
    same step (one's prefill in flight, another a round behind, others resolved)."""
    rng = random.Random(cfg.seed ^ 0xA441)
    half = (cfg.batch_size + 1) // 2
    return [0 if i < half else rng.choice(LATE_STEPS) for i in range(cfg.batch_size)]


def _drive(cfg: RunConfig, device: str, overlap: bool):
    """The drawn batch, each request queued at its arrival step (arrivals); when a stop is
    drawn, each request stops at its prompt's first token (an id the model may emit or not:
    both modes must agree either way). Returns the engine, the outputs and, per rid,
    its history: (committed length, output length) after each of its resolved rounds."""
    bucket = max(cfg.batch_size, max(cfg.graph_bs))
    # One context for both: it sets the attention's width (and so its reduction order).
    context = run_context(cfg, True)
    eng = build_engine(dataclasses.replace(cfg, overlap=overlap, graph_bs=(bucket,)), device,
                       batch_invariant=True, max_context=context)
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=False)
    prompts = prompts_for(cfg, eng.cfg.vocab_size)
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)
    stops = [(p[0],) if cfg.stop_at >= 0 else () for p in prompts]
    params = sampling_for(cfg, stops)
    arrive = arrivals(cfg)
    rids, history, step, progress = {}, {}, 0, Progress(eng)
    while step <= max(arrive) or eng.has_unfinished():
        for i in range(cfg.batch_size):
            if arrive[i] == step:
                rids[i] = progress.add(eng.add_request(prompts[i], counts[i], params[i]))
        progress.step()
        step += 1
        eng.check_accounting()
        for r in eng.scheduler.waiting:
            if r.pages or r.row != -1:
                raise OracleFailure(NAME, NAME, f"waiting request {r.rid} holds memory")
        if step > 2000:
            raise OracleFailure(NAME, NAME, f"overlap={overlap}: no progress")
    eng.check_accounting([])
    for rid, seq_len, n_out in eng.recorder.resolved:
        history.setdefault(rid, []).append((seq_len, n_out))
    if len(eng.memory.req_pool._free_rows) != eng.max_batch:
        raise OracleFailure(NAME, NAME, f"overlap={overlap}: a request row leaked")
    outs = [eng.output(rids[i]) for i in range(cfg.batch_size)]
    return eng, [(o.tokens, o.finish_reason) for o in outs], history


def _committed_kv(eng) -> dict:
    """Per finished request: its committed target and draft KV bytes, snapshot at finish
    (target positions < seq_len; draft positions < the draft's committed prefix)."""
    out = {}
    for fr in eng.recorder.finished:
        n, d = fr.seq_len, eng.rounds.draft.prefix_len(fr.seq_len)
        out[fr.rid] = ([kv[:, :n] for kv in fr.target_kv], [kv[:, :d] for kv in fr.draft_kv])
    return out


def prop_overlap_equals_sync(cfg: RunConfig, device: str | None = None) -> None:
    """Law (overlap_equals_sync): one seeded run (the drawn batch, greedy or sampled, with
    ragged lengths and stop tokens; half of it queued at step 0, each of the rest at its own
    drawn step, so one step holds requests lagging the in-flight round at different depths)
    through an engine with overlap=True and one with overlap=False gives
    1. identical tokens and finish reasons for every request;
    2. identical committed KV bytes, target and draft, at every committed slot of every
       request (snapshot when it finishes, before its pages go);
    3. the same history of resolved rounds per request: the matching point of the two modes
       is a request's round resolving, whichever step resolves it (overlap: one step later),
       and after each the committed length and output length are equal;
    4. sound accounting after every step in both (every page free or owned by exactly one
       holder: running requests and releases deferred for the round in flight; waiting
       requests own nothing), every page and request row free once each has drained, and
       the same statistics (rounds, drafted, accepted).
    Both run batch-invariant shapes (one captured size; eager padded to it) and one context
    length, so the extra round an overlap engine runs for a request that has already
    finished changes nobody's numerics."""
    device = device or default_device()
    sync, out_s, hist_s = _drive(cfg, device, False)
    over, out_o, hist_o = _drive(cfg, device, True)
    for i, (a, b) in enumerate(zip(out_s, out_o)):
        if a != b:
            raise OracleFailure(NAME, NAME, f"request {i}: sync {a} != overlap {b}")
    if hist_s != hist_o:
        rid = next(r for r in hist_s if hist_s[r] != hist_o.get(r))
        raise OracleFailure(NAME, NAME, f"rid {rid}: resolved rounds (seq_len, "
                            f"output length) sync {hist_s[rid]} != overlap {hist_o.get(rid)}")
    kv_s, kv_o = _committed_kv(sync), _committed_kv(over)
    for rid, (ts, ds) in kv_s.items():
        to, do = kv_o[rid]
        for what, xs, ys in (("target", ts, to), ("draft", ds, do)):
            for layer, (x, y) in enumerate(zip(xs, ys)):
                if x.shape != y.shape or not torch.equal(x, y):
                    raise OracleFailure(NAME, NAME, f"rid {rid}: committed {what} "
                                        f"KV of layer {layer} differs between sync and overlap")
    if str(sync.stats) != str(over.stats):
        raise OracleFailure(NAME, NAME, f"statistics: sync {sync.stats} != "
                            f"overlap {over.stats}")


LAW = Law(
    name="overlap_equals_sync", rank=100, prop=prop_overlap_equals_sync, config=RunConfig,
    summary="overlap scheduling == synchronous: tokens, rounds, statistics (section 10)",
    # Not over the prefix cache: its tree fills one round later under overlap (deferred
    # release), so which positions a request recomputes, and their rounding, may differ; the
    # two compose under prefix_transparent, kv_content, lossless_greedy and self_draft.
    strategy=engine_runs(sampled=True, stops=True),
    slices=grid(2, cuda_graph=(False, True)),
    controls=("tests/test_laws_not_vacuous.py::test_overlap_law_rejects_a_wrong_coin_candidate",
              "cases/overlap_placeholder_leak"))
