"""The multi-step draft decode as one phase: the draft write slots and prefix-tail copies, the
carried state's gather, each forward's positions, all num_steps - 1 forwards with their
top-k selection, the true-ancestry KV copies and organize_draft_results, in one graph."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.graphs.runner import SEQ_LEN_FILL, InputSpec
from specdec.sampler import draw_from, filtered_probs
from specdec.spec.context import Hooks, ModelKV, Paging
from specdec.spec.layout import draft_step_positions, per_step_draft_out_cache_loc
from specdec.spec.phases import Phase, _run
from specdec.spec.select import fast_topk, organize_draft_results, parent_branch, select_top_k_tokens


@dataclass(frozen=True)
class DraftDecodeInputs:
    req_pool_indices: torch.Tensor  # [bs] request rows (padding: reserved row 0)
    seq_lens: torch.Tensor          # [bs] committed target length
    kv_prefix_lens: torch.Tensor    # [bs] the draft prefix (contract section 1)
    positions: torch.Tensor         # [bs*topk] each branch's first position (branch_positions)
    # Probabilistic drafting only (specdec/sampler.py draft_inputs), by batch position:
    temperature: torch.Tensor | None = None  # [bs] fp32; 0 (greedy rows, padding): the argmax
    top_k: torch.Tensor | None = None        # [bs] int64
    top_p: torch.Tensor | None = None        # [bs] fp32
    draft_coins: torch.Tensor | None = None  # [bs*num_steps] fp32: coin i draws draft token i
    req_page_table: torch.Tensor | None = None  # the captured round's, shared by its forwards


@dataclass(frozen=True)
class DraftDecodePrepared:
    """What `prepare` derives on the device: write slots, each forward's positions, and the
    state carried from the last draft extend (zero on padded requests, section 8)."""

    out_cache_loc: torch.Tensor   # [bs*topk*num_steps] in layout [bs, topk, num_steps] (section 4)
    step_positions: torch.Tensor  # [num_steps-1, bs*topk]: row i, where forward i runs (section 3)
    topk_p: torch.Tensor          # [bs, topk] the step-0 candidates' probabilities
    topk_index: torch.Tensor      # [bs, topk] and their tokens
    hidden: torch.Tensor          # [bs, H]
    logits: torch.Tensor | None   # probabilistic: [bs, V], q of draft token 0


@dataclass(frozen=True)
class DraftDecodeOutputs:
    parent_list: torch.Tensor       # [bs, topk*(num_steps-1)+1]
    top_scores_index: torch.Tensor  # [bs, ndt-1] global candidate indices, ascending
    draft_tokens: torch.Tensor      # [bs, ndt-1]
    out_cache_loc: torch.Tensor     # the draft write slots (prepared)
    step_ids: tuple                 # per forward: its input ids [bs*topk] (the trace's)
    step_positions: torch.Tensor    # per forward: its positions (prepared)
    step_logits: tuple              # per forward: its logits [bs*topk, V]
    draft_probs: torch.Tensor | None  # probabilistic: [bs, num_steps, V], q of draft i


@dataclass(frozen=True)
class DraftTree:
    """organize_draft_results' output and the draft's write slots, for the live batch."""

    parent_list: torch.Tensor        # [bs, topk*(num_steps-1)+1]
    top_scores_index: torch.Tensor   # [bs, ndt-1] global candidate indices, ascending
    draft_tokens: torch.Tensor       # [bs, ndt-1]
    out_cache_loc: torch.Tensor      # [bs*topk*num_steps] write slots, layout [bs, topk, steps]
    draft_probs: torch.Tensor | None = None  # probabilistic: [bs, num_steps, V], q of draft i


class DraftDecodePhase(Phase):
    input_type = DraftDecodeInputs

    def __init__(self, draft: ModelKV, *, paging: Paging, kernels, hooks: Hooks, state, spec,
                 max_batch: int, vocab_size: int) -> None:
        super().__init__(draft, paging, kernels, hooks)
        self.state = state  # the draft state pool (specdec/memory/req_pool.py)
        self.topk, self.steps, self.ndt = spec.topk, spec.num_steps, spec.ndt
        self.inputs = {
            "req_pool_indices": InputSpec(1), "seq_lens": InputSpec(1, pad=SEQ_LEN_FILL),
            "kv_prefix_lens": InputSpec(1, pad=SEQ_LEN_FILL), "positions": InputSpec(self.topk)}
        self.probabilistic = spec.probabilistic
        if self.probabilistic:
            # Sampled requests draw draft token i from the filtered q of its row with coin i
            # of the draft stream; temperature 0 (greedy requests, padding) takes the argmax.
            f32 = torch.float32
            self.inputs.update({"temperature": InputSpec(1, dtype=f32),
                                "top_k": InputSpec(1), "top_p": InputSpec(1, dtype=f32, pad=1.0),
                                "draft_coins": InputSpec(self.steps, dtype=f32)})
            # Each draft token's q, [bs, num_steps, V]: an output of the phase that the
            # acceptance rule reads. Every forward, eager or captured, writes it.
            self.draft_probs = torch.zeros((max_batch, self.steps, vocab_size), dtype=f32,
                                           device=self.device)
        # Only under the draft_capture_positions_not_restored fault (extra_static).
        self.positions_at_capture: dict[int, torch.Tensor] = {}

    def extra_static(self, size, static):
        if faults.on("draft_capture_positions_not_restored"):
            # SGLang #25015's class: the graph runs at positions its replays do not give it.
            # Here each forward's positions are computed once, before the capture, from its
            # (padding) inputs, and no replay refills them (prepare).
            branch_pos = static["positions"][:size * self.topk]
            self.positions_at_capture[size] = draft_step_positions(branch_pos, self.steps)
        return {}

    def prepare(self, x: DraftDecodeInputs, size) -> DraftDecodePrepared:
        """Draft write slots (layout [bs, topk, num_steps], contract section 4) with each
        branch's copy of the prefix tail, the carried state of each request row (zero on
        padded requests, section 8), and each forward's positions (section 3)."""
        topk, steps, ps = self.topk, self.steps, self.paging.page_size
        rows, dev = x.req_pool_indices, self.device
        if faults.on("dummy_lane_real_row"):  # vLLM #56734: padded lanes take a live row
            rows = torch.where(rows > 0, rows, rows[0])
        out_cache_loc = torch.empty(size * topk * steps, dtype=torch.int64, device=dev)
        n_copy = size * (topk - 1) * (ps - 1)
        src = torch.empty(n_copy, dtype=torch.int64, device=dev)
        tgt = torch.empty(n_copy, dtype=torch.int64, device=dev)
        self.kernels.assign_draft_cache_locs(rows, self.paging.req_to_token, x.kv_prefix_lens,
                                             out_cache_loc, src, tgt, topk, steps, ps)
        if n_copy and not faults.on("page_tail_not_duplicated"):
            # Page-granular readers see a branch's first page whole: give every branch its
            # own copy of the prefix tail (contract section 4).
            self.kernels.move_kv_cache(self.kv.backend.pool.buffers, tgt, src)
        state, real = self.state, (rows > 0)[:, None]  # row 0: reserved, padding
        logits = torch.where(real, state.logits[rows], 0.0) if self.probabilistic else None
        carried = {"topk_p": torch.where(real, state.topk_p[rows], 0.0),
                   "topk_index": torch.where(real, state.topk_index[rows], 0),
                   "hidden": torch.where(real, state.hidden[rows], 0.0)}
        # Derived here, inside the capture: every replay recomputes them from the refilled
        # branch positions.
        step_positions = draft_step_positions(x.positions, steps)
        if faults.on("draft_capture_positions_not_restored") and size in self.positions_at_capture:
            step_positions = self.positions_at_capture[size]  # the mistake: the capture's, stale
        return DraftDecodePrepared(out_cache_loc, step_positions, logits=logits, **carried)

    def batch(self, x: DraftDecodeInputs, *, prep: DraftDecodePrepared, size, step: int,
              input_ids=None, hidden=None) -> ForwardBatch:
        positions = prep.step_positions[step]
        if input_ids is None:  # metadata does not read tokens: any ids of the right count
            input_ids = x.positions
        return ForwardBatch(mode=ForwardMode.DRAFT_DECODE, input_ids=input_ids,
                            positions=positions, out_cache_loc=prep.out_cache_loc,
                            req_pool_indices=x.req_pool_indices, seq_lens=x.seq_lens,
                            kv_prefix_lens=x.kv_prefix_lens,
                            topk=self.topk, num_steps=self.steps, draft_step=step,
                            hidden_states=hidden, req_page_table=x.req_page_table)

    def capture_metadata(self, x, prep, size):
        return self.kv.backend.init_draft_decode_metadata_capture_cuda_graph(
            [self.batch(x, prep=prep, size=size, step=i) for i in range(self.steps - 1)])

    def replay_metadata(self, x, prep, size, md) -> None:
        for i, m in enumerate(md):
            self.kv.backend.init_forward_metadata_replay_cuda_graph(self.batch(x, prep=prep,
                                                                               size=size, step=i),
                                                                               m)

    def forward(self, x: DraftDecodeInputs, prep: DraftDecodePrepared, size, md,
                bs=None) -> DraftDecodeOutputs:
        topk, steps = self.topk, self.steps
        per_step = per_step_draft_out_cache_loc(prep.out_cache_loc, size, topk, steps)
        topk_p, topk_index, hidden = prep.topk_p, prep.topk_index, prep.hidden
        scores, score_list, token_list, parents_list = None, [], [], []
        step_ids, step_logits = [], []
        logits = prep.logits  # probabilistic: the draft extend's row, q of draft token 0
        for i in range(steps):
            if self.probabilistic:
                topk_index = self._sample_drafts(x, size=size, i=i, logits=logits,
                                                 topk_index=topk_index, captured=md is not None)
            input_ids, hidden, scores, (s, t, p) = select_top_k_tokens(
                i, topk_p=topk_p, topk_index=topk_index, hidden_states=hidden, scores=scores,
                topk=topk)
            score_list.append(s)
            token_list.append(t)
            parents_list.append(p)
            if i == steps - 1:
                break
            if i >= 1 and topk > 1:
                self._follow_ancestry(per_step, parent_branch(p, i, topk), i, size)
            fb = self.batch(x, prep=prep, size=size, step=i, input_ids=input_ids, hidden=hidden)
            logits, hidden = _run(self.kv, fb=fb, md=None if md is None else md[i],
                                  recorder=self.hooks.recorder, num_padded=size - (bs or size))
            step_ids.append(input_ids)
            step_logits.append(logits)
            topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), topk)
        parent_list, top_scores_index, draft_tokens = organize_draft_results(
            score_list, token_list, parents_list, self.ndt)
        return DraftDecodeOutputs(parent_list, top_scores_index, draft_tokens,
                                  prep.out_cache_loc, tuple(step_ids), prep.step_positions,
                                  tuple(step_logits),
                                  self.draft_probs[:size] if self.probabilistic else None)

    def _sample_drafts(self, x: DraftDecodeInputs, *, size, i, logits, topk_index, captured: bool):
        """Draft token i of sampled rows: drawn from q = the filtered draft distribution (the
        request's temperature / top-k / top-p) with coin i of the draft stream; q is kept
        for the acceptance rule. Greedy rows keep the argmax candidate."""
        temp = x.temperature
        sampled = temp > 0
        q = filtered_probs(logits[:, None, :], temperature=torch.where(sampled, temp, 1.0),
                           top_k=x.top_k,
                           top_p=x.top_p)[:, 0]
        tok = draw_from(q, x.draft_coins.view(size, self.steps)[:, i])
        if i == 0 or not (captured and faults.on("graph_output_not_captured")):
            self.draft_probs[:size, i].copy_(q)  # the fault: replay never writes steps >= 1
        return torch.where(sampled[:, None], tok[:, None], topk_index)

    def _follow_ancestry(self, per_step, parents, i: int, size: int) -> None:
        """Before forward i, a re-parented branch k takes over its parent branch's draft KV for
        steps 0..i-1, so each row attends exactly to its own ancestors (contract section 4)."""
        rows = per_step[:i].view(i, size, self.topk)
        src = torch.gather(rows, 2, parents.unsqueeze(0).expand(i, size, self.topk))
        self.kernels.move_kv_cache(self.kv.backend.pool.buffers, rows.reshape(-1),
                                   src.reshape(-1))

    def after_replay(self, x, *, prep, size, bs, md, out: DraftDecodeOutputs) -> None:
        recorder = self.hooks.recorder
        if recorder is None:
            return
        for i, m in enumerate(md):
            fb = self.batch(x, prep=prep, size=size, step=i, input_ids=out.step_ids[i])
            fb.attn_metadata, fb.num_padded = m, size - bs
            recorder.on_forward(fb, out.step_logits[i], None, graph=True)

    def slice_outputs(self, out: DraftDecodeOutputs, bs) -> DraftTree:
        n = bs * self.topk * self.steps
        return DraftTree(out.parent_list[:bs].clone(), out.top_scores_index[:bs].clone(),
                         out.draft_tokens[:bs].clone(), out.out_cache_loc[:n].clone(),
                         out.draft_probs[:bs].clone() if self.probabilistic else None)
