"""Law structure (oracle 1): positions, write and read slots, tree, acceptance, compaction
layout and padding are exactly as the references say, every forward's attention metadata
describes the batch as it ran (section 8), and the allocator ends with every page free.

Observables: the per-forward trace with KV slots kept (specdec/trace.py), the engine's
accounting. Every expectation is computed by the independent references
(harness/references/layout.py, harness/references/tree.py) from the round's slot map, never
by the engine's own layout code. Strategy: harness/strategies/configs.py run_configs."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.base.failure import OracleFailure
from harness.references import layout as L
from harness.references import tree as T
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import traced
from harness.strategies.runs import default_device
from specdec.graphs.runner import SEQ_LEN_FILL as PAD_SEQ_LEN
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.tiers import engine_runs

NAME = "structure"  # the law whose checks this module raises (OracleFailure)


@dataclass(frozen=True)
class SpecShape:
    topk: int
    num_steps: int
    ndt: int
    page_size: int
    shifted: bool  # EAGLE head (True) or standalone draft model (False)


def _first_diff(got: list, want: list) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"first difference at index {i}: got {g}, expected {w}"
    return f"lengths differ: got {len(got)}, expected {len(want)}"


def _expect(oracle: str, where: str, got: list, want: list) -> None:
    if got != want:
        raise OracleFailure(NAME, oracle, f"{where}: {_first_diff(got, want)}")


def _by_mode(rnd, mode):
    return [f for f in rnd.forwards if f.mode == mode]


def check_round_structure(rnd, n: int, s: SpecShape) -> None:
    """Draft positions (contract section 3: forward i runs at prefix + i, the increment after
    the forward), draft write slots per step and the slots each draft row reads (section 4),
    tree = ancestor closure with positions seq_len + depth and children linked in node order
    (section 6), verify write slots, greedy acceptance and the accepted-token layout (stride
    num_steps + 1), the draft extend's positions, slots and compacted tokens (section 7), and
    padded lanes writing only reserved slot 0 (section 8)."""
    seq = rnd.seq_lens.tolist()
    r2t = rnd.req_to_token.long()
    _check_draft_decode(rnd, n, s, seq, r2t)
    target_predict = torch.argmax(rnd.verify_logits, dim=-1).tolist()
    verify = _by_mode(rnd, "target_verify")[0]
    # The round's own draft extend follows its verify (a prefill of requests admitted later,
    # recorded into this round's trace, may follow it in turn).
    after = rnd.forwards[rnd.forwards.index(verify) + 1:]
    extend = next(f for f in after if f.mode == "draft_extend")
    mask_blocks = _tree_masks(rnd.tree[0], seq, s.ndt)
    for b in range(len(seq)):
        where = f"round {n} request {b}"
        tree = T.build_tree(rnd.parent_list[b].tolist(), rnd.top_scores_index[b].tolist(),
                            s.topk, s.num_steps, s.ndt)
        _check_tree_and_verify(rnd, verify=verify, tree=tree, mask_block=mask_blocks[b], b=b,
                               where=where, s=s, seq=seq, r2t=r2t)
        tokens = _check_acceptance(rnd, tree=tree, target_predict=target_predict, b=b, where=where,
                                   s=s)
        _check_extend_request(rnd, extend=extend, want_tokens=tokens, b=b, where=where, s=s,
                              seq=seq, r2t=r2t)
    bs = len(seq)
    _check_padding(verify, bs * s.ndt, f"round {n} verify",
                   reads=[p % s.page_size for p in range(PAD_SEQ_LEN + s.ndt)])
    _check_padding(extend, bs * s.ndt, f"round {n} draft extend")


def _check_draft_decode(rnd, n: int, s: SpecShape, seq: list[int], r2t) -> None:
    """Each draft forward's positions, write slots, per-row read slots and padded lanes."""
    bs = len(seq)
    prefix = [q + (0 if s.shifted else 1) for q in seq]
    flat = [x for b in range(bs) for x in L.draft_out_cache_loc(
        r2t[b].tolist(), prefix[b], s.topk, s.num_steps, s.page_size)]
    per_step = L.per_step_rows(flat, bs, s.topk, s.num_steps)
    for i, f in enumerate(_by_mode(rnd, "draft_decode")):
        where = f"round {n} draft forward {i}"
        want_pos = [L.draft_positions(prefix[b], s.num_steps, s.shifted)[i]
                    for b in range(bs) for _ in range(s.topk)]
        _expect("draft_positions", where, f.positions[:bs * s.topk].tolist(), want_pos)
        _expect("draft_write_slots", where, f.write_loc[:bs * s.topk].tolist(), per_step[i])
        if f.kv_slots:
            for b in range(bs):
                for k in range(s.topk):
                    want = [int(r2t[b, p]) for p in _branch_read_positions(prefix[b], k, i, s)]
                    _expect("draft_read_slots", f"{where} request {b} branch {k}",
                            f.kv_slots[b * s.topk + k], want)
        _check_padding(f, bs * s.topk, where, position=i)


def _check_tree_and_verify(rnd, *, verify, tree, mask_block, b: int, where: str, s: SpecShape,
                           seq: list[int], r2t) -> None:
    """Request b's tree (mask, positions, links, node order) and its verify write slots."""
    rows = slice(b * s.ndt, (b + 1) * s.ndt)
    _expect("tree_mask", where, mask_block, tree["mask"])
    want_pos = [seq[b] + d for d in tree["depth"]]
    _expect("verify_positions", where, rnd.tree[1][rows].tolist(), want_pos)
    _expect("verify_positions", where, verify.positions[rows].tolist(), want_pos)
    _expect("tree_links", where, rnd.tree[3][b].tolist(), tree["next_token"])
    _expect("tree_links", where, rnd.tree[4][b].tolist(), tree["next_sibling"])
    sel = rnd.top_scores_index[b].tolist()
    if sel != sorted(sel):  # section 5: the tree's node order is ascending candidate index
        raise OracleFailure(NAME, "tree_order", f"{where}: top_scores_index {sel} not ascending")
    for node, parent in enumerate(tree["parents"]):
        if parent is not None and parent >= node:
            raise OracleFailure(NAME, "tree_order",
                                f"{where}: node {node} precedes its parent {parent}")
    _expect("verify_write_slots", where, verify.write_loc[rows].tolist(),
            [int(r2t[b, seq[b] + t]) for t in range(s.ndt)])


def _check_acceptance(rnd, *, tree, target_predict: list[int], b: int, where: str,
                      s: SpecShape) -> list[int]:
    """Request b's greedy acceptance and accepted tokens (stride num_steps + 1); returns the
    accepted nodes' target tokens."""
    rows = slice(b * s.ndt, (b + 1) * s.ndt)
    accepted, _, _ = T.verify_greedy(rnd.tree[5][rows].tolist(), tree["parents"],
                                     target_predict[rows], s.num_steps)
    a = int(rnd.accept_lens[b])
    got_nodes = [int(x) - b * s.ndt for x in rnd.accept_index[b, :a].tolist()]
    _expect("greedy_accept", where, got_nodes, accepted)
    w = s.num_steps + 1
    want_tokens = [target_predict[b * s.ndt + node] for node in accepted]
    _expect("accepted_tokens", where, rnd.accepted_tokens[b * w:b * w + a].tolist(), want_tokens)
    return want_tokens


def _check_extend_request(rnd, *, extend, want_tokens: list[int], b: int, where: str,
                          s: SpecShape, seq: list[int], r2t) -> None:
    """Request b's draft extend: positions, write slots (slot 0 past the accepted) and the
    compacted accepted tokens."""
    a = int(rnd.accept_lens[b])
    rows = slice(b * s.ndt, (b + 1) * s.ndt)
    ext_pos = L.draft_extend_positions(seq[b], s.ndt, s.shifted)
    _expect("draft_extend_positions", where, extend.positions[rows].tolist(), ext_pos)
    want_slots = [int(r2t[b, p]) if j < a else 0 for j, p in enumerate(ext_pos)]
    _expect("draft_extend_write_slots", where, extend.write_loc[rows].tolist(), want_slots)
    _expect("draft_extend_tokens", where, extend.input_ids[b * s.ndt:b * s.ndt + a].tolist(),
            want_tokens)


def _branch_read_positions(prefix: int, k: int, i: int, s: SpecShape) -> list[int]:
    """Positions whose slots draft row (branch k, forward i) reads, in virtual order: the full
    prefix pages, branch k's own copy of the prefix tail (per-branch page layout only; branch
    0's is the request's own tail), then its steps 0..i."""
    steps = L.draft_slot_positions(prefix, s.topk, s.num_steps, s.page_size)[k]
    last = prefix % s.page_size if (s.page_size > 1 and s.topk > 1) else 0
    return list(range(prefix - last)) + list(range(steps[0] - last, steps[0])) + steps[:i + 1]


def _tree_masks(tree_mask: torch.Tensor, seq: list[int], ndt: int) -> list[list[list[bool]]]:
    """Per request, the ndt x ndt tree part of the FULL_MASK layout."""
    out, off = [], 0
    for q in seq:
        block = tree_mask[off:off + ndt * (q + ndt)].view(ndt, q + ndt)
        out.append(block[:, q:].tolist())
        off += ndt * (q + ndt)
    return out


def _check_padding(f, real_rows: int, where: str, position: int = 0, reads=None) -> None:
    """Section 8: a padded lane writes only reserved slot 0 and runs at position 0 (draft
    forward i: at 0 + i) of reserved request row 0, its seq_len and prefix length the fill
    value; a padded verify lane reads the reserved page 0 over its whole block (seq_len =
    fill, all ndt tree columns: the padded seq_lens_sum covers it)."""
    if not f.num_padded:
        return
    n = f.num_padded
    for name, got, want in (("req_pool_idx", f.req_pool_indices[-n:], 0),
                            ("seq_len", f.seq_lens[-n:], PAD_SEQ_LEN),
                            ("prefix length", f.kv_prefix_lens[-n:], PAD_SEQ_LEN)):
        if torch.any(got != want):
            raise OracleFailure(NAME, "padding_inputs", f"{where}: padded lanes have {name} "
                                                  f"{got.tolist()}, expected {want}")
    if torch.any(f.write_loc[real_rows:] != 0):
        raise OracleFailure(NAME, "padding_slot_zero", f"{where}: a padded lane writes slot "
                            f"{int(f.write_loc[real_rows:][f.write_loc[real_rows:] != 0][0])}")
    pad_pos = f.positions[real_rows:]
    if torch.any(pad_pos != position):
        raise OracleFailure(NAME, "padding_positions", f"{where}: a padded lane runs at position "
                            f"{int(pad_pos[pad_pos != position][0])}, expected {position}")
    if reads is not None and f.kv_slots:
        for r, got in enumerate(f.kv_slots[real_rows:]):
            _expect("padding_reads", f"{where} padded row {r}", got, reads)


def check_structure(trace, s: SpecShape) -> int:
    """Oracle 1 over every round of a run; returns the number of rounds checked."""
    for n, rnd in enumerate(trace.rounds):
        check_round_structure(rnd, n, s)
    return len(trace.rounds)


def check_recent_structure(rec, shape: SpecShape, first: int = 0) -> int:
    """Between steps of a longer run: oracle 1 over the rounds and forwards the recorder `rec`
    holds (numbered from `first`), which it then drops (a round's later forwards, a prefill
    admitted after it, go unchecked). Returns the next round's number."""
    check_metadata_covers_batch(rec)
    for n, rnd in enumerate(rec.rounds, start=first):
        check_round_structure(rnd, n, shape)
    first += len(rec.rounds)
    for kept in (rec.rounds, rec.prefill, rec.finished, rec.resolved):
        kept.clear()
    return first


def check_metadata_covers_batch(trace) -> int:
    """Section 8: every forward's attention metadata describes the batch exactly as it ran
    (after padding): one write slot per input row. Returns the number of forwards checked."""
    forwards = all_forwards(trace)
    for i, f in enumerate(forwards):
        rows = f.input_ids.numel()
        if f.write_loc.numel() != rows:
            raise OracleFailure(NAME, "metadata_shape", (
                f"forward {i} ({f.mode}, graph={f.graph}, {f.num_padded} padded requests): "
                f"metadata has {f.write_loc.numel()} write slots for {rows} input rows"))
    return len(forwards)


def all_forwards(trace) -> list:
    """Every forward of a trace, prefill first, in the order they ran."""
    return trace.prefill + [f for r in trace.rounds for f in r.forwards]


def prop_structure(cfg: RunConfig, device: str | None = None) -> None:
    """Oracle 1: positions, write and read slots, tree, acceptance, compaction layout and
    padding are exactly as the references say; the allocator ends with every page free."""
    eng, _ = traced(cfg, device or default_device(), keep_kv_slots=True)
    check_metadata_covers_batch(eng.recorder)
    check_structure(eng.recorder, SpecShape(cfg.topk, cfg.num_steps, cfg.ndt, cfg.page_size,
                                            eng.drafter.shifted))
    eng.check_accounting()


LAW = Law(
    name="structure", rank=10, prop=prop_structure, config=RunConfig,
    summary="positions, write slots, tree, acceptance, compaction, padding and metadata of "
            "every round == the layout and tree references (oracle 1)",
    strategy=engine_runs(prefix=(False, True)),
    slices=grid(page_size=(1, 4, 64), cuda_graph=(False, True)),
    controls=("tests/test_oracles_not_vacuous.py::test_structure_oracle",
              "tests/test_oracles_not_vacuous.py::test_structure_padding_oracle",
              "tests/test_laws_not_vacuous.py::test_structure_rejects_tree_nodes_in_score_order",
              "cases/draft_positions_early_increment"))
