"""Make Triton usable on every machine before it is imported.

Without CUDA, Triton kernels run under the interpreter (TRITON_INTERPRET=1), which must be
set before `triton` is first imported. With CUDA they compile for the GPU. A user who sets
TRITON_INTERPRET themselves keeps their choice.
"""
from __future__ import annotations

import os

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
