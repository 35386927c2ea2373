"""The multi-step draft decode as one phase: the draft write slots and prefix-tail copies, the
carried state's gather, all num_steps - 1 forwards with their top-k selection, the
true-ancestry KV copies and organize_draft_results, in one graph."""
from __future__ import annotations

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.graphs.runner import SEQ_LEN_FILL, InputSpec
from specdec.sampler import draw_from, filtered_probs
from specdec.spec.layout import per_step_draft_out_cache_loc
from specdec.spec.phases import Phase, _run
from specdec.spec.select import fast_topk, organize_draft_results, parent_branch, select_top_k_tokens


class DraftDecodePhase(Phase):
    def __init__(self, engine) -> None:
        super().__init__(engine)
        spec = engine.spec
        self.topk, self.steps = spec.topk, spec.num_steps
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
            self.draft_probs = torch.zeros((engine.max_batch, self.steps, engine.cfg.vocab_size),
                                           dtype=f32, device=engine.device)

    @property
    def e_backend(self):
        return self.e.draft_backend

    def prepare(self, v, size):
        """Draft write slots (layout [bs, topk, num_steps], contract section 4) with each
        branch's copy of the prefix tail, and the carried state of each request row (zero on
        padded requests, section 8)."""
        topk, steps, ps = self.topk, self.steps, self.e.page_size
        rows, dev = v["req_pool_indices"], self.e.device
        if faults.on("dummy_lane_real_row"):  # vLLM #56734: padded lanes take a live row
            rows = torch.where(rows > 0, rows, rows[0])
        out_cache_loc = torch.empty(size * topk * steps, dtype=torch.int64, device=dev)
        n_copy = size * (topk - 1) * (ps - 1)
        src = torch.empty(n_copy, dtype=torch.int64, device=dev)
        tgt = torch.empty(n_copy, dtype=torch.int64, device=dev)
        self.e.kernels.assign_draft_cache_locs(rows, self.e.req_to_token, v["kv_prefix_lens"],
                                               out_cache_loc, src, tgt, topk, steps, ps)
        if n_copy and not faults.on("page_tail_not_duplicated"):
            # Page-granular readers see a branch's first page whole: give every branch its
            # own copy of the prefix tail (contract section 4).
            self.e.kernels.move_kv_cache(self.e_backend.pool.buffers, tgt, src)
        state, real = self.e.draft_state, (rows > 0)[:, None]  # row 0: reserved, padding
        carried = {"logits": torch.where(real, state.logits[rows], 0.0)} if self.probabilistic else {}
        return {"out_cache_loc": out_cache_loc, **carried,
                "topk_p": torch.where(real, state.topk_p[rows], 0.0),
                "topk_index": torch.where(real, state.topk_index[rows], 0),
                "hidden": torch.where(real, state.hidden[rows], 0.0)}

    def batch(self, v, size, step: int, input_ids=None, hidden=None):
        if input_ids is None:  # metadata does not read tokens: any ids of the right count
            input_ids = v["positions"]
        return ForwardBatch(ForwardMode.DRAFT_DECODE, input_ids, v["positions"], v["out_cache_loc"],
                            v["req_pool_indices"], v["seq_lens"], v["kv_prefix_lens"],
                            topk=self.topk, num_steps=self.steps, draft_step=step,
                            hidden_states=hidden, req_page_table=v.get("req_page_table"))

    def capture_metadata(self, v, size):
        return self.e_backend.init_draft_decode_metadata_capture_cuda_graph(
            [self.batch(v, size, i) for i in range(self.steps - 1)])

    def replay_metadata(self, v, size, md) -> None:
        for i, m in enumerate(md):
            self.e_backend.init_forward_metadata_replay_cuda_graph(self.batch(v, size, i), m)

    def forward(self, v, size, md, bs=None):
        topk, steps = self.topk, self.steps
        positions = v["positions"]
        per_step = per_step_draft_out_cache_loc(v["out_cache_loc"], size, topk, steps)
        topk_p, topk_index, hidden = v["topk_p"], v["topk_index"], v["hidden"]
        scores, score_list, token_list, parents_list = None, [], [], []
        step_ids, step_pos, step_logits = [], [], []
        logits = v.get("logits")  # probabilistic: the draft extend's row, q of draft token 0
        for i in range(steps):
            if self.probabilistic:
                topk_index = self._sample_drafts(v, size, i, logits, topk_index, md is not None)
            input_ids, hidden, scores, (s, t, p) = select_top_k_tokens(
                i, topk_p, topk_index, hidden, scores, topk)
            score_list.append(s)
            token_list.append(t)
            parents_list.append(p)
            if i == steps - 1:
                break
            if i >= 1 and topk > 1:
                self._follow_ancestry(per_step, parent_branch(p, i, topk), i, size)
            if faults.on("draft_positions_early_increment"):
                positions.add_(1)  # the historical bug: incremented before the forward
            fb = self.batch(v, size, i, input_ids, hidden)
            logits, hidden = _run(self.e.drafter, self.e_backend, fb, None if md is None else md[i],
                                  self.e.recorder, num_padded=size - (bs or size))
            step_ids.append(input_ids)
            step_pos.append(positions.clone())
            step_logits.append(logits)
            topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), topk)
            if not faults.on("draft_positions_early_increment"):
                positions.add_(1)  # after the forward: forward i runs at prefix + i (SGLang #25015)
        if steps > 1 and not faults.on("draft_capture_positions_not_restored"):
            positions.sub_(steps - 1)  # leave the (static) positions buffer as we found it
        parent_list, top_scores_index, draft_tokens = organize_draft_results(
            score_list, token_list, parents_list, self.e.spec.ndt)
        outs = {"parent_list": parent_list, "top_scores_index": top_scores_index,
                "draft_tokens": draft_tokens, "out_cache_loc": v["out_cache_loc"],
                "step_ids": step_ids, "step_pos": step_pos, "step_logits": step_logits}
        if self.probabilistic:
            outs["draft_probs"] = self.draft_probs[:size]
        return outs

    def _sample_drafts(self, v, size, i, logits, topk_index, captured: bool):
        """Draft token i of sampled rows: drawn from q = the filtered draft distribution (the
        request's temperature / top-k / top-p) with coin i of the draft stream; q is kept
        for the acceptance rule. Greedy rows keep the argmax candidate."""
        temp = v["temperature"]
        sampled = temp > 0
        q = filtered_probs(logits[:, None, :], torch.where(sampled, temp, 1.0), v["top_k"],
                           v["top_p"])[:, 0]
        tok = draw_from(q, v["draft_coins"].view(size, self.steps)[:, i])
        if i == 0 or not (captured and faults.on("graph_output_not_captured")):
            self.draft_probs[:size, i].copy_(q)  # the fault: replay never writes steps >= 1
        return torch.where(sampled[:, None], tok[:, None], topk_index)

    def _follow_ancestry(self, per_step, parents, i: int, size: int) -> None:
        """Before forward i, a re-parented branch k takes over its parent branch's draft KV for
        steps 0..i-1, so each row attends exactly to its own ancestors (contract section 4)."""
        rows = per_step[:i].view(i, size, self.topk)
        src = torch.gather(rows, 2, parents.unsqueeze(0).expand(i, size, self.topk))
        self.e.kernels.move_kv_cache(self.e_backend.pool.buffers, rows.reshape(-1), src.reshape(-1))

    def after_replay(self, v, size, bs, md, outs) -> None:
        if self.e.recorder is None:
            return
        for i, m in enumerate(md):
            fb = self.batch(v, size, i, outs["step_ids"][i])
            fb.positions, fb.attn_metadata, fb.num_padded = outs["step_pos"][i], m, size - bs
            self.e.recorder.on_forward(fb, outs["step_logits"][i], None, graph=True)

    def slice_outputs(self, outs, bs):
        n = bs * self.topk * self.steps
        sliced = {"parent_list": outs["parent_list"][:bs].clone(),
                  "top_scores_index": outs["top_scores_index"][:bs].clone(),
                  "draft_tokens": outs["draft_tokens"][:bs].clone(),
                  "out_cache_loc": outs["out_cache_loc"][:n].clone()}
        if self.probabilistic:
            sliced["draft_probs"] = outs["draft_probs"][:bs].clone()
        return sliced
