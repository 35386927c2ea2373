"""The captured phases of a round: each declares its inputs and a forward over buffers.

The same `forward` runs eagerly (md=None: metadata initialised per forward on the batch as it
runs) and inside graph capture (md: static metadata refilled at every replay by the
backend's replay entry point). Nothing here syncs with the host. Write slots that follow from
req_to_token are derived in `prepare` (inside the capture), not handed in as inputs.
"""
from __future__ import annotations

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.graphs.runner import SEQ_LEN_FILL, InputSpec
from specdec.spec.select import fast_topk


def _run(model, backend, fb, md, recorder, logit_rows=None, num_padded: int = 0,
         eager_md=None):
    fb.num_padded = num_padded
    if md is None and eager_md is not None:
        fb.attn_metadata = eager_md  # only the verify_metadata_before_padding fault
    elif md is None:
        backend.init_forward_metadata(fb)
    else:
        fb.attn_metadata = md
    logits, hidden = model(fb, backend, logit_rows)
    if md is None and recorder is not None:
        recorder.on_forward(fb, logits, hidden, graph=False)
    return logits, hidden


def extend_slots(engine, req_pool_indices, start, width: int) -> torch.Tensor:
    """Slots of positions start .. start+width-1 of each request, request-major: where a
    forward of `width` rows per request writes its KV. Padded requests (reserved row 0) get
    reserved slot 0."""
    loc = torch.empty(req_pool_indices.shape[0] * width, dtype=torch.int64, device=engine.device)
    engine.kernels.assign_extend_cache_locs(req_pool_indices, engine.req_to_token, start,
                                            start + width, loc)
    return loc


class Phase:
    inputs: dict[str, InputSpec] = {}
    recorded_hidden = "hidden"  # which output the trace records as the forward's hidden states

    def __init__(self, engine) -> None:
        self.e = engine

    def extra_static(self, size, static):
        return {}

    def load_extra(self, live, bs, size, static_views):
        return {}

    def prepare(self, views, size) -> dict:
        """Inputs derived on the device from the padded inputs (captured with the forward)."""
        return {}

    def capture_metadata(self, views, size):
        return self.e_backend.init_forward_metadata_capture_cuda_graph(self.batch(views, size))

    def replay_metadata(self, views, size, md) -> None:
        self.e_backend.init_forward_metadata_replay_cuda_graph(self.batch(views, size), md)

    def after_replay(self, views, size, bs, md, outs) -> None:
        if self.e.recorder is not None:
            fb = self.batch(views, size)
            fb.attn_metadata, fb.num_padded = md, size - bs
            hidden = outs[self.recorded_hidden] if self.recorded_hidden else None
            self.e.recorder.on_forward(fb, outs["logits"], hidden, graph=True)


class DecodePhase(Phase):
    """Plain decode (the spec=None baseline): one row per request."""

    inputs = {"input_ids": InputSpec(1), "positions": InputSpec(1),
              "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL)}

    @property
    def e_backend(self):
        return self.e.target_backend

    def prepare(self, v, size):
        return {"out_cache_loc": extend_slots(self.e, v["req_pool_indices"], v["seq_lens"], 1)}

    def batch(self, v, size):
        return ForwardBatch(ForwardMode.DECODE, v["input_ids"], v["positions"], v["out_cache_loc"],
                            v["req_pool_indices"], v["seq_lens"], v["seq_lens"],
                            extend_lens=torch.ones_like(v["seq_lens"]))

    def forward(self, v, size, md, bs=None):
        logits, _ = _run(self.e.target, self.e_backend, self.batch(v, size), md, self.e.recorder,
                         num_padded=size - (bs or size))
        return {"logits": logits}

    def slice_outputs(self, outs, bs):
        return {"logits": outs["logits"][:bs].clone()}


class VerifyPhase(Phase):
    """Target verify: ndt tree rows per request over prefix + tree mask."""

    def __init__(self, engine) -> None:
        super().__init__(engine)
        ndt = engine.spec.ndt
        self.inputs = {"input_ids": InputSpec(ndt), "positions": InputSpec(ndt),
                       "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL)}
        self.seq_lens_sum = 0

    @property
    def e_backend(self):
        return self.e.target_backend

    def prepare(self, v, size):
        """Verify writes node t of request b at req_to_token[b, seq_len + t]."""
        return {"out_cache_loc": extend_slots(self.e, v["req_pool_indices"], v["seq_lens"],
                                              self.e.spec.ndt)}

    def extra_static(self, size, static):
        self.seq_lens_sum = size * SEQ_LEN_FILL  # capture runs on padding only
        ndt = self.e.spec.ndt
        if "custom_mask" not in static:
            # FULL_MASK at full context. Each replay writes exactly the part its forward reads
            # (load_extra); the rest stays False, so a short write cannot pass unnoticed.
            n = size * ndt * (self.e.max_context + ndt)
            static["custom_mask"] = torch.zeros(n, dtype=torch.bool, device=self.e.device)
        static["custom_mask"][:ndt * self.seq_lens_sum + size * ndt * ndt].fill_(True)
        return {"custom_mask": static["custom_mask"]}

    def load_extra(self, live, bs, size, static_views):
        """The tree mask's part this forward reads: the live mask, then True. Without a live
        mask (the captured greedy round builds the tree in its graph): True throughout, the
        prefix columns the tree kernel leaves alone."""
        mask, ndt = live.get("custom_mask"), self.e.spec.ndt
        # Padded requests have seq_len SEQ_LEN_FILL: their FULL_MASK blocks follow, all True.
        # The padded seq_lens_sum says where the mask that this forward reads ends.
        self.seq_lens_sum = live["seq_lens_sum"] + (size - bs) * SEQ_LEN_FILL
        if faults.on("graph_seq_lens_sum_unpadded") and static_views is not None:
            self.seq_lens_sum = live["seq_lens_sum"]  # the historical bug: the raw sum
        end = ndt * self.seq_lens_sum + size * ndt * ndt
        n = 0 if mask is None else mask.numel()
        if static_views is None:
            pad = torch.ones(end - n, dtype=torch.bool, device=self.e.device)
            return {"custom_mask": pad if mask is None else torch.cat([mask, pad])}
        dst = static_views["custom_mask"]  # sized for full context: fill only what is read
        if mask is not None:
            dst[:n].copy_(mask)
        dst[n:end].fill_(True)
        return {"custom_mask": dst}

    def batch(self, v, size):
        return ForwardBatch(ForwardMode.TARGET_VERIFY, v["input_ids"], v["positions"],
                            v["out_cache_loc"], v["req_pool_indices"], v["seq_lens"], v["seq_lens"],
                            seq_lens_sum=self.seq_lens_sum, num_draft_tokens=self.e.spec.ndt,
                            custom_mask=v["custom_mask"], req_page_table=v.get("req_page_table"))

    def forward(self, v, size, md, bs=None):
        fb, early = self.batch(v, size), None
        if md is None and bs is not None and bs < size and faults.on("verify_metadata_before_padding"):
            # the historical bug: eager metadata initialised on the batch before it was padded
            early = self.batch({k: x if k == "custom_mask" else x[:x.shape[0] // size * bs]
                                for k, x in v.items()}, bs)
            self.e_backend.init_forward_metadata(early)
            early = early.attn_metadata
        logits, hidden = _run(self.e.target, self.e_backend, fb, md, self.e.recorder,
                              num_padded=size - (bs or size), eager_md=early)
        return {"logits": logits, "hidden": hidden}

    def slice_outputs(self, outs, bs):
        n = bs * self.e.spec.ndt
        return {"logits": outs["logits"][:n].clone(), "hidden": outs["hidden"][:n].clone()}


class DraftExtendPhase(Phase):
    """Draft extend after decode: ndt rows per request over the compacted accepted path at
    positions prefix .. prefix+ndt-1; row accept_lens-1 gives the next round's candidates and
    hidden state, which the forward stores in the draft state pool (by request row)."""

    recorded_hidden = None  # the graph keeps only the selected rows' hidden states

    def __init__(self, engine) -> None:
        super().__init__(engine)
        # "hidden" is the target's verify output (the EAGLE input); a standalone draft's own
        # hidden size may differ from it. accept_lens pads to 0: a real request accepts >= 1.
        ndt, h = engine.spec.ndt, engine.cfg.hidden_size
        self.inputs = {"input_ids": InputSpec(ndt), "hidden": InputSpec(ndt, (h,), engine.dtype),
                       "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL),
                       "kv_prefix_lens": InputSpec(1, pad=SEQ_LEN_FILL),
                       "accept_lens": InputSpec(1, pad=0)}

    @property
    def e_backend(self):
        return self.e.draft_backend

    def prepare(self, v, size):
        """Positions prefix + j (0 on padded requests, section 8); rows past accept_lens (and
        padded ones) write reserved slot 0."""
        ndt, rows = self.e.spec.ndt, v["req_pool_indices"]
        j = torch.arange(ndt, device=self.e.device)[None, :]
        real = (rows > 0)[:, None]  # row 0 is the reserved request row of padding
        pos = torch.where(real, v["kv_prefix_lens"][:, None] + j, 0)
        slots = extend_slots(self.e, rows, v["kv_prefix_lens"], ndt).view(size, ndt)
        loc = torch.where(j < v["accept_lens"][:, None], slots, 0)
        if faults.on("stale_draft_kv_after_accept"):
            loc = torch.zeros_like(loc)  # the historical bug: accepted tokens' draft KV not rewritten
        return {"positions": pos.reshape(-1), "out_cache_loc": loc.reshape(-1)}

    def batch(self, v, size):
        return ForwardBatch(ForwardMode.DRAFT_EXTEND, v["input_ids"], v["positions"],
                            v["out_cache_loc"], v["req_pool_indices"], v["seq_lens"],
                            v["kv_prefix_lens"], extend_lens=torch.full_like(v["seq_lens"], self.e.spec.ndt),
                            hidden_states=v["hidden"], req_page_table=v.get("req_page_table"))

    def forward(self, v, size, md, bs=None):
        width = self.e.spec.ndt
        if md is not None and faults.on("draft_extend_width_steps_plus_one"):
            width = self.e.spec.num_steps + 1  # the historical bug: the graph's row stride
        last = (v["accept_lens"] - 1).clamp(min=0)  # padded requests: their row 0
        rows = torch.arange(size, device=self.e.device) * width + last
        logits, hidden = _run(self.e.drafter, self.e_backend, self.batch(v, size), md,
                              self.e.recorder, rows, size - (bs or size))
        topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), self.e.spec.topk)
        outs = {"logits": logits, "topk_p": topk_p, "topk_index": topk_index, "hidden": hidden[rows]}
        # Padded requests store into reserved row 0, which draft decode never reads.
        self.e.draft_state.store(v["req_pool_indices"], outs["hidden"], topk_p, topk_index, logits)
        return outs

    def slice_outputs(self, outs, bs):
        return {}  # the forward stored what the next round needs
