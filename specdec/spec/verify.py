"""The target side of a round: tree building, verify forward, greedy acceptance, compaction."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.tree import FULL_MASK
from specdec import faults
from specdec.graphs.standin import kernel_node
from specdec.sampler import BatchSampling, greedy_tokens, target_probs
from specdec.spec.compaction import accepted_kv_moves, compact_accepted_to_front
from specdec.spec.context import Hooks, ModelKV, Paging
from specdec.spec.phases import VerifyInputs


@dataclass(frozen=True)
class BuiltTree:
    """build_tree_kernel_efficient's outputs (contract section 6), in its order."""

    tree_mask: torch.Tensor              # FULL_MASK, bool
    positions: torch.Tensor              # [bs*ndt] seq_len + depth
    retrieve_index: torch.Tensor         # [bs, ndt] b*ndt + t
    retrieve_next_token: torch.Tensor    # [bs, ndt] first child, -1: none
    retrieve_next_sibling: torch.Tensor  # [bs, ndt] next sibling, -1: none
    draft_tokens: torch.Tensor           # [bs*ndt] the bonus first

    def as_tuple(self) -> tuple:
        return (self.tree_mask, self.positions, self.retrieve_index, self.retrieve_next_token,
                self.retrieve_next_sibling, self.draft_tokens)


@dataclass(frozen=True)
class VerifyResult:
    accept_lens: torch.Tensor       # [bs] int64: accepted drafts + 1 (the new bonus)
    accepted_tokens: torch.Tensor   # [bs*(num_steps+1)] int64, stride num_steps+1
    accept_index: torch.Tensor      # [bs, num_steps+1] int32, -1 padded
    predict: torch.Tensor           # [bs*ndt] compacted
    hidden: torch.Tensor            # [bs*ndt, H] compacted target hidden states
    pending: torch.Tensor           # [bs] int64: the last accepted token, the next round's bonus


class Verifier:
    # Acceptance thresholds of the sampling kernel; 1.0 is the lossless rule (tests bias them).
    threshold_single = 1.0
    threshold_acc = 1.0

    def __init__(self, target: ModelKV, *, paging: Paging, kernels, spec, hooks: Hooks,
                 runner=None) -> None:
        self.target = target  # its KV pool holds the tree's KV that compaction moves
        self.paging = paging
        self.k = kernels
        self.spec = spec
        self.hooks = hooks
        self.runner = runner  # the verify phase's (set once the whole-round graph is captured)

    def build_tree(self, bonus: torch.Tensor, tree, seq_lens: torch.Tensor,
                   seq_lens_sum: int) -> BuiltTree:
        return BuiltTree(*self.k.build_tree_kernel_efficient(
            bonus, tree.parent_list, tree.top_scores_index, tree.draft_tokens, seq_lens,
            seq_lens_sum, self.spec.topk, self.spec.num_steps, self.spec.ndt, FULL_MASK))

    def verify(self, req_pool_indices, *, seq_lens, seq_lens_sum: int, built: BuiltTree,
               sampling: BatchSampling | None = None,
               draft_probs: torch.Tensor | None = None) -> VerifyResult:
        """draft_probs [bs, num_steps, V]: the q each draft was sampled from (probabilistic
        drafting); None when the drafts are the draft's top tokens."""
        bs = seq_lens.shape[0]
        live = VerifyInputs(built.draft_tokens, built.positions, req_pool_indices, seq_lens,
                            built.tree_mask, seq_lens_sum)
        out = self.runner.run(live, bs)
        if self.hooks.phase_timer is not None:  # the verify forward ends; acceptance follows
            self.hooks.phase_timer.mark("verify")
        res = self.accept(req_pool_indices, seq_lens=seq_lens, built=built, logits=out.logits,
                          hidden=out.hidden, sampling=sampling,
                          draft_probs=draft_probs)
        if self.hooks.recorder is not None:
            self.hooks.recorder.on_verify(built.as_tuple(), out.logits, res.accept_index,
                                          res.accept_lens, res.accepted_tokens)
        return res

    def accept(self, req_pool_indices, *, seq_lens, built: BuiltTree, logits, hidden,
               sampling: BatchSampling | None = None,
               draft_probs: torch.Tensor | None = None) -> VerifyResult:
        """Acceptance over the verify forward's logits and hidden states, then the accepted
        path's compaction (topk > 1). Without `sampling` it never syncs with the host: the
        captured greedy round (specdec/spec/round_phase.py) runs it inside its graph."""
        retrieve_index, next_token, next_sibling = (
            built.retrieve_index, built.retrieve_next_token, built.retrieve_next_sibling)
        draft_tokens = built.draft_tokens
        ndt, steps = self.spec.ndt, self.spec.num_steps
        bs = seq_lens.shape[0]
        target_predict = greedy_tokens(logits)
        predict = torch.zeros(bs * ndt, dtype=torch.int32, device=seq_lens.device)
        accept_index = torch.full((bs, steps + 1), -1, dtype=torch.int32, device=seq_lens.device)
        accept_num = torch.zeros(bs, dtype=torch.int32, device=seq_lens.device)
        kernel_node(self.k.verify_tree_greedy, predict, accept_index, accept_num,
                    draft_tokens.view(bs, ndt), retrieve_index, next_token, next_sibling,
                    target_predict)
        if sampling is not None:
            self._sample_accept(sampling, logits=logits, cand=draft_tokens.view(bs, ndt),
                                retrieve_index=retrieve_index,
                                next_token=next_token, next_sibling=next_sibling, predict=predict,
                                accept_index=accept_index, accept_num=accept_num,
                                draft_probs=draft_probs)
        accept_lens = accept_num.long() + 1
        if self.spec.topk > 1 and not faults.on("tree_accept_not_compacted"):
            predict, hidden = self._finalize_accepted_tree_path(
                req_pool_indices, seq_lens=seq_lens, accept_index=accept_index,
                accept_lens=accept_lens, predict=predict, hidden=hidden)
        # Accepted tokens have stride num_steps + 1 (not ndt, which may be smaller or larger).
        width = min(ndt, steps + 1)
        accepted = torch.zeros(bs, steps + 1, dtype=torch.int64, device=seq_lens.device)
        accepted[:, :width] = predict.view(bs, ndt)[:, :width]
        pending = accepted.gather(1, (accept_lens - 1)[:, None])[:, 0]
        return VerifyResult(accept_lens, accepted.reshape(-1), accept_index, predict.long(), hidden,
                            pending)

    def _sample_accept(self, bsamp, *, logits, cand, retrieve_index, next_token, next_sibling,
                       predict, accept_index, accept_num, draft_probs) -> None:
        """Sampled rows: speculative sampling replaces what the greedy walk wrote; greedy rows
        are untouched. Drafts sampled from q (probabilistic chains): accept with probability
        min(1, p/q), recover from norm(max(0, p - q)). Top-token drafts: the target-only tree
        rule (their draft probs are zero). retrieve_index stays global, so the kernels write
        predict in place; accept_index and accept_num come back per sampled row and are
        scattered to their batch rows.

        Index spaces: predict, accept_index, accept_num and cand/retrieve_index are by batch
        position (predict and accept_index hold batch tree nodes b * ndt + j); probs, q,
        sub_index, sub_num and sub_predict by subset position i (batch position rows[i]);
        the chain kernel's sub_index holds subset nodes i * ndt + j, mapped back to batch
        nodes before the scatter."""
        rows, ndt = bsamp.rows, self.spec.ndt
        probs = target_probs(logits.reshape(-1, ndt, logits.shape[-1])[rows], bsamp)
        predict.view(-1, ndt)[rows] = 0  # drop the greedy walk's entries for these rows
        sub_index = torch.full((rows.shape[0], accept_index.shape[1]), -1, dtype=torch.int32,
                               device=predict.device)
        sub_num = torch.zeros(rows.shape[0], dtype=torch.int32, device=predict.device)
        # The final draw has a stream of its own (SGLang #7207 reused an acceptance coin).
        final = bsamp.accept_coins[:, 0] if faults.on("final_coin_reused") else bsamp.final_coins
        if draft_probs is None:
            self.k.tree_speculative_sampling_target_only(
                predict, sub_index, sub_num, cand[rows], retrieve_index[rows], next_token[rows],
                next_sibling[rows], bsamp.accept_coins, final, probs, torch.zeros_like(probs),
                self.threshold_single, self.threshold_acc)
        else:
            q = torch.zeros_like(probs)
            q[:, :ndt - 1] = draft_probs[rows]
            # The chain kernel indexes its own sub-batch: map its rows back to the batch's.
            sub_predict = torch.zeros(rows.shape[0] * ndt, dtype=predict.dtype, device=predict.device)
            self.k.chain_speculative_sampling(sub_predict, sub_index, sub_num, cand[rows],
                                              bsamp.accept_coins, final, probs, q,
                                              self.threshold_acc)
            predict.view(-1, ndt)[rows] = sub_predict.view(-1, ndt)
            local = torch.arange(rows.shape[0], device=rows.device)[:, None] * ndt
            sub_index = torch.where(sub_index >= 0, sub_index - local + rows[:, None] * ndt, -1)
            sub_index = sub_index.to(torch.int32)
        accept_index[rows] = sub_index
        accept_num[rows] = sub_num

    def _finalize_accepted_tree_path(self, req_pool_indices, *, seq_lens, accept_index,
                                     accept_lens, predict, hidden):
        """topk > 1: the accepted path's KV, predict and hidden states move to the front of each
        request's block, where the chain-layout code downstream expects them."""
        bs, ndt = seq_lens.shape[0], self.spec.ndt
        tgt, src = accepted_kv_moves(self.paging.req_to_token, req_pool_indices=req_pool_indices,
                                     seq_lens=seq_lens,
                                     accept_index=accept_index, accept_lens=accept_lens, ndt=ndt)
        self.k.move_kv_cache(self.target.backend.pool.buffers, tgt, src)
        predict = compact_accepted_to_front(predict, accept_index, bs, ndt)
        hidden = compact_accepted_to_front(hidden, accept_index, bs, ndt)
        return predict, hidden
