"""Running one forward: metadata init, the model, and the optional trace."""
from __future__ import annotations

import torch

from specdec.attention.forward_batch import ForwardBatch


def run_forward(model, *, backend, fb: ForwardBatch, logit_rows: torch.Tensor | None = None,
                recorder=None, init_metadata: bool = True):
    """Eager forward of `fb`; returns (logits of `logit_rows` or all rows, hidden states)."""
    if init_metadata:
        backend.init_forward_metadata(fb)
    logits, hidden = model(fb, backend, logit_rows)
    if recorder is not None:
        recorder.on_forward(fb, logits, hidden, graph=False)
    return logits, hidden
