"""The engine's kernels: Triton, or their torch references (same signatures)."""
from __future__ import annotations

from types import SimpleNamespace

import kernels

_NAMES = ("build_tree_kernel_efficient", "verify_tree_greedy",
          "tree_speculative_sampling_target_only", "move_kv_cache", "assign_req_to_token_pool",
          "assign_extend_cache_locs", "assign_draft_cache_locs")


def kernel_set(impl: str) -> SimpleNamespace:
    """impl 'triton' -> the Triton kernels; 'torch' -> the `_ref` versions."""
    if impl not in ("triton", "torch"):
        raise ValueError(f"kernel implementation {impl!r}: expected 'triton' or 'torch'")
    suffix = "" if impl == "triton" else "_ref"
    return SimpleNamespace(**{n: getattr(kernels, n + suffix) for n in _NAMES})
