"""Negative controls of kernel_verify_commit: a commit written as plain loops from the
contract's words passes; the same commit with one mistake a real one makes is rejected."""
from __future__ import annotations

import torch

from harness.adapters.kernel_protocol import DEFAULT_ACCEPTS, Component
from harness.laws.kernel_verify_commit import LAW
from harness.runners.kernel_suite import first_failure

FOUND = 60  # examples a control may take to be caught


class LoopCommit:
    name = engine = "loop-commit"
    components = frozenset({Component.VERIFY_COMMIT})
    why_not = {c: "a control of one component" for c in Component
               if c is not Component.VERIFY_COMMIT}
    accepts = dict(DEFAULT_ACCEPTS)
    row_of_batch = False  # controls: the window read at pool row b, not req_pool_indices[b]
    bonus_back = 0        # controls: the bonus this many accepted nodes before the last
    counts_bonus = True   # controls: False advances seq_lens by the accepted drafts only

    def version(self) -> str:
        return "0"

    def verify_commit(self, predict, *, accept_index, accept_lens, seq_lens, out_cache_loc,
                      req_to_token, req_pool_indices, topk, ndt, hidden):
        bs = seq_lens.shape[0]
        tgt, src, pred = [], [], predict.clone()
        for b in range(bs):
            n = int(accept_lens[b])
            path = [int(accept_index[b, k]) for k in range(n)]
            row = b if self.row_of_batch else int(req_pool_indices[b])
            window = [int(req_to_token[row, int(seq_lens[b]) + t]) for t in range(ndt)]
            for k, node in enumerate(path):
                tgt.append(window[k])
                src.append(window[node - b * ndt])
                pred[b * ndt + k] = predict[node]
        last = [int(accept_index[b, max(0, int(accept_lens[b]) - 1 - self.bonus_back)])
                for b in range(bs)]
        grow = accept_lens.long() - (0 if self.counts_bonus else 1)
        return {"new_seq_lens": seq_lens + grow, "bonus": predict[last],
                "kv_moves": [(torch.tensor(tgt), torch.tensor(src))], "predict": pred}


class WindowOfTheBatchRow(LoopCommit):
    row_of_batch = True


class BonusOfThePreviousNode(LoopCommit):
    bonus_back = 1


class SeqLensWithoutTheBonus(LoopCommit):
    counts_bonus = False


def test_the_loop_commit_passes():
    assert first_failure(LAW.name, LoopCommit(), FOUND) is None


def test_window_of_the_batch_row_is_rejected():
    exc = first_failure(LAW.name, WindowOfTheBatchRow(), FOUND)
    assert exc is not None and exc.check in ("kv_front", "kv_outside"), exc


def test_bonus_of_the_previous_node_is_rejected():
    exc = first_failure(LAW.name, BonusOfThePreviousNode(), FOUND)
    assert exc is not None and exc.check == "bonus", exc


def test_seq_lens_without_the_bonus_are_rejected():
    exc = first_failure(LAW.name, SeqLensWithoutTheBonus(), FOUND)
    assert exc is not None and exc.check == "new_seq_lens", exc
