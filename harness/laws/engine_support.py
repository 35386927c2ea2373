"""What the black-box laws share: the reference margins for ties, the plain continuation,
and the failure they raise (a law's docstring states it; this module only serves them)."""
from __future__ import annotations

from dataclasses import replace

import torch

from harness.adapters.protocol import Completion, Request, check_completion
from harness.laws.common import OracleFailure


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


def run(adapter, requests: list[Request], spec) -> list[Completion]:
    """The adapter's completions, shape-checked (a malformed one is an adapter error)."""
    outs = adapter.generate(list(requests), spec)
    if len(outs) != len(requests):
        raise ValueError(f"{adapter.name}: {len(outs)} completions for {len(requests)} requests")
    for r, c in zip(requests, outs):
        check_completion(r, c)
    return outs


def plain_continuation(adapter, requests: list[Request], extra: int = 0) -> list[Completion]:
    """Plain (non-speculative) decoding of the requests without stops, `extra` tokens past
    each cap."""
    return run(adapter, [replace(r, stop_token_ids=(), max_new_tokens=r.max_new_tokens + extra)
                         for r in requests], None)


def fail(law: str, detail: str) -> OracleFailure:
    return OracleFailure(law, law, detail)
