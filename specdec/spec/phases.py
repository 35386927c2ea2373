"""The captured phases of a round: each declares its inputs and a forward over buffers.

The same `forward` runs eagerly (md=None: metadata initialised per forward on the batch as it
runs) and inside graph capture (md: static metadata refilled at every replay by the
backend's replay entry point). Nothing here syncs with the host. Write slots that follow from
req_to_token are derived in `prepare` (inside the capture), not handed in as inputs.

Each phase's inputs, what its `prepare` derives and its outputs are frozen dataclasses; the
live inputs a caller hands the runner and the padded ones the phase runs on have the same
type (specdec/graphs/runner.py pads the fields the phase's `inputs` names).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.graphs.runner import SEQ_LEN_FILL, InputSpec
from specdec.spec.context import Hooks, ModelKV, Paging
from specdec.spec.select import fast_topk


def _run(kv: ModelKV, *, fb, md, recorder, logit_rows=None, num_padded: int = 0, eager_md=None):
    fb.num_padded = num_padded
    if md is None and eager_md is not None:
        fb.attn_metadata = eager_md  # only the verify_metadata_before_padding fault
    elif md is None:
        kv.backend.init_forward_metadata(fb)
    else:
        fb.attn_metadata = md
    logits, hidden = kv.model(fb, kv.backend, logit_rows)
    if md is None and recorder is not None:
        recorder.on_forward(fb, logits, hidden, graph=False)
    return logits, hidden


def extend_slots(kernels, req_to_token, req_pool_indices, start, width: int) -> torch.Tensor:
    """Slots of positions start .. start+width-1 of each request, request-major: where a
    forward of `width` rows per request writes its KV. Padded requests (reserved row 0) get
    reserved slot 0."""
    loc = torch.empty(req_pool_indices.shape[0] * width, dtype=torch.int64,
                      device=req_to_token.device)
    kernels.assign_extend_cache_locs(req_pool_indices, req_to_token, start, start + width, loc)
    return loc


@dataclass(frozen=True)
class WriteSlots:
    """What a target forward's `prepare` derives: the slot each input row writes its KV to."""

    out_cache_loc: torch.Tensor  # int64, one per input row


class Phase:
    """A phase the runner (specdec/graphs/runner.py) runs eagerly or replays from a graph.

    In the runner's order: `inputs` names the fields of `input_type` that the runner pads
    (their InputSpec); `extra_static` (before a capture) and `load_extra` (before every run)
    give the other fields of the padded inputs; `prepare` derives on the device what follows
    from them (captured with the forward); `forward` returns the phase's outputs;
    `slice_outputs` cuts them back to the live batch as fresh tensors."""

    inputs: dict[str, InputSpec] = {}
    input_type: type
    recorded_hidden = "hidden"  # which output the trace records as the forward's hidden states

    def __init__(self, kv: ModelKV, paging: Paging, kernels, hooks: Hooks) -> None:
        self.kv, self.paging, self.kernels, self.hooks = kv, paging, kernels, hooks
        self.device = paging.device

    def extra_static(self, size, static) -> dict:
        return {}

    def load_extra(self, live, bs, size, static) -> dict:
        return {}

    def prepare(self, x, size):
        """Inputs derived on the device from the padded inputs (captured with the forward)."""
        return None

    def capture_metadata(self, x, prep, size):
        return self.kv.backend.init_forward_metadata_capture_cuda_graph(self.batch(x, prep, size))

    def replay_metadata(self, x, prep, size, md) -> None:
        self.kv.backend.init_forward_metadata_replay_cuda_graph(self.batch(x, prep, size), md)

    def after_replay(self, x, *, prep, size, bs, md, out) -> None:
        recorder = self.hooks.recorder
        if recorder is not None:
            fb = self.batch(x, prep, size)
            fb.attn_metadata, fb.num_padded = md, size - bs
            hidden = getattr(out, self.recorded_hidden) if self.recorded_hidden else None
            recorder.on_forward(fb, out.logits, hidden, graph=True)


# -- plain decode (the spec=None baseline) ---------------------------------------------------
@dataclass(frozen=True)
class DecodeInputs:
    input_ids: torch.Tensor         # [bs] each request's pending token
    positions: torch.Tensor         # [bs] its position: the committed length
    req_pool_indices: torch.Tensor  # [bs] request rows (padding: reserved row 0)
    seq_lens: torch.Tensor          # [bs] committed target length


@dataclass(frozen=True)
class DecodeOutputs:
    logits: torch.Tensor  # [bs, V]


class DecodePhase(Phase):
    """Plain decode (the spec=None baseline): one row per request."""

    inputs = {"input_ids": InputSpec(1), "positions": InputSpec(1),
              "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL)}
    input_type = DecodeInputs
    recorded_hidden = None  # the decode step keeps no hidden states

    def prepare(self, x: DecodeInputs, size) -> WriteSlots:
        return WriteSlots(extend_slots(self.kernels, self.paging.req_to_token,
                                       x.req_pool_indices, x.seq_lens, 1))

    def batch(self, x: DecodeInputs, prep: WriteSlots, size) -> ForwardBatch:
        return ForwardBatch(mode=ForwardMode.DECODE, input_ids=x.input_ids, positions=x.positions,
                            out_cache_loc=prep.out_cache_loc,
                            req_pool_indices=x.req_pool_indices, seq_lens=x.seq_lens,
                            kv_prefix_lens=x.seq_lens,
                            extend_lens=torch.ones_like(x.seq_lens))

    def forward(self, x: DecodeInputs, prep: WriteSlots, size, md, bs=None) -> DecodeOutputs:
        logits, _ = _run(self.kv, fb=self.batch(x, prep, size), md=md, recorder=self.hooks.recorder,
                         num_padded=size - (bs or size))
        return DecodeOutputs(logits)

    def slice_outputs(self, out: DecodeOutputs, bs) -> DecodeOutputs:
        return DecodeOutputs(out.logits[:bs].clone())


# -- target verify ---------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyInputs:
    input_ids: torch.Tensor           # [bs*ndt] the tree's tokens, the bonus first
    positions: torch.Tensor           # [bs*ndt] seq_len + depth
    req_pool_indices: torch.Tensor    # [bs]
    seq_lens: torch.Tensor            # [bs] committed target length
    custom_mask: torch.Tensor | None  # FULL_MASK; None: the captured round builds it itself
    seq_lens_sum: int                 # host sum of the live seq_lens (an upper bound, section 10)
    padded_seq_lens_sum: int = 0      # the same over the padded batch (load_extra): what
    #                                   metadata sees, and where the mask it reads ends
    req_page_table: torch.Tensor | None = None  # the captured round's, shared by its forwards


@dataclass(frozen=True)
class VerifyOutputs:
    logits: torch.Tensor  # [bs*ndt, V]
    hidden: torch.Tensor  # [bs*ndt, H]


class VerifyPhase(Phase):
    """Target verify: ndt tree rows per request over prefix + tree mask."""

    input_type = VerifyInputs

    def __init__(self, target: ModelKV, *, paging: Paging, kernels, hooks: Hooks, ndt: int,
                 max_context: int) -> None:
        super().__init__(target, paging, kernels, hooks)
        self.ndt, self.max_context = ndt, max_context
        self.inputs = {"input_ids": InputSpec(ndt), "positions": InputSpec(ndt),
                       "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL)}

    def prepare(self, x: VerifyInputs, size) -> WriteSlots:
        """Verify writes node t of request b at req_to_token[b, seq_len + t]."""
        return WriteSlots(extend_slots(self.kernels, self.paging.req_to_token,
                                       x.req_pool_indices, x.seq_lens, self.ndt))

    def extra_static(self, size, static):
        padded_sum = size * SEQ_LEN_FILL  # capture runs on padding only
        ndt = self.ndt
        if "custom_mask" not in static:
            # FULL_MASK at full context. Each replay writes exactly the part its forward reads
            # (load_extra); the rest stays False, so a short write cannot pass unnoticed.
            n = size * ndt * (self.max_context + ndt)
            static["custom_mask"] = torch.zeros(n, dtype=torch.bool, device=self.device)
        static["custom_mask"][:ndt * padded_sum + size * ndt * ndt].fill_(True)
        return {"custom_mask": static["custom_mask"], "seq_lens_sum": 0,
                "padded_seq_lens_sum": padded_sum}

    def load_extra(self, live, bs, size, static):
        """The tree mask's part this forward reads: the live mask, then True. Without a live
        mask (the captured greedy round builds the tree in its graph): True throughout, the
        prefix columns the tree kernel leaves alone. `live` and `static` (the captured
        inputs, None when eager) are any inputs with `custom_mask` and `seq_lens_sum`."""
        mask, ndt = live.custom_mask, self.ndt
        # Padded requests have seq_len SEQ_LEN_FILL: their FULL_MASK blocks follow, all True.
        # The padded seq_lens_sum says where the mask that this forward reads ends.
        padded_sum = live.seq_lens_sum + (size - bs) * SEQ_LEN_FILL
        if faults.on("graph_seq_lens_sum_unpadded") and static is not None:
            padded_sum = live.seq_lens_sum  # the historical bug: the raw sum
        end = ndt * padded_sum + size * ndt * ndt
        n = 0 if mask is None else mask.numel()
        if static is None:
            pad = torch.ones(end - n, dtype=torch.bool, device=self.device)
            return {"custom_mask": pad if mask is None else torch.cat([mask, pad]),
                    "padded_seq_lens_sum": padded_sum}
        dst = static.custom_mask  # sized for full context: fill only what is read
        if mask is not None:
            dst[:n].copy_(mask)
        dst[n:end].fill_(True)
        return {"custom_mask": dst, "padded_seq_lens_sum": padded_sum}

    def batch(self, x: VerifyInputs, prep: WriteSlots, size) -> ForwardBatch:
        return ForwardBatch(mode=ForwardMode.TARGET_VERIFY, input_ids=x.input_ids,
                            positions=x.positions,
                            out_cache_loc=prep.out_cache_loc, req_pool_indices=x.req_pool_indices,
                            seq_lens=x.seq_lens, kv_prefix_lens=x.seq_lens,
                            seq_lens_sum=x.padded_seq_lens_sum, num_draft_tokens=self.ndt,
                            custom_mask=x.custom_mask, req_page_table=x.req_page_table)

    def forward(self, x: VerifyInputs, prep: WriteSlots, size, md, bs=None) -> VerifyOutputs:
        fb, early = self.batch(x, prep, size), None
        if md is None and bs is not None and bs < size and faults.on("verify_metadata_before_padding"):
            # the historical bug: eager metadata initialised on the batch before it was padded
            early = self.batch(*_live_rows(x, prep, size, bs), bs)
            self.kv.backend.init_forward_metadata(early)
            early = early.attn_metadata
        logits, hidden = _run(self.kv, fb=fb, md=md, recorder=self.hooks.recorder,
                              num_padded=size - (bs or size), eager_md=early)
        return VerifyOutputs(logits, hidden)

    def slice_outputs(self, out: VerifyOutputs, bs) -> VerifyOutputs:
        n = bs * self.ndt
        return VerifyOutputs(out.logits[:n].clone(), out.hidden[:n].clone())


def _live_rows(x: VerifyInputs, prep: WriteSlots, size: int, bs: int):
    """The padded verify inputs cut back to the first bs requests (the mask kept whole)."""
    def cut(t):
        return t[:t.shape[0] // size * bs]
    return (dataclasses.replace(x, input_ids=cut(x.input_ids), positions=cut(x.positions),
                                req_pool_indices=cut(x.req_pool_indices),
                                seq_lens=cut(x.seq_lens)),
            WriteSlots(cut(prep.out_cache_loc)))


# -- draft extend after decode ---------------------------------------------------------------
@dataclass(frozen=True)
class DraftExtendInputs:
    input_ids: torch.Tensor         # [bs*ndt] the compacted accepted path first
    hidden: torch.Tensor            # [bs*ndt, H] the target's hidden states of those rows
    req_pool_indices: torch.Tensor  # [bs]
    seq_lens: torch.Tensor          # [bs] committed target length after the round
    kv_prefix_lens: torch.Tensor    # [bs] the draft prefix before the round
    accept_lens: torch.Tensor       # [bs] accepted drafts + 1 (padding: 0)
    req_page_table: torch.Tensor | None = None  # the captured round's, shared by its forwards


@dataclass(frozen=True)
class DraftExtendPrepared:
    positions: torch.Tensor      # [bs*ndt] prefix + j (0 on padded requests, section 8)
    out_cache_loc: torch.Tensor  # [bs*ndt] rows past accept_lens (and padded ones): slot 0


@dataclass(frozen=True)
class DraftExtendOutputs:
    """Row accept_lens - 1 of each request: the next round's step-0 candidates and hidden
    state (already stored in the draft state pool by the forward)."""

    logits: torch.Tensor      # [bs, V]
    topk_p: torch.Tensor      # [bs, topk]
    topk_index: torch.Tensor  # [bs, topk]
    hidden: torch.Tensor      # [bs, H]


class DraftExtendPhase(Phase):
    """Draft extend after decode: ndt rows per request over the compacted accepted path at
    positions prefix .. prefix+ndt-1; row accept_lens-1 gives the next round's candidates and
    hidden state, which the forward stores in the draft state pool (by request row)."""

    recorded_hidden = None  # the graph keeps only the selected rows' hidden states
    input_type = DraftExtendInputs

    def __init__(self, draft: ModelKV, *, paging: Paging, kernels, hooks: Hooks, state, spec,
                 target_hidden_size: int, dtype: torch.dtype) -> None:
        super().__init__(draft, paging, kernels, hooks)
        self.state = state  # the draft state pool (specdec/memory/req_pool.py)
        self.ndt, self.topk, self.num_steps = spec.ndt, spec.topk, spec.num_steps
        # "hidden" is the target's verify output (the EAGLE input); a standalone draft's own
        # hidden size may differ from it. accept_lens pads to 0: a real request accepts >= 1.
        ndt, h = spec.ndt, target_hidden_size
        self.inputs = {"input_ids": InputSpec(ndt), "hidden": InputSpec(ndt, (h,), dtype),
                       "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL),
                       "kv_prefix_lens": InputSpec(1, pad=SEQ_LEN_FILL),
                       "accept_lens": InputSpec(1, pad=0)}

    def prepare(self, x: DraftExtendInputs, size) -> DraftExtendPrepared:
        """Positions prefix + j (0 on padded requests, section 8); rows past accept_lens (and
        padded ones) write reserved slot 0."""
        ndt, rows = self.ndt, x.req_pool_indices
        j = torch.arange(ndt, device=self.device)[None, :]
        real = (rows > 0)[:, None]  # row 0 is the reserved request row of padding
        pos = torch.where(real, x.kv_prefix_lens[:, None] + j, 0)
        slots = extend_slots(self.kernels, self.paging.req_to_token, rows, x.kv_prefix_lens,
                             ndt).view(size, ndt)
        loc = torch.where(j < x.accept_lens[:, None], slots, 0)
        if faults.on("stale_draft_kv_after_accept"):
            loc = torch.zeros_like(loc)  # the historical bug: accepted tokens' draft KV not rewritten
        return DraftExtendPrepared(pos.reshape(-1), loc.reshape(-1))

    def batch(self, x: DraftExtendInputs, prep: DraftExtendPrepared, size) -> ForwardBatch:
        return ForwardBatch(mode=ForwardMode.DRAFT_EXTEND, input_ids=x.input_ids,
                            positions=prep.positions,
                            out_cache_loc=prep.out_cache_loc, req_pool_indices=x.req_pool_indices,
                            seq_lens=x.seq_lens,
                            kv_prefix_lens=x.kv_prefix_lens,
                            extend_lens=torch.full_like(x.seq_lens, self.ndt),
                            hidden_states=x.hidden, req_page_table=x.req_page_table)

    def forward(self, x: DraftExtendInputs, prep: DraftExtendPrepared, size, md,
                bs=None) -> DraftExtendOutputs:
        width = self.ndt
        if md is not None and faults.on("draft_extend_width_steps_plus_one"):
            width = self.num_steps + 1  # the historical bug: the graph's row stride
        last = (x.accept_lens - 1).clamp(min=0)  # padded requests: their row 0
        rows = torch.arange(size, device=self.device) * width + last
        logits, hidden = _run(self.kv, fb=self.batch(x, prep, size), md=md,
                              recorder=self.hooks.recorder, logit_rows=rows,
                              num_padded=size - (bs or size))
        topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), self.topk)
        out = DraftExtendOutputs(logits, topk_p, topk_index, hidden[rows])
        # Padded requests store into reserved row 0, which draft decode never reads.
        self.state.store(x.req_pool_indices, out.hidden, topk_p, topk_index, logits)
        return out

    def slice_outputs(self, out: DraftExtendOutputs, bs) -> None:
        return None  # the forward stored what the next round needs
