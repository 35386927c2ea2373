"""Oracle 8, finish (SGLang #33758): what a request returns when it ends.

A speculative round commits several tokens at once, so the end of a request can fall inside
one round's accepted run: at its max_new_tokens cap, at a stop token, or at both. The law is
stated per request over its RequestOutput, whatever the accept lengths were.

Observables: each RequestOutput (tokens, finish reason) with and without the drawn
stops. Reference: the same requests without stops, and plain greedy
(harness/strategies/drawn_run.py; ties as harness/references/ties.py). Strategy:
harness/strategies/configs.py run_configs (stops drawn)."""
from __future__ import annotations

from harness.base.failure import OracleFailure
from harness.strategies.configs import STOP_PAST_CAP, RunConfig
from harness.strategies.drawn_run import (build_engine, prompts_for, run, run_context,
                                          sampling_for)
from harness.strategies.runs import default_device, greedy_baseline, new_token_counts, serve
from harness.references.ties import compare_greedy
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "finish"  # the law whose checks this module raises (OracleFailure)


def cut(tokens: list[int], max_new: int, stop: tuple) -> list[int]:
    """The reference continuation as a request must return it: cut at the first stop token
    (kept) or at max_new tokens, whichever comes first."""
    tokens = tokens[:max_new]
    for i, t in enumerate(tokens):
        if t in stop:
            return tokens[:i + 1]
    return tokens


def check_finish(outputs, *, max_new: list[int], stops: list[tuple], references=None,
                 margins=None, dtype=None) -> None:
    """Finish law: every output has at most its max_new_tokens tokens; it holds a stop token
    only as its last token; its finish reason is "stop" exactly when that last token is a
    stop token, else "length" with exactly max_new_tokens tokens; and, given references (the
    same requests run without stops), it equals its reference cut at the first stop token or
    at max_new_tokens (greedy: a first divergence only at a tie, oracle 6)."""
    for b, (o, n, stop) in enumerate(zip(outputs, max_new, stops)):
        toks, where = o.tokens, f"request {b} (max_new_tokens {n}, stop {list(stop)})"
        if len(toks) > n:
            raise OracleFailure(NAME, NAME, f"{where}: {len(toks)} tokens returned")
        early = [i for i, t in enumerate(toks[:-1]) if t in stop]
        if early:
            raise OracleFailure(NAME, NAME, f"{where}: stop token at output {early[0]} of "
                                          f"{len(toks)}, tokens after it returned: {toks}")
        want = "stop" if toks and toks[-1] in stop else "length"
        if o.finish_reason != want or (want == "length" and len(toks) != n):
            raise OracleFailure(NAME, NAME, f"{where}: finish reason {o.finish_reason!r} with "
                                          f"{len(toks)} tokens {toks}")
        if references is None:
            continue
        ref = cut(references[b], n, stop)
        if margins is None:
            if toks != ref:
                raise OracleFailure(NAME, NAME, f"{where}: returned {toks}, the same request "
                                              f"without stops gives {ref}")
            continue
        ok, what = compare_greedy(toks, ref, margins[b], dtype)
        if not ok:
            raise OracleFailure(NAME, NAME, f"{where}: {what}")


def prop_finish(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 8 over drawn runs: ragged max_new_tokens, a stop token taken from the request's
    own unstopped continuation at index stop_at, which may lie up to STOP_PAST_CAP tokens past
    its cap (a token whose first occurrence is past the cap: a round's accepted drafts can
    reach it, the output must not), any accept lengths (eagle, self, perturbed drafts), greedy
    or sampled. The reference is plain greedy decoding for greedy requests; for sampled ones
    (fp32) the same seeded requests run without stops (a seed's draws are keyed by position,
    never by the batch), both STOP_PAST_CAP tokens past each cap."""
    device = device or default_device()
    eng = build_engine(cfg, device)
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)
    prompts = prompts_for(cfg, eng.cfg.vocab_size, device)
    longer = [n + STOP_PAST_CAP for n in counts]
    if cfg.temperature == 0:
        refs, margins = greedy_baseline(cfg.model, prompts=prompts,
                                        max_new_tokens=cfg.max_new_tokens + STOP_PAST_CAP,
                                        device=device, dtype=cfg.dtype, seed=cfg.seed % 1000)
    else:
        context = run_context(cfg, cfg.overlap) + STOP_PAST_CAP
        ref_eng = build_engine(cfg, device, cache=False, max_context=context)
        refs = [o.tokens for o in serve(ref_eng, prompts, longer, sampling_for(cfg))]
        margins = None
    stops = [(r[cfg.stop_at],) if 0 <= cfg.stop_at < len(r) else () for r in refs]
    outs = run(cfg, eng, stops)
    exact = cfg.temperature == 0 or cfg.dtype == "float32"
    check_finish(outs, max_new=counts, stops=stops, references=refs if exact else None,
                 margins=margins, dtype=eng.dtype)
    eng.check_accounting()


LAW = Law(
    name="finish", rank=90, prop=prop_finish, config=RunConfig,
    summary="output length, stop position and finish reason == the plain continuation cut at "
            "the stop or the cap (oracle 8)",
    strategy=engine_runs(sampled=True, stops=True, prefix=(False, True)),
    slices=grid(2, cuda_graph=(False, True)),
    controls=("tests/test_laws_not_vacuous.py::test_finish_law_rejects_bad_outputs",
              "cases/finish_cap_before_stop"))
