"""The draft side of a round: draft extend and the multi-step draft decode."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.attention.forward_batch import ForwardBatch, ForwardMode
from specdec.forward import run_forward
from specdec.spec.layout import per_step_draft_out_cache_loc
from specdec.spec.select import fast_topk, organize_draft_results, parent_branch, select_top_k_tokens


@dataclass
class DraftTree:
    """organize_draft_results' output plus what the trace wants to see."""

    parent_list: torch.Tensor        # [bs, topk*(num_steps-1)+1]
    top_scores_index: torch.Tensor   # [bs, ndt-1] global candidate indices, ascending
    draft_tokens: torch.Tensor       # [bs, ndt-1]
    out_cache_loc: torch.Tensor      # [bs*topk*num_steps] draft write slots, layout [bs, topk, steps]


class DraftWorker:
    def __init__(self, drafter, backend, state_pool, kernels, spec, page_size: int, engine) -> None:
        self.drafter = drafter
        self.backend = backend
        self.state = state_pool
        self.k = kernels
        self.spec = spec
        self.page_size = page_size
        self.engine = engine  # for the recorder and req_to_token

    @property
    def shifted(self) -> bool:
        return self.drafter.shifted

    def prefix_lens(self, seq_lens: torch.Tensor) -> torch.Tensor:
        """Draft KV committed before a round: the EAGLE head lags the target by one (its row p
        holds token p+1); a standalone draft also holds the pending bonus token."""
        return seq_lens if self.shifted else seq_lens + 1

    # -- draft extend ---------------------------------------------------------------------
    def extend(self, fb: ForwardBatch, logit_rows: torch.Tensor) -> None:
        """Run the draft over committed tokens; keep each request's last row's candidates."""
        logits, hidden = run_forward(self.drafter, self.backend, fb, logit_rows,
                                     self.engine.recorder)
        topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), self.spec.topk)
        self.state.store(fb.req_pool_indices, hidden[logit_rows], topk_p, topk_index)

    # -- draft decode ---------------------------------------------------------------------
    def decode(self, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor) -> DraftTree:
        topk, steps, ps = self.spec.topk, self.spec.num_steps, self.page_size
        bs = req_pool_indices.shape[0]
        dev = seq_lens.device
        prefix = self.prefix_lens(seq_lens)
        out_cache_loc = torch.empty(bs * topk * steps, dtype=torch.int64, device=dev)
        n_copy = bs * (topk - 1) * (ps - 1)
        src = torch.empty(n_copy, dtype=torch.int64, device=dev)
        tgt = torch.empty(n_copy, dtype=torch.int64, device=dev)
        self.k.assign_draft_cache_locs(req_pool_indices, self.engine.req_to_token, prefix,
                                       out_cache_loc, src, tgt, topk, steps, ps)
        if n_copy:
            # Page-granular readers see a branch's first page whole: give every branch its
            # own copy of the prefix tail (conventions section 4).
            self.k.move_kv_cache(self.backend.pool.buffers, tgt, src)
        per_step = per_step_draft_out_cache_loc(out_cache_loc, bs, topk, steps)

        topk_p = self.state.topk_p[req_pool_indices]
        topk_index = self.state.topk_index[req_pool_indices]
        hidden = self.state.hidden[req_pool_indices]
        positions = prefix.repeat_interleave(topk)
        scores = None
        score_list, token_list, parents_list = [], [], []
        for i in range(steps):
            input_ids, hidden, scores, (s, t, p) = select_top_k_tokens(
                i, topk_p, topk_index, hidden, scores, topk)
            score_list.append(s)
            token_list.append(t)
            parents_list.append(p)
            if i == steps - 1:
                break
            if i >= 1 and topk > 1:
                self._follow_ancestry(per_step, parent_branch(p, i, topk), i, bs)
            fb = ForwardBatch(ForwardMode.DRAFT_DECODE, input_ids, positions, out_cache_loc,
                              req_pool_indices, seq_lens, prefix, topk=topk, num_steps=steps,
                              draft_step=i, hidden_states=hidden)
            logits, hidden = run_forward(self.drafter, self.backend, fb,
                                         recorder=self.engine.recorder)
            topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), topk)
            positions.add_(1)  # after the forward: forward i runs at prefix + i (SGLang #25015)
        parent_list, top_scores_index, draft_tokens = organize_draft_results(
            score_list, token_list, parents_list, self.spec.ndt)
        return DraftTree(parent_list, top_scores_index, draft_tokens, out_cache_loc)

    def _follow_ancestry(self, per_step: torch.Tensor, parents: torch.Tensor, i: int,
                         bs: int) -> None:
        """Before forward i, a re-parented branch k takes over its parent branch's draft KV for
        steps 0..i-1, so each row attends exactly to its own ancestors (conventions section 4)."""
        topk = self.spec.topk
        rows = per_step[:i].view(i, bs, topk)
        src = torch.gather(rows, 2, parents.unsqueeze(0).expand(i, bs, topk))
        self.k.move_kv_cache(self.backend.pool.buffers, rows.reshape(-1), src.reshape(-1))
