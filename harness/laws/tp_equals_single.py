"""Law tp_equals_single: a tensor-parallel engine equals the same engine on one rank.

Observables: the tokens of tp N and tp 1, every rank's KV shard, each rank's accounting.
References: the one-rank engine, harness/references/dense.py (KV heads),
harness/references/ties.py. Strategy: harness/strategies/configs.py tp_configs."""
from __future__ import annotations

import dataclasses

import torch

from harness.laws.kv_content import KV_TOL, reference_draft_kv
from harness.base.failure import OracleFailure
from harness.references.dense import reference_prefill, top2_margins
from harness.strategies.runs import default_device
from harness.strategies.configs import RunConfig
from harness.references.ties import compare_greedy
from specdec.tp.group import TPGroup
from specdec.tp.replicate import TPDivergence
from specdec.trace import TraceRecorder
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.configs import tp_configs
from harness.strategies.tiers import graphs_of

NAME = "tp_equals_single"  # the law whose checks this module raises (OracleFailure)


# -- probes run on every rank (module-level: pickled to the workers) -------------------------
def _record(engine, page_size: int) -> None:
    engine.recorder = TraceRecorder(page_size, keep_kv_slots=False)


def _finished_kv(engine) -> list:
    return [(fr.rid, fr.tokens, fr.seq_len, fr.target_kv, fr.draft_kv)
            for fr in engine.recorder.finished]


def _accounting(engine) -> tuple:
    engine.check_accounting()
    alloc = engine.memory.allocator
    return (list(alloc.owner), sorted(alloc._free), engine.req_to_token.cpu().tolist())


def _fail(detail: str) -> None:
    raise OracleFailure(NAME, NAME, detail)


def _compare_shard(what: str, *, rank: int, world: int, rid: int, layer: int, got, k, v,
                   tol: float) -> None:
    """Rank `rank`'s KV [2, n, Hkv/world, D] against heads rank*Hkv/world.. of the reference."""
    per = got.shape[2]
    for name, g, w in (("K", got[0], k), ("V", got[1], v)):
        ref = w.float().cpu()[:, rank * per:(rank + 1) * per]
        if ref.shape != g.shape:
            _fail(f"rank {rank} {what} layer {layer} {name} shard shape {tuple(g.shape)}, "
                  f"reference heads {tuple(ref.shape)} of {world} ranks")
        diff = (g.float() - ref).abs()
        bad = diff > tol * (1 + ref.abs())
        if bool(bad.any()):
            pos = int(bad.nonzero()[0, 0])
            _fail(f"request {rid}: rank {rank}'s {what} KV shard, layer {layer} {name} at "
                  f"position {pos}: max error {float(diff[pos].max()):.3e} against the dense "
                  "reference's heads")


def _check_shards(single, shards: list, dtype) -> None:
    tol = KV_TOL[dtype]
    world = len(shards)
    for rank, finished in enumerate(shards):
        for rid, toks, n, target_kv, draft_kv in finished:
            _, hidden, k, v = reference_prefill(single.target, toks[:n], single.device)
            for layer, got in enumerate(target_kv):
                _compare_shard("target", rank=rank, world=world, rid=rid, layer=layer,
                               got=got[:, :n], k=k[layer], v=v[layer], tol=tol)
            if single.spec is None:
                continue
            dk, dv, m = reference_draft_kv(single, toks, n, hidden)
            for layer, got in enumerate(draft_kv):
                _compare_shard("draft", rank=rank, world=world, rid=rid, layer=layer,
                               got=got[:, :m], k=dk[layer], v=dv[layer], tol=tol)


def prop_tp_equals_single(cfg: RunConfig, device: str | None = None) -> None:
    """An engine sharded over cfg.tp_size ranks equals the same configuration on one rank:
    (1) every request's tokens are identical to tp 1's (greedy: up to a tie of the tp-1 run's
    logits, oracle 6; sampled, same seeds: identical, in float32, see tp_configs); (2) every
    rank's target and draft KV shard of every finished request equals, within dtype
    tolerance, the matching KV heads (rank r: heads r*Hkv/N ..) of a dense reference prefill
    of its committed tokens; (3) the accounting is leak-free and identical on every rank
    (allocator owners, free list, req_to_token)."""
    from harness.strategies.drawn_run import build_engine, prompts_for, run
    device = device or default_device()
    if device.startswith("cuda") and torch.cuda.device_count() < cfg.tp_size:
        raise RuntimeError(f"tp_size={cfg.tp_size} needs {cfg.tp_size} GPUs, "
                           f"{torch.cuda.device_count()} visible")
    # The TP engine's workers start while the one-rank engine builds and runs.
    TPGroup.prestart(cfg.tp_size, torch.device(device).type)
    single = build_engine(dataclasses.replace(cfg, tp_size=1), device)
    want = [o.tokens for o in run(cfg, single)]
    try:
        with build_engine(cfg, device) as eng:
            eng.tp_each(_record, cfg.page_size)
            got = [o.tokens for o in run(cfg, eng)]
            shards = eng.tp_each(_finished_kv)
            books = eng.tp_each(_accounting)
    except TPDivergence as exc:  # the engine's own cross-rank check (tp_check) fired first
        _fail(f"ranks disagree: {exc}")
    prompts = prompts_for(cfg, single.cfg.vocab_size)
    for b, (g, w, p) in enumerate(zip(got, want, prompts)):
        if cfg.samples(b):
            if g != w:
                _fail(f"request {b} (sampled, seed {cfg.seed + b}): tp {cfg.tp_size} {g} != "
                      f"tp 1 {w}")
            continue
        ok, what = compare_greedy(g, w, top2_margins(single.target, p, w, single.device),
                                  single.dtype)
        if not ok:
            _fail(f"request {b}: tp {cfg.tp_size} vs tp 1: {what}")
    _check_shards(single, shards, single.dtype)
    for rank, book in enumerate(books[1:], start=1):
        if book != books[0]:
            _fail(f"rank {rank}'s accounting (owners, free list, req_to_token) differs from "
                  "rank 0's")



def tp_runs(on_gpu: bool, fixed: dict):
    sizes = (fixed["tp_size"],) if "tp_size" in fixed else (2,)
    if on_gpu:
        return tp_configs(sizes, max_batch=8, max_prompt_len=40, max_new_tokens=24,
                          graphs=graphs_of(fixed), dtypes=("float32", "bfloat16"))
    return tp_configs(sizes, graphs=graphs_of(fixed))


LAW = Law(
    name="tp_equals_single", rank=190, prop=prop_tp_equals_single, config=RunConfig,
    summary="tensor parallel == one rank: tokens, KV, accounting on every rank",
    # Processes cost seconds to start, so few examples (one worker group serves them all);
    # on CUDA these need tp_size GPUs (skipped with fewer).
    strategy=tp_runs, slices=grid(5, tp_size=(2,), cuda_graph=(False, True)),
    controls=("tests/test_laws_not_vacuous.py::test_tp_law_rejects_misordered_vocab_gather",
              "cases/tp_vocab_shard_argmax_local"))
