"""The bug zoo's fault registry, seen from the engine: `faultpoints` is a leaf package (it
imports nothing of ours), so the kernels read the same switches without importing the
engine (layers: faultpoints < kernels < specdec < harness)."""
from faultpoints import REGISTRY, Fault, _validated, active, enabled, on, set_active  # noqa: F401
