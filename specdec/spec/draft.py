"""The draft side of a round: draft extend and the multi-step draft decode."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch
from specdec.forward import run_forward
from specdec.sampler import draft_inputs
from specdec.spec.select import fast_topk


@dataclass
class DraftTree:
    """organize_draft_results' output and the draft's write slots."""

    parent_list: torch.Tensor        # [bs, topk*(num_steps-1)+1]
    top_scores_index: torch.Tensor   # [bs, ndt-1] global candidate indices, ascending
    draft_tokens: torch.Tensor       # [bs, ndt-1]
    out_cache_loc: torch.Tensor      # [bs*topk*num_steps] draft write slots, layout [bs, topk, steps]
    draft_probs: torch.Tensor | None = None  # probabilistic: [bs, num_steps, V], q of draft i


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

    def prefix_len(self, seq_len: int) -> int:
        """Draft KV committed before a round: the EAGLE head lags the target by one (its row p
        holds token p+1); a standalone draft also holds the pending bonus token."""
        return seq_len if self.shifted else seq_len + 1

    def extend_prefill(self, fb: ForwardBatch, logit_rows: torch.Tensor) -> None:
        """Draft over whole prompts (ragged, always eager); keep each last row's candidates."""
        logits, hidden = run_forward(self.drafter, self.backend, fb, logit_rows, self.e.recorder)
        topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), self.spec.topk)
        self.state.store(fb.req_pool_indices, hidden[logit_rows], topk_p, topk_index, logits)

    def extend_after_decode(self, live: dict[str, torch.Tensor]) -> None:
        """The extend's forward stores the next round's candidates and hidden state itself."""
        bs = live["req_pool_indices"].shape[0]
        self.extend_runner.run(live, bs)
        runner = self.extend_runner
        if faults.on("draft_extend_reads_graph_buffers_on_fallback") and runner.graphs and not runner.last_ran_graph:
            # The historical bug: after an eager fallback, the pool is updated from the runner's
            # stale static buffers instead of this run's outputs.
            stale = {k: v[:bs] for k, v in runner.outputs[runner.buckets[-1]].items()}
            self.state.store(live["req_pool_indices"], stale["hidden"], stale["topk_p"],
                             stale["topk_index"], stale["logits"])

    def decode(self, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
               prefix: torch.Tensor, positions: torch.Tensor, sampling=None) -> DraftTree:
        """`prefix`: prefix_len of each request; `positions`: prefix repeated topk times (the
        starting position of every branch; built on the host with the round's inputs).
        `sampling` (BatchSampling or None): the knobs and draft coins of probabilistic drafting."""
        bs = req_pool_indices.shape[0]
        live = {"req_pool_indices": req_pool_indices, "seq_lens": seq_lens, "kv_prefix_lens": prefix,
                "positions": positions}
        if self.spec.probabilistic:
            live.update(draft_inputs(sampling, bs, self.spec.num_steps, seq_lens.device))
        outs = self.decode_runner.run(live, bs)
        return DraftTree(outs["parent_list"], outs["top_scores_index"], outs["draft_tokens"],
                         outs["out_cache_loc"], outs.get("draft_probs"))

