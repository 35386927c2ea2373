"""Properties: a drawn RunConfig in, oracles applied, OracleFailure out on a violation."""
from __future__ import annotations

import dataclasses

from harness.kv_content import check_kv_content
from harness.prefix_workloads import prompt_cap, serve_waves, shared_prompts, waves_of
from harness.oracles import (OracleFailure, check_eager_graph_bitwise, check_lossless,
                             check_metadata_covers_batch,
                             check_self_draft_logits,
                             check_total_acceptance)
from harness.runs import default_device, greedy_baseline, make_prompts, new_token_counts, serve
from harness.strategies import RunConfig
from harness.structural import SpecShape, check_structure
from specdec import Engine, SpecConfig
from specdec.sampling_params import SamplingParams
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin


def run_context(cfg: RunConfig, overlap: bool) -> int:
    """Just enough context for the run's longest prompt (shared-prefix workloads make longer
    ones), its output and the speculative headroom (overlap: one round more)."""
    spec = SpecConfig(cfg.topk, cfg.num_steps, cfg.ndt, cfg.draft_sampling)
    longest = (prompt_cap(cfg.max_prompt_len, cfg.max_new_tokens) if cfg.prefix_cache
               else cfg.max_prompt_len)
    return longest + cfg.max_new_tokens + reserve_margin(spec, cfg.page_size, overlap)


def build_engine(cfg: RunConfig, device: str, cache: bool | None = None, **overrides) -> Engine:
    """The engine of a drawn run; `cache` overrides the prefix cache alone (the workload
    stays that of cfg)."""
    cfg = dataclasses.replace(cfg, **{k: v for k, v in overrides.items() if k in RunConfig.__dataclass_fields__})
    spec = SpecConfig(cfg.topk, cfg.num_steps, cfg.ndt, cfg.draft_sampling)
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
                  overlap=cfg.overlap, prefix_cache=cfg.prefix_cache if cache is None else cache,
                  num_pages=num_pages)


def prompts_for(cfg: RunConfig, vocab: int, device: str | None = None) -> list[list[int]]:
    if cfg.prefix_cache:  # prompts sharing prefixes (harness/prefix_workloads.py)
        return shared_prompts(cfg, vocab, device or default_device())
    return make_prompts(cfg.seed, cfg.batch_size, vocab, cfg.max_prompt_len, cfg.min_prompt_len)


def sampling_for(cfg: RunConfig, stops: list[tuple] | None = None) -> list[SamplingParams]:
    """Request i: the drawn knobs with seed run seed + i (greedy when temperature is 0)."""
    stops = stops or [()] * cfg.batch_size
    return [SamplingParams(cfg.temperature, cfg.top_k, cfg.top_p, cfg.seed + i, stop)
            for i, stop in zip(range(cfg.batch_size), stops)]


def run(cfg: RunConfig, eng: Engine, stops: list[tuple] | None = None, on_step=None) -> list:
    """The drawn batch through the engine (ragged lengths, stops): RequestOutputs. With the
    prefix cache, in waves (a prefix is reused once its first request has finished)."""
    prompts = prompts_for(cfg, eng.cfg.vocab_size, str(eng.device))
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)
    if cfg.prefix_cache or on_step is not None:
        return serve_waves(eng, prompts, counts, sampling_for(cfg, stops),
                           waves_of(cfg) if cfg.prefix_cache else [0] * len(prompts), on_step)
    return serve(eng, prompts, counts, sampling_for(cfg, stops))


def _traced(cfg: RunConfig, device: str, keep_kv_slots: bool = False, **overrides):
    eng = build_engine(cfg, device, **overrides)
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=keep_kv_slots)
    return eng, [o.tokens for o in run(cfg, eng)]


def prop_structure(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 1: positions, write and read slots, tree, acceptance, compaction layout and
    padding are exactly as the references say; the allocator ends with every page free."""
    eng, _ = _traced(cfg, device or default_device(), keep_kv_slots=True)
    check_metadata_covers_batch(eng.recorder)
    check_structure(eng.recorder, SpecShape(cfg.topk, cfg.num_steps, cfg.ndt, cfg.page_size,
                                            eng.drafter.shifted))
    eng.check_accounting()


def prop_kv_content(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 3: committed target and draft KV equal a dense reference prefill."""
    eng, _ = _traced(cfg, device or default_device())
    check_kv_content(eng.recorder, eng)


def prop_eager_vs_graph(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 2: batch-invariant eager == graph bit for bit (same padded shapes), sampled
    requests included (same seeds, same coins, same tokens); greedy plain eager == graph
    token for token (different shapes; ties as oracle 6)."""
    device = device or default_device()
    graph, out_g = _traced(cfg, device, cuda_graph=True)
    inv, out_i = _traced(cfg, device, cuda_graph=False, batch_invariant=True)
    for eng in (graph, inv):
        check_metadata_covers_batch(eng.recorder)
    check_eager_graph_bitwise(inv, graph)
    if out_i != out_g:
        b = next(i for i, (x, y) in enumerate(zip(out_i, out_g)) if x != y)
        raise OracleFailure("eager_vs_graph", f"request {b}: eager {out_i[b]} != graph {out_g[b]}")
    if cfg.temperature > 0:
        return  # a sampled token may flip at a CDF boundary between different shapes
    plain, out_e = _traced(cfg, device, cuda_graph=False)
    _, margins = greedy_reference_outputs(cfg, device, plain)
    check_lossless(out_g, out_e, margins, plain.dtype)


def greedy_reference_outputs(cfg: RunConfig, device: str, eng: Engine):
    """Plain greedy decoding of the drawn prompts (cached), cut to each request's length."""
    prompts = prompts_for(cfg, eng.cfg.vocab_size, device)
    ref, margins = greedy_baseline(cfg.model, prompts, cfg.max_new_tokens, device, cfg.dtype,
                                   cfg.seed % 1000)
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)
    return [r[:n] for r, n in zip(ref, counts)], margins


def prop_lossless_greedy(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 4: speculative greedy output == plain greedy output, and topk > 1 == topk 1."""
    device = device or default_device()
    eng = build_engine(cfg, device)
    out = [o.tokens for o in run(cfg, eng)]
    ref, margins = greedy_reference_outputs(cfg, device, eng)
    check_lossless(out, ref, margins, eng.dtype)
    eng.check_accounting()
    if cfg.topk > 1:
        chain = build_engine(cfg, device, topk=1, ndt=cfg.num_steps + 1)
        check_lossless(out, [o.tokens for o in run(cfg, chain)], margins, eng.dtype)


def prop_self_draft(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 5: with the target as its own draft, draft logits equal verify logits node by
    node; topk 1 accepts every draft except at ties."""
    eng, _ = _traced(cfg, device or default_device(), draft="self")
    check_self_draft_logits(eng.recorder, cfg.topk, cfg.ndt, eng.dtype)
    if cfg.topk == 1:
        check_total_acceptance(eng.recorder, cfg.num_steps, cfg.ndt, eng.dtype)


PROPERTIES = {
    "structure": prop_structure,
    "kv_content": prop_kv_content,
    "eager_vs_graph": prop_eager_vs_graph,
    "lossless_greedy": prop_lossless_greedy,
    "self_draft": prop_self_draft,
}

