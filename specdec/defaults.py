"""The engine's defaults, defined once: `Engine(...)` and `SpecConfig(...)` take them, and the
CLI (`python -m specdec generate`) and the harness read them from here, never a literal of
their own."""
from __future__ import annotations

MODEL = "tiny"
DRAFT = "eagle"
PAGE_SIZE = 1
DEVICE = "cpu"
DTYPE = "float32"
SEED = 0
MAX_BATCH = 32
MAX_CONTEXT = 512
TP_SIZE = 1
# SpecConfig: a chain (topk 1) of three draft steps; the verify tree then holds steps + 1.
TOPK = 1
NUM_STEPS = 3
DRAFT_SAMPLING = "greedy"
