"""Properties: a drawn RunConfig in, oracles applied, OracleFailure out on a violation."""
from __future__ import annotations

from harness.oracles import (check_lossless, check_self_draft_logits, check_total_acceptance)
from harness.runs import default_device, greedy_baseline, make_prompts
from harness.strategies import RunConfig
from specdec import Engine, SpecConfig
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin


def build_engine(cfg: RunConfig, device: str, draft: str | None = None) -> Engine:
    spec = SpecConfig(cfg.topk, cfg.num_steps, cfg.ndt)
    # Just enough context for the longest prompt, its output and one round's headroom.
    context = cfg.max_prompt_len + cfg.max_new_tokens + reserve_margin(spec, cfg.page_size)
    return Engine(model=cfg.model, spec=spec, draft=draft or cfg.draft, page_size=cfg.page_size,
                  device=device, dtype=cfg.dtype, seed=cfg.seed % 1000,
                  max_batch=max(cfg.batch_size, 1), max_context=context)


def prompts_for(cfg: RunConfig, vocab: int) -> list[list[int]]:
    return make_prompts(cfg.seed, cfg.batch_size, vocab, cfg.max_prompt_len)


def prop_lossless_greedy(cfg: RunConfig, device: str | None = None) -> None:
    """Speculative greedy output == plain greedy output (oracle 4), and the allocator ends
    with every page free (oracle 1, accounting)."""
    device = device or default_device()
    eng = build_engine(cfg, device)
    prompts = prompts_for(cfg, eng.cfg.vocab_size)
    out = eng.generate(prompts, max_new_tokens=cfg.max_new_tokens)
    ref, margins = greedy_baseline(cfg.model, prompts, cfg.max_new_tokens, device, cfg.dtype,
                                   cfg.seed % 1000)
    check_lossless(out, ref, margins, eng.dtype)
    eng.check_accounting()


def prop_self_draft(cfg: RunConfig, device: str | None = None) -> None:
    """With the target as its own draft (oracle 5): draft logits equal verify logits node by
    node; topk 1 accepts every draft except at ties."""
    device = device or default_device()
    eng = build_engine(cfg, device, draft="self")
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=False)
    eng.generate(prompts_for(cfg, eng.cfg.vocab_size), max_new_tokens=cfg.max_new_tokens)
    check_self_draft_logits(eng.recorder, cfg.topk, cfg.ndt, eng.dtype)
    if cfg.topk == 1:
        check_total_acceptance(eng.recorder, cfg.num_steps, cfg.ndt, eng.dtype)


PROPERTIES = {
    "lossless_greedy": prop_lossless_greedy,
    "self_draft": prop_self_draft,
}
