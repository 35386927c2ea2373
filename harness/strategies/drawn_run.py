"""A drawn RunConfig through the engine: the engine it builds, its prompts (shared-prefix
workloads with the prefix cache), its sampling parameters, the run itself (traced or not),
and the plain greedy reference of the same prompts. The laws call these; none judges."""
from __future__ import annotations

import dataclasses

from harness.strategies.configs import RunConfig
from harness.strategies.prefix_workloads import prompt_cap, serve_waves, shared_prompts, waves_of
from harness.strategies.vocab_seams import seam_stops, vocab_seams, with_seams
from harness.strategies.runs import (default_device, greedy_baseline, make_prompts,
                                     new_token_counts, serve)
from specdec import Engine, SpecConfig
from specdec.sampling_params import SamplingParams
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin


def run_context(cfg: RunConfig, overlap: bool) -> int:
    """Just enough context for the run's longest prompt (shared-prefix workloads make longer
    ones), its output and the speculative headroom (overlap: one round more)."""
    spec = SpecConfig(topk=cfg.topk, num_steps=cfg.num_steps, num_draft_tokens=cfg.ndt,
                      draft_sampling=cfg.draft_sampling)
    longest = (prompt_cap(cfg.max_prompt_len, cfg.max_new_tokens) if cfg.prefix_cache
               else cfg.max_prompt_len)
    return longest + cfg.max_new_tokens + reserve_margin(spec, cfg.page_size, overlap)


def build_engine(cfg: RunConfig, device: str, cache: bool | None = None, **overrides) -> Engine:
    """The engine of a drawn run; `cache` overrides the prefix cache alone (the workload
    stays that of cfg)."""
    cfg = dataclasses.replace(cfg, **{k: v for k, v in overrides.items() if k in RunConfig.__dataclass_fields__})
    spec = SpecConfig(topk=cfg.topk, num_steps=cfg.num_steps, num_draft_tokens=cfg.ndt,
                      draft_sampling=cfg.draft_sampling)
    context = overrides.get("max_context") or run_context(cfg, cfg.overlap)
    num_pages = None
    if cfg.prefix_cache and cfg.pool_slack >= 0:  # a tight pool: evictions, retractions
        worst = -(-context // cfg.page_size)
        num_pages = 1 + worst + worst * cfg.pool_slack // 100
    return Engine(model=cfg.model, spec=spec, draft=cfg.draft, page_size=cfg.page_size,
                  device=device, dtype=cfg.dtype, seed=cfg.seed % 1000,
                  max_batch=max(cfg.batch_size, max(cfg.graph_bs)), max_context=context,
                  cuda_graph=cfg.cuda_graph, cuda_graph_bs=list(cfg.graph_bs),
                  batch_invariant=overrides.get("batch_invariant", False),
                  draft_max_position=cfg.draft_max_position or None, tp_size=cfg.tp_size,
                  tp_all_reduce=cfg.tp_all_reduce,
                  overlap=cfg.overlap, prefix_cache=cfg.prefix_cache if cache is None else cache,
                  num_pages=num_pages)


def prompts_for(cfg: RunConfig, vocab: int, device: str | None = None) -> list[list[int]]:
    """The drawn prompts. cfg.seams: they hold the vocabulary's seams, except shared-prefix
    prompts (their continuations are their sources' outputs, which a changed id would cut)."""
    if cfg.prefix_cache:  # prompts sharing prefixes (harness/strategies/prefix_workloads.py)
        return shared_prompts(cfg, vocab, device or default_device())
    prompts = make_prompts(cfg.seed, cfg.batch_size, vocab, cfg.max_prompt_len,
                           cfg.min_prompt_len)
    return with_seams(prompts, vocab_seams(vocab, cfg.seams), cfg.seed) if cfg.seams else prompts


def sampling_for(cfg: RunConfig, stops: list[tuple] | None = None,
                 vocab: int | None = None) -> list[SamplingParams]:
    """Request i: seed run seed + i; the drawn knobs where it samples (cfg.samples(i)), else
    greedy. cfg.seams (and the vocabulary given): stop ids at the seams where none are
    given."""
    if stops is None and cfg.seams and vocab is not None:
        stops = seam_stops(cfg.batch_size, vocab_seams(vocab, cfg.seams))
    stops = stops or [()] * cfg.batch_size
    return [SamplingParams(cfg.temperature, cfg.top_k, cfg.top_p, cfg.seed + i, stop)
            if cfg.samples(i) else SamplingParams(0.0, 0, 1.0, cfg.seed + i, stop)
            for i, stop in zip(range(cfg.batch_size), stops)]


def run(cfg: RunConfig, eng: Engine, stops: list[tuple] | None = None, on_step=None) -> list:
    """The drawn batch through the engine (ragged lengths, stops): RequestOutputs. With the
    prefix cache, in waves (a prefix is reused once its first request has finished)."""
    prompts = prompts_for(cfg, eng.cfg.vocab_size, str(eng.device))
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)
    params = sampling_for(cfg, stops, eng.cfg.vocab_size)
    if cfg.prefix_cache or on_step is not None:
        return serve_waves(eng, prompts=prompts, max_new=counts, params=params,
                           waves=waves_of(cfg) if cfg.prefix_cache else [0] * len(prompts),
                           on_step=on_step)
    return serve(eng, prompts, counts, params)


def traced(cfg: RunConfig, device: str, keep_kv_slots: bool = False, **overrides):
    """The drawn run with a TraceRecorder on: (engine, each request's tokens)."""
    eng = build_engine(cfg, device, **overrides)
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=keep_kv_slots)
    return eng, [o.tokens for o in run(cfg, eng)]


def greedy_reference_outputs(cfg: RunConfig, device: str, eng: Engine):
    """Plain greedy decoding of the drawn prompts (cached), cut to each request's length."""
    prompts = prompts_for(cfg, eng.cfg.vocab_size, device)
    ref, margins = greedy_baseline(cfg.model, prompts=prompts, max_new_tokens=cfg.max_new_tokens,
                                   device=device, dtype=cfg.dtype,
                                   seed=cfg.seed % 1000)
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)
    return [r[:n] for r, n in zip(ref, counts)], margins
