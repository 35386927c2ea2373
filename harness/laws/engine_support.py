"""What the black-box laws share: the reference margins for ties and the failure they raise
(the runs they make: harness/strategies/engine_runs.py) (a law's docstring states it; this module only serves them)."""
from __future__ import annotations

import torch

from harness.adapters.protocol import Completion, Request
from harness.base.failure import OracleFailure


def margins(adapter, req: Request, ref: Completion) -> list[float]:
    """Top-2 logit margin of the target at each position of the reference output: from the
    reference completion's own logits when the adapter returned them, else one forward of
    the target over prompt + output."""
    logits = ref.logits
    if logits is None or len(logits) < len(ref.tokens):
        seq = list(req.prompt) + ref.tokens[:-1]
        logits = adapter.target_logits(seq)[len(req.prompt) - 1:]
    if not ref.tokens:
        return []
    top2 = torch.topk(logits[:len(ref.tokens)].float(), 2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).tolist()


def fail(law: str, detail: str) -> OracleFailure:
    return OracleFailure(law, law, detail)
