"""Properties: a drawn RunConfig in, oracles applied, OracleFailure out on a violation."""
from __future__ import annotations

import dataclasses

from harness.kv_content import check_kv_content
from harness.oracles import (check_eager_graph_bitwise, check_lossless, check_metadata_covers_batch,
                             check_self_draft_logits,
                             check_total_acceptance)
from harness.runs import default_device, greedy_baseline, make_prompts
from harness.strategies import RunConfig
from harness.structural import SpecShape, check_structure
from specdec import Engine, SpecConfig
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin


def build_engine(cfg: RunConfig, device: str, **overrides) -> Engine:
    cfg = dataclasses.replace(cfg, **{k: v for k, v in overrides.items() if k in RunConfig.__dataclass_fields__})
    spec = SpecConfig(cfg.topk, cfg.num_steps, cfg.ndt)
    # Just enough context for the longest prompt, its output and one round's headroom.
    context = cfg.max_prompt_len + cfg.max_new_tokens + reserve_margin(spec, cfg.page_size)
    return Engine(model=cfg.model, spec=spec, draft=cfg.draft, page_size=cfg.page_size,
                  device=device, dtype=cfg.dtype, seed=cfg.seed % 1000,
                  max_batch=max(cfg.batch_size, max(cfg.graph_bs)), max_context=context,
                  cuda_graph=cfg.cuda_graph, cuda_graph_bs=list(cfg.graph_bs),
                  batch_invariant=overrides.get("batch_invariant", False))


def prompts_for(cfg: RunConfig, vocab: int) -> list[list[int]]:
    return make_prompts(cfg.seed, cfg.batch_size, vocab, cfg.max_prompt_len)


def _traced(cfg: RunConfig, device: str, keep_kv_slots: bool = False, **overrides):
    eng = build_engine(cfg, device, **overrides)
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=keep_kv_slots)
    out = eng.generate(prompts_for(cfg, eng.cfg.vocab_size), max_new_tokens=cfg.max_new_tokens)
    return eng, out


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
    """Oracle 2: batch-invariant eager == graph bit for bit (same padded shapes); plain eager
    == graph token for token (different shapes; ties as oracle 6)."""
    device = device or default_device()
    graph, out_g = _traced(cfg, device, cuda_graph=True)
    inv, _ = _traced(cfg, device, cuda_graph=False, batch_invariant=True)
    for eng in (graph, inv):
        check_metadata_covers_batch(eng.recorder)
    check_eager_graph_bitwise(inv, graph)
    plain, out_e = _traced(cfg, device, cuda_graph=False)
    prompts = prompts_for(cfg, plain.cfg.vocab_size)
    _, margins = greedy_baseline(cfg.model, prompts, cfg.max_new_tokens, device, cfg.dtype,
                                 cfg.seed % 1000)
    check_lossless(out_g, out_e, margins, plain.dtype)


def prop_lossless_greedy(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 4: speculative greedy output == plain greedy output, and topk > 1 == topk 1."""
    device = device or default_device()
    eng = build_engine(cfg, device)
    prompts = prompts_for(cfg, eng.cfg.vocab_size)
    out = eng.generate(prompts, max_new_tokens=cfg.max_new_tokens)
    ref, margins = greedy_baseline(cfg.model, prompts, cfg.max_new_tokens, device, cfg.dtype,
                                   cfg.seed % 1000)
    check_lossless(out, ref, margins, eng.dtype)
    eng.check_accounting()
    if cfg.topk > 1:
        chain = build_engine(cfg, device, topk=1, ndt=cfg.num_steps + 1)
        check_lossless(out, chain.generate(prompts, max_new_tokens=cfg.max_new_tokens), margins,
                       eng.dtype)


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
