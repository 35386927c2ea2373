"""The prefix-cache law: the cache is transparent (contract section 11).

Observables: outputs with the cache and without it, accounting and live KV after every
step. References: the engine without the cache, harness/references/dense.py (live KV),
harness/references/ties.py. Strategy: harness/strategies/configs.py run_configs with the
prefix cache; workloads from harness/strategies/prefix_workloads.py."""
from __future__ import annotations

import dataclasses

from harness.laws.kv_content import check_live_kv
from harness.base.failure import OracleFailure
from harness.strategies.drawn_run import build_engine, greedy_reference_outputs, run
from harness.strategies.runs import default_device
from harness.strategies.configs import RunConfig
from harness.references.ties import compare_greedy
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "prefix_transparent"  # the law whose checks this module raises (OracleFailure)

FLUSH_EVERY = 5  # steps: a flush while requests run, now and then


def _accounting(eng, live=None) -> None:
    try:
        eng.check_accounting(live)
    except AssertionError as err:
        raise OracleFailure(NAME, NAME, f"accounting: {err}") from None


def prop_prefix_transparent(cfg: RunConfig, device: str | None = None) -> None:
    """The prefix cache is transparent. The shared-prefix workload of `cfg` (prompts that
    repeat, extend, continue or diverge from earlier ones at page boundaries, in waves, in a
    pool from tight to ample) gives the same greedy outputs with the cache as without it
    (ties as oracle 6). With the cache, after every step: the allocator accounting holds
    (every page free, owned by one running request, or held by the tree with a reference
    count equal to the number of running requests using it) and the committed target and
    draft KV of every running request equals a dense reference prefill (oracle 3, over
    reused slots). A flush while requests run frees only unreferenced pages; after the last
    request and a final flush every page is free."""
    device = device or default_device()
    cfg = dataclasses.replace(cfg, prefix_cache=True)
    plain = build_engine(cfg, device, cache=False)
    want = [o.tokens for o in run(cfg, plain)]
    eng = build_engine(cfg, device, cache=True)
    steps = [0]

    def on_step(e) -> None:
        steps[0] += 1
        _accounting(e)
        check_live_kv(e, e.scheduler.running)
        if steps[0] % FLUSH_EVERY == 0:
            e.flush_prefix_cache()
            _accounting(e)
    got = [o.tokens for o in run(cfg, eng, on_step=on_step)]
    _, margins = greedy_reference_outputs(cfg, device, plain)
    for i, (g, w) in enumerate(zip(got, want)):
        ok, what = compare_greedy(g, w, margins[i], eng.dtype)
        if not ok:
            raise OracleFailure(NAME, NAME, f"request {i} with the cache: {what}")
    eng.flush_prefix_cache()
    _accounting(eng, [])
    alloc = eng.memory.allocator
    if alloc.num_free != alloc.num_pages - 1:
        raise OracleFailure(NAME, NAME, f"after a final flush {alloc.num_free} of "
                            f"{alloc.num_pages - 1} pages are free")


LAW = Law(
    name="prefix_transparent", rank=80, prop=prop_prefix_transparent, config=RunConfig,
    summary="the radix prefix cache is transparent: outputs, KV and accounting as without it "
            "(section 11)",
    strategy=engine_runs(prefix=(True,)),
    slices=grid(4, draft=("eagle", "self", "perturbed")),  # graphs on and off drawn
    controls=("tests/test_laws_not_vacuous.py::test_prefix_law_rejects_uncounted_references",
              "cases/prefix_insert_uncommitted"))
