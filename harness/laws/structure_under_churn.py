"""Law structure_under_churn (oracle 1 under continuous batching; contract section 8).

Whatever batches ran before, every round keeps oracle 1's structure (harness/laws/structure.py:
positions, write and read slots, tree, acceptance, compaction) and every graph replay's
padded lanes write only reserved slot 0, run at position 0 and read the reserved page; at
the end, the survivors' committed KV equals a dense reference (oracle 3) and every page is
free once they are aborted. The batch size follows a drawn sequence, requests aborted to
shrink it and added to grow it, across coarse captured sizes: a replay pads over static
rows that earlier, larger batches wrote, which the structure law's single-wave runs and
the lifecycle machine's small pools rarely reach.

Observables: the per-forward trace with KV slots (specdec/trace.py), the KV pools, the
engine's accounting. Strategy: harness/strategies/churn.py."""
from __future__ import annotations

import random

from harness.laws.kv_content import check_live_kv
from harness.laws.structure import SpecShape, check_recent_structure
from harness.strategies.churn import ChurnConfig
from harness.strategies.runs import default_device
from specdec import Engine, SpecConfig
from specdec.trace import TraceRecorder
from specdec.validate import reserve_margin
from harness.laws.declaration import Law
from harness.strategies.churn import churn_configs
from harness.strategies.tiers import fixed_strategy


def prop_structure_under_churn(cfg: ChurnConfig, device: str | None = None) -> None:
    """Oracle 1 after every step of a run whose batch grows and shrinks across padded
    captured sizes; oracle 3 and a leak-free pool at its end (module docstring)."""
    device = device or default_device()
    spec = SpecConfig(topk=cfg.topk, num_steps=cfg.num_steps, num_draft_tokens=cfg.ndt)
    new_tokens = len(cfg.sizes) * (cfg.num_steps + 1) + 2  # none finishes on its own
    context = cfg.max_prompt_len + new_tokens + reserve_margin(spec, cfg.page_size, cfg.overlap)
    eng = Engine(model=cfg.model, spec=spec, draft=cfg.draft, page_size=cfg.page_size,
                 device=device, dtype=cfg.dtype, seed=cfg.seed, max_batch=cfg.max_batch,
                 max_context=context, cuda_graph=True, cuda_graph_bs=list(cfg.graph_bs),
                 overlap=cfg.overlap)
    eng.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=True)
    shape = SpecShape(cfg.topk, cfg.num_steps, cfg.ndt, cfg.page_size, eng.drafter.shifted)
    rng = random.Random(cfg.seed)
    live: list[int] = []
    checked = 0
    for want in cfg.sizes:
        while len(live) > want:
            eng.abort(live.pop(rng.randrange(len(live))))
        while len(live) < want:
            prompt = [rng.randrange(eng.cfg.vocab_size)
                      for _ in range(rng.randint(1, cfg.max_prompt_len))]
            live.append(eng.add_request(prompt, new_tokens))
        eng.step()
        checked = check_recent_structure(eng.recorder, shape, checked)
    check_live_kv(eng, eng.scheduler.running)
    for rid in live:
        eng.abort(rid)
    eng.scheduler.drain()  # overlap: the round in flight holds the aborted pages until it resolves
    eng.check_accounting([])


LAW = Law(
    name="structure_under_churn", rank=20, prop=prop_structure_under_churn, config=ChurnConfig,
    summary="oracle 1 and live KV while batches shrink and grow across padded graph buckets",
    strategy=fixed_strategy(churn_configs), shrink=False,
    controls=("tests/test_laws_not_vacuous.py::test_churn_law_rejects_padded_rows_left_stale",))
