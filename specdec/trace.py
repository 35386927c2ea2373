"""A per-forward and per-round trace, recorded only while a recorder is attached.

`engine.recorder = TraceRecorder()` turns it on; with `engine.recorder = None` (the default)
the engine does no tracing work at all. Everything is copied to the host, so later forwards
cannot change what was recorded.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


def _host(x: torch.Tensor | None) -> torch.Tensor | None:
    return None if x is None else x.detach().to("cpu", copy=True)


@dataclass
class ForwardRecord:
    mode: str                    # ForwardMode value
    graph: bool                  # replayed from a CUDA graph (or its CPU stand-in)
    input_ids: torch.Tensor
    positions: torch.Tensor
    write_loc: torch.Tensor      # the slots baked into attention metadata
    kv_slots: list[list[int]]    # per row: the slots its attention read, in virtual order
    seq_lens: torch.Tensor       # committed target lengths
    kv_prefix_lens: torch.Tensor
    req_pool_indices: torch.Tensor
    num_padded: int
    draft_step: int
    logits: torch.Tensor         # [rows with logits, V] float32
    hidden: torch.Tensor


@dataclass
class FinishedRequest:
    """A request at the end of generate(), before its pages are released."""

    rid: int
    tokens: list[int]              # prompt + every committed token + the pending bonus
    seq_len: int                   # committed target KV length
    slots: torch.Tensor            # slot of each position 0..seq_len (the bonus's included)
    target_kv: list[torch.Tensor]  # per layer [K; V] at those slots: [2, seq_len+1, Hkv, D]
    draft_kv: list[torch.Tensor]


@dataclass
class RoundRecord:
    req_pool_indices: torch.Tensor | None = None   # the round's requests
    seq_lens: torch.Tensor | None = None           # committed lengths at the round's start
    req_to_token: torch.Tensor | None = None       # their slot maps after the round's reservation
    forwards: list[ForwardRecord] = field(default_factory=list)
    parent_list: torch.Tensor | None = None        # [bs, topk*(num_steps-1)+1] inputs' global indices
    top_scores_index: torch.Tensor | None = None   # [bs, ndt-1] global candidate index per node
    draft_tokens: torch.Tensor | None = None       # [bs, ndt-1]
    draft_out_cache_loc: torch.Tensor | None = None
    tree: tuple | None = None                      # build_tree_kernel_efficient's outputs
    verify_logits: torch.Tensor | None = None      # [bs*ndt, V]
    accept_index: torch.Tensor | None = None
    accept_lens: torch.Tensor | None = None
    accepted_tokens: torch.Tensor | None = None    # [bs*(num_steps+1)], stride num_steps+1
    rids: list[int] | None = None                  # the round's request ids, in batch order


def row_kv_slots(md, page_size: int) -> list[list[int]]:
    """Expand attention metadata into the slots each row reads (mask applied)."""
    pt, seqs, lens = md.page_table.cpu(), md.row_seq.cpu(), md.row_kv_len.cpu()
    start, offset, mask = md.row_mask_start.cpu(), md.row_mask_offset.cpu(), md.custom_mask.cpu()
    rows = []
    for r in range(seqs.shape[0]):
        n, s = int(lens[r]), int(seqs[r])
        p = torch.arange(n)
        slots = pt[s, p // page_size].long() * page_size + p % page_size
        if int(offset[r]) >= 0:
            m0 = int(start[r])
            keep = torch.ones(n, dtype=torch.bool)
            keep[m0:] = mask[int(offset[r]):int(offset[r]) + n - m0]
            slots = slots[keep]
        rows.append(slots.tolist())
    return rows


class TraceRecorder:
    def __init__(self, page_size: int, keep_kv_slots: bool = True) -> None:
        self.page_size = page_size
        self.keep_kv_slots = keep_kv_slots
        self.prefill: list[ForwardRecord] = []
        self.rounds: list[RoundRecord] = []
        self.finished: list[FinishedRequest] = []
        self.resolved: list[tuple] = []  # (rid, seq_len, output length) after each resolved round
        self._current: RoundRecord | None = None

    def begin_round(self, req_pool_indices, seq_lens, req_to_token,
                    rids: list[int] | None = None) -> None:
        self._current = RoundRecord(_host(req_pool_indices), _host(seq_lens),
                                    _host(req_to_token[req_pool_indices]), rids=rids)
        self.rounds.append(self._current)

    def on_finish(self, engine, reqs) -> None:
        """Snapshot each request's committed KV before generate() releases its pages."""
        r2t = engine.req_to_token
        pools = [engine.target_backend.pool]
        if engine.spec is not None:
            pools.append(engine.draft_backend.pool)
        for r in reqs:
            slots = r2t[r.row, :r.seq_len + 1].long()
            kv = [[torch.stack([k[slots], v[slots]]).cpu() for k, v in
                   zip(p.k_buffers, p.v_buffers)] for p in pools]
            self.finished.append(FinishedRequest(r.rid, r.prompt + r.output, r.seq_len,
                                                 slots.cpu(), kv[0], kv[1] if len(kv) > 1 else []))

    def on_resolve(self, reqs) -> None:
        """A round's results reached the host (overlap: one step after its launch)."""
        self.resolved += [(r.rid, r.seq_len, len(r.output)) for r in reqs]

    def on_forward(self, fb, logits, hidden, graph: bool) -> None:
        md = fb.attn_metadata
        rec = ForwardRecord(
            fb.mode.value, graph, _host(fb.input_ids), _host(fb.positions), _host(md.write_loc),
            row_kv_slots(md, self.page_size) if self.keep_kv_slots else [],
            _host(fb.seq_lens), _host(fb.kv_prefix_lens), _host(fb.req_pool_indices),
            fb.num_padded, fb.draft_step, _host(logits), _host(hidden))
        (self._current.forwards if self._current is not None else self.prefill).append(rec)

    def on_draft(self, tree) -> None:
        self._current.parent_list = _host(tree.parent_list)
        self._current.top_scores_index = _host(tree.top_scores_index)
        self._current.draft_tokens = _host(tree.draft_tokens)
        self._current.draft_out_cache_loc = _host(tree.out_cache_loc)

    def on_verify(self, built, logits, accept_index, accept_lens, accepted_tokens=None) -> None:
        self._current.tree = tuple(_host(t) for t in built)
        self._current.verify_logits = _host(logits)
        self._current.accept_index = _host(accept_index)
        self._current.accept_lens = _host(accept_lens)
        self._current.accepted_tokens = _host(accepted_tokens)
