"""specdec's own Triton kernels (kernels/) through the kernel-adapter door, so the kernel
laws visibly run on ours exactly as on SGLang's and vLLM's. In process: nothing to install.
Greedy chain rows go through verify_tree_greedy on a chain, as specdec's engine does."""
from __future__ import annotations

import torch

from harness.kernel_adapters import sglang_forms as F
from harness.kernel_adapters.protocol import DEFAULT_ACCEPTS, Component


class SpecdecKernels:
    name = "specdec-kernels"
    in_process = True
    components = frozenset(Component)
    why_not: dict = {}
    accepts = {**DEFAULT_ACCEPTS, "greedy_rows": True, "deterministic_draft": True}

    # Only negative controls change it (tests/test_kernel_law_controls.py): a biased rule.
    threshold_acc = 1.0

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.engine = self.name

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

    def tree_build(self, parent_list, top_scores_index, seq_lens, topk, spec_steps, ndt, mode):
        tree = self._k()[0]
        pl, sel, sl = self._dev(parent_list, top_scores_index, seq_lens)
        bs = sl.shape[0]
        z = torch.zeros(bs * ndt, dtype=torch.int64, device=self.device)
        mask, pos, ri, rn, rs, _ = tree.build_tree_kernel_efficient(
            z[:bs], pl, sel, z[:bs * (ndt - 1)], sl, int(sl.sum()), topk, spec_steps, ndt, mode)
        return {"mask": mask.cpu(), "positions": pos.cpu(), "retrieve_index": ri.cpu(),
                "next_token": rn.cpu(), "next_sibling": rs.cpu()}

    def greedy_tree_verify(self, candidates, retrieve_index, next_token, next_sibling,
                           target_predict, num_steps):
        verify = self._k()[1]
        cand, ri, rn, rs, tp = self._dev(candidates, retrieve_index, next_token, next_sibling,
                                         target_predict)
        bs, ndt = cand.shape
        pred, acc, num = F.verify_buffers(bs, ndt, num_steps + 1, self.device)
        verify.verify_tree_greedy(pred, acc, num, cand, ri, rn, rs, tp)
        return {"predicts": pred.cpu(), "accept_index": acc.cpu(), "accept_len": num.cpu()}

    def chain_sampling(self, draft_ids, num_drafts, draft_probs, target_probs, greedy, seed,
                       variant):
        chain = self._k()[2]
        bs, k = draft_ids.shape
        out = torch.full((bs, k + 1), -1, dtype=torch.int64)
        gen = torch.Generator().manual_seed(seed)
        coins, final = torch.rand(bs, k + 1, generator=gen), torch.rand(bs, generator=gen)
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

    def req_to_token_write(self, req_to_token, req_pool_indices, start, end, out_cache_loc):
        cache_loc = self._k()[3]
        r2t, pool, s, e, loc = self._dev(req_to_token.clone(), req_pool_indices, start, end,
                                         out_cache_loc)
        cache_loc.assign_req_to_token_pool(pool, r2t, s, e, loc)
        return r2t.cpu()

    def draft_cache_locs(self, req_to_token, req_pool_indices, seq_lens, topk, num_steps,
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

    def close(self) -> None:  # in process: nothing to stop (remote adapters stop a worker)
        pass
