"""specdec: an EAGLE-style speculative decoding engine on paged KV, and its harness."""
from __future__ import annotations

import kernels._triton_env  # noqa: F401  (must precede the first triton import)
from specdec.config import MODEL_SHAPES, ModelConfig, SpecConfig
from specdec.engine import Engine

__all__ = ["Engine", "SpecConfig", "ModelConfig", "MODEL_SHAPES"]
