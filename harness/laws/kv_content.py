"""Law kv_content (oracle 3): committed target and draft KV equal a fresh dense reference
prefill of the committed tokens, after a run or for the running requests between steps.

Observables: the trace (committed tokens, KV slots), the engine's target and draft KV pools.
Reference: harness/references/dense.py reference_prefill. Strategy:
harness/strategies/configs.py run_configs."""
from __future__ import annotations

import torch

from harness.base.failure import OracleFailure
from harness.references.dense import reference_prefill
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import traced
from harness.strategies.runs import default_device
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "kv_content"  # the law whose checks this module raises (OracleFailure)

# Largest |pool - reference| for K/V written by the paged engine vs the dense reference.
KV_TOL = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1.5e-1}


def _compare(pool: str, *, rid: int, layer: int, got: torch.Tensor, k: torch.Tensor,
             v: torch.Tensor, tol: float) -> None:
    for name, g, w in (("K", got[0], k), ("V", got[1], v)):
        diff = (g.float() - w.float().cpu()).abs()
        bad = diff > tol * (1 + w.float().cpu().abs())
        if bool(bad.any()):
            pos = int(bad.nonzero()[0, 0])
            raise OracleFailure(NAME, NAME, (
                f"request {rid} {pool} layer {layer} {name} at position {pos}: max error "
                f"{float(diff[pos].max()):.3e} > {tol:.0e} (relative)"))


@torch.no_grad()
def check_kv_content(trace, engine) -> int:
    """After the run, the committed target KV of every request (positions 0..seq_len-1) equals
    what a dense reference prefill of its committed tokens writes, and so does the draft KV:
    an EAGLE head's row p holds (target hidden h_p, token p+1) at positions 0..seq_len-1; a
    standalone draft holds tokens 0..seq_len (the pending bonus included). Within dtype
    tolerance. Catches position, slot, page-copy and compaction bugs in one check.
    Returns the number of requests checked."""
    tol = KV_TOL[engine.dtype]
    for fr in trace.finished:
        n, toks = fr.seq_len, fr.tokens
        _, hidden, k, v = reference_prefill(engine.target, toks[:n], engine.device)
        for layer, got in enumerate(fr.target_kv):
            _compare("target", rid=fr.rid, layer=layer, got=got[:, :n], k=k[layer], v=v[layer],
                     tol=tol)
        if engine.spec is None:
            continue
        dk, dv, m = reference_draft_kv(engine, toks, n, hidden)
        for layer, got in enumerate(fr.draft_kv):
            _compare("draft", rid=fr.rid, layer=layer, got=got[:, :m], k=dk[layer], v=dv[layer],
                     tol=tol)
    return len(trace.finished)


@torch.no_grad()
def check_live_kv(engine, reqs) -> int:
    """Oracle 3 between steps: the committed target and draft KV of every running request
    equals a dense reference prefill of its committed tokens, as check_kv_content says for
    finished ones (same snapshot, taken now). Returns the number of requests checked."""
    from specdec.trace import TraceRecorder
    snap = TraceRecorder(engine.page_size, keep_kv_slots=False)
    snap.on_finish(engine, list(reqs))
    return check_kv_content(snap, engine)


def reference_draft_kv(engine, toks: list[int], n: int, hidden):
    """The drafter's dense reference KV of a request with n committed tokens, and how many
    positions of it are committed: EAGLE rows 0..n-1 consume (h_p, token p+1); a standalone
    draft covers tokens 0..n, the pending bonus included."""
    if engine.drafter.shifted:
        _, _, dk, dv = reference_prefill(engine.drafter, toks[1:n + 1], engine.device,
                                         hidden_states=hidden)
        return dk, dv, n
    _, _, dk, dv = reference_prefill(engine.drafter, toks[:n + 1], engine.device)
    return dk, dv, n + 1


def prop_kv_content(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 3: committed target and draft KV equal a dense reference prefill."""
    eng, _ = traced(cfg, device or default_device())
    check_kv_content(eng.recorder, eng)


LAW = Law(
    name="kv_content", rank=30, prop=prop_kv_content, config=RunConfig,
    summary="committed target and draft KV == a dense reference prefill (oracle 3)",
    strategy=engine_runs(sampled=True, prefix=(False, True)),
    slices=grid(draft=("eagle", "self", "perturbed"), cuda_graph=(False, True)),
    controls=("tests/test_oracles_not_vacuous.py::test_kv_content_oracle",
              "cases/graph_pad_stale_positions"))
