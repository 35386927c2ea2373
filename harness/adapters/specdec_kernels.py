"""specdec's own Triton kernels (kernels/) through the kernel-adapter door, so the kernel
laws visibly run on ours exactly as on SGLang's and vLLM's. In process: nothing to install.
Greedy chain rows go through verify_tree_greedy on a chain, as specdec's engine does."""
from __future__ import annotations

import torch

from harness.adapters import sglang_forms as F
from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component


class SpecdecKernels:
    name = "specdec-kernels"
    in_process = True
    why_not: dict = {
        # specdec's draft extend pads every request to ndt rows (section 8) and computes
        # its positions (kv_prefix_lens + j) and sampled rows (b * ndt + accept_lens - 1)
        # inline in torch in DraftExtendPhase.prepare / forward (specdec/spec/phases.py),
        # bound to the phase's paging state: no standalone kernel or function to call.
        Component.DRAFT_EXTEND_INPUTS: "specdec builds the draft extend inputs inline in "
        "torch (DraftExtendPhase.prepare / forward, specdec/spec/phases.py), no kernel",
        Component.DRAFT_NEXT_TOKEN: "specdec's verify returns accept lengths with the tokens "
        "(the next round's root is `pending`, picked by index in specdec/spec/verify.py); "
        "nothing scans -1 padded rows, and it has no discarded-request mask",
        Component.CHAIN_TREE_BUILD: "specdec builds a chain's verify tree with its tree "
        "kernel (kernels/tree.py, law kernel_tree_build's tree_build); no separate chain "
        "builder",
        Component.DRAFT_STEP_SLOTS: "specdec assigns every draft step's slots before the "
        "first step (kernels/cache_loc.py, law kernel_kv_slots) and advances the draft "
        "positions inline in torch (specdec/spec/phases.py); no per-step slot function",
    }
    components = frozenset(Component) - set(why_not)
    accepts = {**DEFAULT_ACCEPTS, "greedy_rows": True, "deterministic_draft": True,
               "coin_inputs": True}  # the engine draws the coins and hands them over

    # Only negative controls change it (tests/test_kernel_law_controls.py): a biased rule.
    threshold_acc = 1.0
    # The tree sampler's shortcut (accept a child with p >= it, no coin); only controls
    # lower it (tests/test_kernel_controls_tree_sampling.py).
    threshold_single = 1.0

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.engine = self.name

    def verify_commit(self, predict, *, accept_index, accept_lens, seq_lens, out_cache_loc,
                      req_to_token, req_pool_indices, topk, ndt, hidden):
        """specdec's tree-path compaction (specdec/spec/compaction.py), as
        Verifier._finalize_accepted_tree_path runs it for topk > 1: the KV moves read out of
        req_to_token, predict and hidden compacted. seq_lens and the next root are advanced
        inline by the round (specdec/rounds.py): not this component's outputs."""
        from specdec.spec.compaction import accepted_kv_moves, compact_accepted_to_front
        if topk == 1:  # the accepted path already is the window's front
            return {}
        bs = seq_lens.shape[0]
        tgt, src = accepted_kv_moves(req_to_token, req_pool_indices=req_pool_indices,
                                     seq_lens=seq_lens, accept_index=accept_index,
                                     accept_lens=accept_lens, ndt=ndt)
        return {"kv_moves": [(tgt, src)],
                "predict": compact_accepted_to_front(predict, accept_index, bs, ndt),
                "hidden": None if hidden is None else compact_accepted_to_front(
                    hidden, accept_index, bs, ndt)}

    def version(self) -> str:
        from importlib.metadata import version
        return version("specdec")

    def _k(self):  # the kernels, imported where they run
        import kernels.cache_loc as cache_loc
        import kernels.chain_sampling as chain
        import kernels.tree as tree
        import kernels.verify as verify
        return tree, verify, chain, cache_loc

    def _dev(self, *ts):
        return [t.to(self.device) if isinstance(t, torch.Tensor) else t for t in ts]

    def tree_build(self, parent_list, *, top_scores_index, seq_lens, topk, spec_steps, ndt, mode):
        tree = self._k()[0]
        pl, sel, sl = self._dev(parent_list, top_scores_index, seq_lens)
        bs = sl.shape[0]
        z = torch.zeros(bs * ndt, dtype=torch.int64, device=self.device)
        mask, pos, ri, rn, rs, _ = tree.build_tree_kernel_efficient(
            z[:bs], pl, sel, z[:bs * (ndt - 1)], sl, int(sl.sum()), topk, spec_steps, ndt, mode)
        return {"mask": mask.cpu(), "positions": pos.cpu(), "retrieve_index": ri.cpu(),
                "next_token": rn.cpu(), "next_sibling": rs.cpu()}

    def greedy_tree_verify(self, candidates, *, retrieve_index, next_token, next_sibling,
                           target_predict, num_steps):
        verify = self._k()[1]
        cand, ri, rn, rs, tp = self._dev(candidates, retrieve_index, next_token, next_sibling,
                                         target_predict)
        bs, ndt = cand.shape
        pred, acc, num = F.verify_buffers(bs, ndt, num_steps + 1, self.device)
        verify.verify_tree_greedy(pred, acc, num, cand, ri, rn, rs, tp)
        return {"predicts": pred.cpu(), "accept_index": acc.cpu(), "accept_len": num.cpu()}

    def chain_sampling(self, draft_ids, *, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant, coins=None, final_coins=None):
        chain = self._k()[2]
        bs, k = draft_ids.shape
        out = torch.full((bs, k + 1), -1, dtype=torch.int64)
        coins, final = F.chain_coins(bs, k, seed, coins, final_coins)
        for rows, is_greedy in ((greedy.nonzero()[:, 0], True), ((~greedy).nonzero()[:, 0], False)):
            if len(rows) == 0:
                continue
            d = draft_ids[rows]
            cand = F.chain_candidates(d)
            pred, acc, num = F.verify_buffers(len(rows), k + 1, k + 1, self.device)
            if is_greedy:
                ri, rn, rs = F.chain_links(len(rows), k + 1, self.device)
                target = target_probs[rows].argmax(-1)
                self._k()[1].verify_tree_greedy(pred, acc, num, *self._dev(cand, ri, rn, rs, target))
            else:
                q = F.dense_draft_probs(d, None if draft_probs is None else draft_probs[rows],
                                        target_probs.shape[-1])
                chain.chain_speculative_sampling(
                    pred, acc, num, *self._dev(cand, coins[rows], final[rows],
                                               target_probs[rows].float(), q),
                    threshold_acc=self.threshold_acc)
            out[rows] = F.chain_tokens(pred, acc, num, d)
        return out

    def tree_sampling(self, candidates, *, retrieve_index, next_token, next_sibling, target_probs,
                      seed, num_steps):
        from kernels.sampling import tree_speculative_sampling_target_only as sample
        bs, ndt = candidates.shape
        gen = torch.Generator().manual_seed(seed)
        # As specdec's engine draws them: a coin per node (read at the node whose children are
        # tried), one final coin per row.
        coins, final = torch.rand(bs, ndt, generator=gen), torch.rand(bs, generator=gen)
        p = target_probs.float()
        pred, acc, num = F.verify_buffers(bs, ndt, num_steps + 1, self.device)
        # Target only: q starts at zero (the drafts are top-k); the kernel writes each rejected
        # sibling's p into it, so the final residual relu(p - q) leaves the tried tokens out.
        sample(pred, acc, num, *self._dev(candidates, retrieve_index, next_token, next_sibling,
                                          coins, final, p, torch.zeros_like(p)),
               self.threshold_single, self.threshold_acc)
        return {"accept_index": acc.cpu(), "accept_len": num.cpu(),
                "tokens": F.tree_tokens(pred, acc, num)}

    def req_to_token_write(self, req_to_token, req_pool_indices, start, end, out_cache_loc):
        cache_loc = self._k()[3]
        r2t, pool, s, e, loc = self._dev(req_to_token.clone(), req_pool_indices, start, end,
                                         out_cache_loc)
        cache_loc.assign_req_to_token_pool(pool, r2t, s, e, loc)
        return r2t.cpu()

    def draft_cache_locs(self, req_to_token, *, req_pool_indices, seq_lens, topk, num_steps,
                         page_size):
        cache_loc = self._k()[3]
        r2t, pool, sl = self._dev(req_to_token, req_pool_indices, seq_lens)
        bs = sl.shape[0]
        out = torch.full((bs * topk * num_steps,), -1, dtype=torch.int64, device=self.device)
        n_copy = bs * (topk - 1) * (page_size - 1)
        src = torch.zeros(n_copy, dtype=torch.int64, device=self.device)
        tgt = torch.zeros(n_copy, dtype=torch.int64, device=self.device)
        cache_loc.assign_draft_cache_locs(pool, r2t, sl, out, src, tgt, topk, num_steps,
                                          page_size)
        # Lanes past a request's partial page are (0, 0): a slot copied onto itself, no move.
        pairs = [(a, b) for a, b in zip(src.tolist(), tgt.tolist()) if a != b]
        return {"out_cache_loc": out.cpu(), "copies": pairs}

    def draft_decode_kv_indices(self, req_to_token, *, req_pool_indices, seq_lens, topk,
                                num_steps, page_size):
        """specdec's draft attention reads a per-branch page table (row_seq -> page ids) over
        row_kv_len virtual positions (`build_draft_decode_metadata`); the adapter spells those
        reads out as flat slot lists (page id * page_size + offset). One ForwardBatch per
        step, the last (num_steps-1) included: the builder is a function of draft_step."""
        from specdec.attention.forward_batch import ForwardBatch, ForwardMode
        from specdec.attention.metadata import build_draft_decode_metadata
        r2t, pool, sl = self._dev(req_to_token, req_pool_indices, seq_lens)
        n, dev = sl.shape[0] * topk, self.device
        z = lambda m: torch.zeros(m, dtype=torch.int64, device=dev)  # noqa: E731
        fbs = [ForwardBatch(mode=ForwardMode.DRAFT_DECODE, input_ids=z(n), positions=z(n),
                            out_cache_loc=z(n * num_steps), req_pool_indices=pool, seq_lens=sl,
                            kv_prefix_lens=sl, topk=topk, num_steps=num_steps, draft_step=i)
               for i in range(num_steps)]
        rows = [_page_reads(md, page_size) for md in
                build_draft_decode_metadata(fbs, r2t, page_size)]
        return {"kv_indices": [r[0] for r in rows],
                "kv_indptr": torch.stack([r[1] for r in rows])}

    def close(self) -> None:  # in process: nothing to stop (remote adapters stop a worker)
        pass


def _page_reads(md, page_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat slots, indptr) of one forward's attention metadata: query row r reads virtual
    positions 0 .. row_kv_len[r]-1 of page-table row row_seq[r]."""
    lens = md.row_kv_len.long().cpu()
    table = md.page_table.long().cpu()[md.row_seq.long().cpu()]
    p = torch.arange(int(lens.max()) if lens.numel() else 0)
    slots = table[:, p // page_size] * page_size + p % page_size
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    return slots[p[None, :] < lens[:, None]], indptr
