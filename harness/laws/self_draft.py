"""Law self_draft (oracle 5): with the target as its own draft, the draft logits that proposed
every tree node equal the target's verify logits at that node's parent (same model, same
context) within dtype tolerance; with topk 1 every round accepts all drafts except at ties.

Observables: the trace's draft-extend and draft-decode logits, top_scores_index, parent_list,
verify logits, accept lengths and indices (specdec/trace.py). Reference: the target itself;
ties as harness/references/ties.py. Strategy: harness/strategies/configs.py run_configs
(draft "self")."""
from __future__ import annotations

import torch

from harness.base.failure import OracleFailure
from harness.references.ties import TIE_EPS
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import traced
from harness.strategies.runs import default_device
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "self_draft"  # the law whose checks this module raises (OracleFailure)

# Largest |draft logit - verify logit| for one model run twice on the same context, per dtype.
LOGIT_TOL = {torch.float32: 2e-3, torch.float16: 0.1, torch.bfloat16: 0.5}


def _draft_extends_by_row(records) -> dict[int, torch.Tensor]:
    """req_pool_idx -> the logits of the latest draft-extend row kept for that request."""
    out = {}
    for f in records:
        if f.mode == "draft_extend":
            for i, row in enumerate(f.req_pool_indices.tolist()):
                out[row] = f.logits[i]
    return out


def producing_logits(rnd, prev_extend: dict[int, torch.Tensor], topk: int):
    """Yield (b, node, parent_node, draft logits that proposed node) for every tree node >= 1.

    A depth-1 node came from the draft extend's kept row; a node with global candidate index
    g >= topk came from draft forward (g//topk - 1)//topk, row b*topk + (g//topk - 1) % topk,
    and its parent is the tree node whose global index is parent_list[b, g//topk]."""
    decode = [f for f in rnd.forwards if f.mode == "draft_decode"]
    tsi = rnd.top_scores_index
    rows = rnd.forwards[0].req_pool_indices.tolist() if rnd.forwards else []
    for b in range(tsi.shape[0]):
        nodes = tsi[b].tolist()
        for i, g in enumerate(nodes, start=1):
            if g < topk:
                yield b, i, 0, prev_extend[rows[b]]
                continue
            j = g // topk - 1
            parent_g = int(rnd.parent_list[b, g // topk])
            if parent_g not in nodes:
                continue  # parent not selected (score tie): the node is unreachable
            yield b, i, 1 + nodes.index(parent_g), decode[j // topk].logits[b * topk + j % topk]


def check_self_draft_logits(trace, topk: int, ndt: int, dtype) -> int:
    """Self-draft (oracle 5): with the target as its own draft, the draft logits that proposed
    every tree node equal the target's verify logits at that node's parent (same model, same
    context) within dtype tolerance. Any draft position, slot or ancestry error breaks it.
    Returns the number of nodes checked."""
    tol, checked = LOGIT_TOL[dtype], 0
    history = list(trace.prefill)
    for n, rnd in enumerate(trace.rounds):
        prev = _draft_extends_by_row(history)
        for b, node, parent, draft_logits in producing_logits(rnd, prev, topk):
            target = rnd.verify_logits[b * ndt + parent]
            diff = float((draft_logits - target).abs().max())
            if diff > tol:
                raise OracleFailure(NAME, NAME, (
                    f"round {n} request {b} node {node} (parent {parent}): draft logits differ "
                    f"from the verify logits by {diff:.3e} > {tol:.0e}"))
            checked += 1
        history.extend(rnd.forwards)
    return checked


def check_total_acceptance(trace, num_steps: int, ndt: int, dtype) -> int:
    """Self-draft, topk 1 (oracle 5): every round accepts all num_steps drafts, except where the
    target's top-2 logits at the first rejected node are within the tie epsilon.
    Returns the number of tie-excused rejections."""
    eps, ties = TIE_EPS[dtype], 0
    for n, rnd in enumerate(trace.rounds):
        for b, a in enumerate(rnd.accept_lens.tolist()):
            if a == num_steps + 1:
                continue
            last = int(rnd.accept_index[b, a - 1])
            top2 = torch.topk(rnd.verify_logits[last], 2).values
            margin = float(top2[0] - top2[1])
            if margin >= eps:
                raise OracleFailure(NAME, "self_draft_acceptance", (
                    f"round {n} request {b}: accepted {a - 1} of {num_steps} drafts with a "
                    f"clear target margin {margin:.3e} at the rejected node"))
            ties += 1
    return ties


def prop_self_draft(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 5: with the target as its own draft, draft logits equal verify logits node by
    node; topk 1 accepts every draft except at ties."""
    eng, _ = traced(cfg, device or default_device(), draft="self")
    check_self_draft_logits(eng.recorder, cfg.topk, cfg.ndt, eng.dtype)
    if cfg.topk == 1:
        check_total_acceptance(eng.recorder, cfg.num_steps, cfg.ndt, eng.dtype)


# Found by `harness check` on the GPU: a tree smaller than its depth (ndt < num_steps + 1).
FOUND = tuple(RunConfig(topk=2, num_steps=2, ndt=2, page_size=p, draft="self", batch_size=1,
                        max_prompt_len=1, max_new_tokens=2, seed=0) for p in (1, 4, 64))

LAW = Law(
    name="self_draft", rank=60, prop=prop_self_draft, config=RunConfig,
    summary="self-draft logits == verify logits; with topk 1 every draft is accepted (oracle 5)",
    strategy=engine_runs(prefix=(False, True)),
    slices=grid(page_size=(1, 4, 64), draft=("self",)), examples=FOUND,
    controls=("tests/test_oracles_not_vacuous.py::test_self_draft_oracles",
              "cases/page_tail_not_duplicated"))
