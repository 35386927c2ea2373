"""Oracles: each a function whose docstring states the law it checks. Each raises
OracleFailure naming the first violation; the harness's properties combine them."""
from __future__ import annotations

import torch

from harness.ties import TIE_EPS, compare_greedy

# Largest |draft logit - verify logit| for one model run twice on the same context, per dtype.
LOGIT_TOL = {torch.float32: 2e-3, torch.float16: 0.1, torch.bfloat16: 0.5}


class OracleFailure(AssertionError):
    def __init__(self, oracle: str, detail: str) -> None:
        super().__init__(f"[{oracle}] {detail}")
        self.oracle, self.detail = oracle, detail


def check_lossless(outputs: list[list[int]], references: list[list[int]],
                   margins: list[list[float]], dtype) -> list[str]:
    """Lossless greedy: speculative output equals the non-speculative greedy output token for
    token; a first divergence is allowed only at a tie (oracle 6), which ends that comparison.
    Returns the benign ties it saw."""
    ties = []
    for b, (out, ref, m) in enumerate(zip(outputs, references, margins)):
        ok, what = compare_greedy(out, ref, m, dtype)
        if not ok:
            raise OracleFailure("lossless_greedy", f"request {b}: {what}")
        if what != "identical":
            ties.append(f"request {b}: {what}")
    return ties


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
                raise OracleFailure("self_draft", (
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
                raise OracleFailure("self_draft_acceptance", (
                    f"round {n} request {b}: accepted {a - 1} of {num_steps} drafts with a "
                    f"clear target margin {margin:.3e} at the rejected node"))
            ties += 1
    return ties


def check_metadata_covers_batch(trace) -> int:
    """Section 8: every forward's attention metadata describes the batch exactly as it ran
    (after padding): one write slot per input row. Returns the number of forwards checked."""
    forwards = _all_forwards(trace)
    for i, f in enumerate(forwards):
        rows = f.input_ids.numel()
        if f.write_loc.numel() != rows:
            raise OracleFailure("metadata_shape", (
                f"forward {i} ({f.mode}, graph={f.graph}, {f.num_padded} padded requests): "
                f"metadata has {f.write_loc.numel()} write slots for {rows} input rows"))
    return len(forwards)


def _all_forwards(trace):
    return trace.prefill + [f for r in trace.rounds for f in r.forwards]


def check_eager_graph_bitwise(eager_engine, graph_engine) -> int:
    """Oracle 2, same padded shapes: a batch-invariant eager run and a graph run of the same
    prompts give bit-identical logits and hidden states in every forward (real requests'
    rows; padded lanes read reserved slot 0's leftovers) and identical KV bytes at every real
    slot of the target and draft pools. Returns the number of forwards compared."""
    fa, fb = _all_forwards(eager_engine.recorder), _all_forwards(graph_engine.recorder)
    if [f.mode for f in fa] != [f.mode for f in fb]:
        raise OracleFailure("eager_vs_graph", "the two runs ran different forward sequences")
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
                raise OracleFailure("eager_vs_graph", (
                    f"forward {i} ({x.mode}, graph={y.graph}) {name} differ first at row {row}"))
    page = eager_engine.page_size
    pools = [(eager_engine.target_backend.pool, graph_engine.target_backend.pool, "target")]
    if eager_engine.spec is not None:
        pools.append((eager_engine.draft_backend.pool, graph_engine.draft_backend.pool, "draft"))
    for pa, pb, name in pools:
        for j, (x, y) in enumerate(zip(pa.buffers, pb.buffers)):
            if not torch.equal(x[page:], y[page:]):
                slot = page + int((x[page:] != y[page:]).flatten(1).any(1).nonzero()[0, 0])
                raise OracleFailure("eager_vs_graph", f"{name} KV buffer {j} differs at slot {slot}")
    return len(fa)
