"""Per-request rows: position -> slot (req_to_token) and the draft's carried state."""
from __future__ import annotations

import torch


class ReqToTokenPool:
    """int32 `[max_reqs + 1, max_context]`. Row 0 is the reserved request row that padded graph
    lanes use (all zeros: every position maps to reserved slot 0)."""

    def __init__(self, max_reqs: int, max_context: int, device: torch.device) -> None:
        self.req_to_token = torch.zeros((max_reqs + 1, max_context), dtype=torch.int32,
                                        device=device)
        self._free_rows = list(range(max_reqs, 0, -1))
        self.max_reqs = max_reqs
        self.max_context = max_context

    def alloc(self) -> int:
        if not self._free_rows:
            raise RuntimeError(f"all {self.max_reqs} request rows are in use")
        return self._free_rows.pop()

    def free(self, row: int) -> None:
        self.req_to_token[row].zero_()
        self._free_rows.append(row)


class DraftStatePool:
    """What the draft carries between rounds, per request row: the hidden state and the
    step-0 candidates of the last draft extend, and (probabilistic drafting) that row's
    logits, from which the first draft token is sampled once the round's coins are known.
    Indexed by req_pool_idx so requests can join and leave between rounds."""

    def __init__(self, max_reqs: int, *, hidden_size: int, topk: int, dtype: torch.dtype,
                 device: torch.device, vocab_size: int = 0) -> None:
        rows = max_reqs + 1
        self.hidden = torch.zeros((rows, hidden_size), dtype=dtype, device=device)
        self.topk_p = torch.zeros((rows, topk), dtype=torch.float32, device=device)
        self.topk_index = torch.zeros((rows, topk), dtype=torch.int64, device=device)
        self.logits = (torch.zeros((rows, vocab_size), dtype=torch.float32, device=device)
                       if vocab_size else None)

    def store(self, req_pool_indices: torch.Tensor, hidden: torch.Tensor, topk_p: torch.Tensor,
              topk_index: torch.Tensor, logits: torch.Tensor | None = None) -> None:
        self.hidden[req_pool_indices] = hidden
        self.topk_p[req_pool_indices] = topk_p
        self.topk_index[req_pool_indices] = topk_index
        if self.logits is not None:
            self.logits[req_pool_indices] = logits.float()
