"""The engine's kernels: Triton, or their torch references (same signatures)."""
from __future__ import annotations

from types import SimpleNamespace

import kernels
from specdec import faults

_NAMES = ("build_tree_kernel_efficient", "build_tree_in_place", "verify_tree_greedy",
          "tree_speculative_sampling_target_only", "chain_speculative_sampling", "move_kv_cache", "assign_req_to_token_pool",
          "assign_extend_cache_locs", "assign_draft_cache_locs")


def kernel_set(impl: str) -> SimpleNamespace:
    """impl 'triton' -> the Triton kernels; 'torch' -> the `_ref` versions."""
    if impl not in ("triton", "torch"):
        raise ValueError(f"kernel implementation {impl!r}: expected 'triton' or 'torch'")
    suffix = "" if impl == "triton" else "_ref"
    ks = SimpleNamespace(**{n: getattr(kernels, n + suffix) for n in _NAMES})
    ks.move_kv_cache = _faultable_move(ks.move_kv_cache)
    return ks


def _faultable_move(move):
    """Every KV move (prefix-tail copies, draft ancestry, compaction) goes through here."""
    def move_kv_cache(buffers, tgt_loc, src_loc):
        if faults.on("kv_move_in_place"):  # the historical bug: scatter while gathering
            for buf in buffers:
                for j in range(tgt_loc.shape[0]):  # in order: a later source may be overwritten
                    buf.index_copy_(0, tgt_loc[j:j + 1], buf.index_select(0, src_loc[j:j + 1]))
            return
        move(buffers, tgt_loc, src_loc)
    return move_kv_cache
