"""The draft side of a round: draft extend and the multi-step draft decode."""
from __future__ import annotations

import torch

from specdec import faults
from specdec.attention.forward_batch import ForwardBatch
from specdec.forward import run_forward
from specdec.sampler import draft_inputs
from specdec.spec.context import Hooks, ModelKV
from specdec.spec.draft_decode_phase import DraftDecodeInputs, DraftTree
from specdec.spec.phases import DraftExtendInputs
from specdec.spec.select import fast_topk


class DraftWorker:
    def __init__(self, draft: ModelKV, *, state, spec, hooks: Hooks, decode_runner,
                 extend_runner) -> None:
        self.draft = draft
        self.state = state  # the draft state pool (specdec/memory/req_pool.py)
        self.spec = spec
        self.hooks = hooks
        self.decode_runner = decode_runner
        self.extend_runner = extend_runner

    @property
    def shifted(self) -> bool:
        return self.draft.model.shifted

    def prefix_len(self, seq_len: int) -> int:
        """Draft KV committed before a round: the EAGLE head lags the target by one (its row p
        holds token p+1); a standalone draft also holds the pending bonus token."""
        return seq_len if self.shifted else seq_len + 1

    def extend_prefill(self, fb: ForwardBatch, logit_rows: torch.Tensor) -> None:
        """Draft over whole prompts (ragged, always eager); keep each last row's candidates."""
        logits, hidden = run_forward(self.draft.model, backend=self.draft.backend, fb=fb,
                                     logit_rows=logit_rows,
                                     recorder=self.hooks.recorder)
        topk_p, topk_index = fast_topk(torch.softmax(logits, dim=-1), self.spec.topk)
        self.state.store(fb.req_pool_indices, hidden[logit_rows], topk_p, topk_index, logits)

    def extend_after_decode(self, live: DraftExtendInputs) -> None:
        """The extend's forward stores the next round's candidates and hidden state itself."""
        bs = live.req_pool_indices.shape[0]
        self.extend_runner.run(live, bs)
        runner = self.extend_runner
        if faults.on("draft_extend_reads_graph_buffers_on_fallback") and runner.use_graph \
                and not runner.last_ran_graph:
            # The historical bug: after an eager fallback, the pool is updated from the runner's
            # stale static buffers instead of this run's outputs (those of its largest size,
            # captured now if no batch has needed it yet, as the reference captured it at
            # start-up).
            runner.capture_size(runner.buckets[-1])
            stale = runner.outputs[runner.buckets[-1]]
            self.state.store(live.req_pool_indices, stale.hidden[:bs], stale.topk_p[:bs],
                             stale.topk_index[:bs], stale.logits[:bs])

    def decode(self, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
               prefix: torch.Tensor, positions: torch.Tensor, sampling=None) -> DraftTree:
        """`prefix`: prefix_len of each request; `positions`: each branch's first position
        (specdec/spec/layout.py branch_positions; built with the round's inputs).
        `sampling` (BatchSampling or None): the knobs and draft coins of probabilistic drafting."""
        bs = req_pool_indices.shape[0]
        knobs = (draft_inputs(sampling, bs, self.spec.num_steps, seq_lens.device)
                 if self.spec.probabilistic else {})
        live = DraftDecodeInputs(req_pool_indices, seq_lens, prefix, positions, **knobs)
        return self.decode_runner.run(live, bs)
