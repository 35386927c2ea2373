"""The draft side of a round: draft extend and the multi-step draft decode."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch
from specdec.forward import run_forward
from specdec.spec.select import fast_topk


@dataclass
class DraftTree:
    """organize_draft_results' output and the draft's write slots."""

    parent_list: torch.Tensor        # [bs, topk*(num_steps-1)+1]
    top_scores_index: torch.Tensor   # [bs, ndt-1] global candidate indices, ascending
    draft_tokens: torch.Tensor       # [bs, ndt-1]
    out_cache_loc: torch.Tensor      # [bs*topk*num_steps] draft write slots, layout [bs, topk, steps]


class DraftWorker:
    def __init__(self, engine, decode_runner, extend_runner) -> None:
        self.e = engine
        self.drafter = engine.drafter
        self.backend = engine.draft_backend
        self.state = engine.draft_state
        self.spec = engine.spec
        self.decode_runner = decode_runner
        self.extend_runner = extend_runner

    @property
    def shifted(self) -> bool:
        return self.drafter.shifted

    def prefix_lens(self, seq_lens: torch.Tensor) -> torch.Tensor:
        """Draft KV committed before a round: the EAGLE head lags the target by one (its row p
        holds token p+1); a standalone draft also holds the pending bonus token."""
        return seq_lens if self.shifted else seq_lens + 1

    def extend_prefill(self, fb: ForwardBatch, logit_rows: torch.Tensor) -> None:
        """Draft over whole prompts (ragged, always eager); keep each last row's candidates."""
        logits, hidden = run_forward(self.drafter, self.backend, fb, logit_rows, self.e.recorder)
        topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), self.spec.topk)
        self.state.store(fb.req_pool_indices, hidden[logit_rows], topk_p, topk_index)

    def extend_after_decode(self, live: dict[str, torch.Tensor]) -> None:
        bs = live["req_pool_indices"].shape[0]
        outs = self.extend_runner.run(live, bs)
        runner = self.extend_runner
        if faults.on("draft_extend_reads_graph_buffers_on_fallback") and runner.graphs and not runner.last_ran_graph:
            outs = {k: v[:bs] for k, v in runner.outputs[runner.buckets[-1]].items()}
        # `outs` are this run's outputs (eager or graph), never a runner's static buffers.
        self.state.store(live["req_pool_indices"], outs["hidden"], outs["topk_p"], outs["topk_index"])

    def decode(self, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor) -> DraftTree:
        topk, steps, ps = self.spec.topk, self.spec.num_steps, self.e.page_size
        bs, dev = req_pool_indices.shape[0], seq_lens.device
        prefix = self.prefix_lens(seq_lens)
        out_cache_loc = torch.empty(bs * topk * steps, dtype=torch.int64, device=dev)
        n_copy = bs * (topk - 1) * (ps - 1)
        src = torch.empty(n_copy, dtype=torch.int64, device=dev)
        tgt = torch.empty(n_copy, dtype=torch.int64, device=dev)
        self.e.kernels.assign_draft_cache_locs(req_pool_indices, self.e.req_to_token, prefix,
                                               out_cache_loc, src, tgt, topk, steps, ps)
        if n_copy and not faults.on("page_tail_not_duplicated"):
            # Page-granular readers see a branch's first page whole: give every branch its
            # own copy of the prefix tail (conventions section 4).
            self.e.kernels.move_kv_cache(self.backend.pool.buffers, tgt, src)
        live = {"req_pool_indices": req_pool_indices, "seq_lens": seq_lens, "kv_prefix_lens": prefix,
                "out_cache_loc": out_cache_loc, "positions": prefix.repeat_interleave(topk),
                "topk_p": self.state.topk_p[req_pool_indices],
                "topk_index": self.state.topk_index[req_pool_indices],
                "hidden": self.state.hidden[req_pool_indices]}
        outs = self.decode_runner.run(live, bs)
        return DraftTree(outs["parent_list"], outs["top_scores_index"], outs["draft_tokens"],
                         out_cache_loc)
