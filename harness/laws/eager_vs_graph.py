"""Law eager_vs_graph (oracle 2): CUDA graphs change how a forward is launched, never what it
computes. Batch-invariant eager == graph bit for bit (same padded shapes): logits and hidden
states of every real row of every forward, KV bytes at every real slot of the target and
draft pools, and the tokens, sampled requests included (same seeds, same coins); greedy plain
eager == graph token for token (different shapes; ties as oracle 6).

Observables: the traces of both runs (every forward's mode, rows, logits, hidden states and
write slots), both engines' KV pools, the output tokens. References: the other run;
harness/references/ties.py; the metadata check of harness/laws/structure.py. Strategy:
harness/strategies/configs.py run_configs."""
from __future__ import annotations

import torch

from harness.base.failure import OracleFailure
from harness.laws.lossless_greedy import check_lossless
from harness.laws.structure import all_forwards, check_metadata_covers_batch
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import greedy_reference_outputs, traced
from harness.strategies.runs import default_device
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "eager_vs_graph"  # the law whose checks this module raises (OracleFailure)


def prop_eager_vs_graph(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 2: batch-invariant eager == graph bit for bit (same padded shapes), sampled
    requests included (same seeds, same coins, same tokens); greedy plain eager == graph
    token for token (different shapes; ties as oracle 6)."""
    device = device or default_device()
    graph, out_g = traced(cfg, device, cuda_graph=True)
    inv, out_i = traced(cfg, device, cuda_graph=False, batch_invariant=True)
    for eng in (graph, inv):
        check_metadata_covers_batch(eng.recorder)
    check_eager_graph_bitwise(inv, graph)
    if out_i != out_g:
        b = next(i for i, (x, y) in enumerate(zip(out_i, out_g)) if x != y)
        raise OracleFailure(NAME, NAME, f"request {b}: eager {out_i[b]} != graph {out_g[b]}")
    # A sampled token may flip at a CDF boundary between different shapes: the greedy
    # requests alone (all, none, or a mix, cfg.samples) are held to plain eager decoding.
    greedy = [b for b in range(cfg.batch_size) if not cfg.samples(b)]
    if not greedy:
        return
    plain, out_e = traced(cfg, device, cuda_graph=False)
    _, margins = greedy_reference_outputs(cfg, device, plain)
    check_lossless([out_g[b] for b in greedy], [out_e[b] for b in greedy],
                   [margins[b] for b in greedy], plain.dtype, ids=greedy)


def check_eager_graph_bitwise(eager_engine, graph_engine) -> int:
    """Oracle 2, same padded shapes: a batch-invariant eager run and a graph run of the same
    prompts give bit-identical logits and hidden states in every forward (real requests'
    rows; padded lanes read reserved slot 0's leftovers) and identical KV bytes at every real
    slot of the target and draft pools. Returns the number of forwards compared."""
    fa, fb = all_forwards(eager_engine.recorder), all_forwards(graph_engine.recorder)
    if [f.mode for f in fa] != [f.mode for f in fb]:
        raise OracleFailure(NAME, NAME, "the two runs ran different forward sequences")
    for i, (x, y) in enumerate(zip(fa, fb)):
        n_req = x.req_pool_indices.numel()
        real = int((x.req_pool_indices > 0).sum())
        for name in ("logits", "hidden"):
            u, v = getattr(x, name), getattr(y, name)
            if u is None or v is None:
                continue
            rows = real * (u.shape[0] // n_req)
            if not torch.equal(u[:rows], v[:rows]):
                row = int((u[:rows] != v[:rows]).flatten(1).any(1).nonzero()[0, 0])
                raise OracleFailure(NAME, NAME, (
                    f"forward {i} ({x.mode}, graph={y.graph}) {name} differ first at row {row}"))
    page = eager_engine.page_size
    pools = [(eager_engine.target_backend.pool, graph_engine.target_backend.pool, "target")]
    if eager_engine.spec is not None:
        pools.append((eager_engine.draft_backend.pool, graph_engine.draft_backend.pool, "draft"))
    for pa, pb, name in pools:
        for j, (x, y) in enumerate(zip(pa.buffers, pb.buffers)):
            if not torch.equal(x[page:], y[page:]):
                slot = page + int((x[page:] != y[page:]).flatten(1).any(1).nonzero()[0, 0])
                raise OracleFailure(NAME, NAME, f"{name} KV buffer {j} differs at slot {slot}")
    return len(fa)


LAW = Law(
    name="eager_vs_graph", rank=40, prop=prop_eager_vs_graph, config=RunConfig,
    summary="CUDA graphs == batch-invariant eager, bit for bit: tokens, forwards, KV (oracle 2)",
    strategy=engine_runs(sampled=True, prefix=(False, True)),
    slices=grid(3, page_size=(1, 16), cuda_graph=(True,)),
    controls=("tests/test_oracles_not_vacuous.py::test_eager_vs_graph_oracle",
              "cases/graph_output_not_captured"))
