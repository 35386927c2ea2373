"""Triton kernels, each beside a plain-torch reference with the same signature.

`X` is the Triton kernel (compiled on CUDA, interpreted on CPU), `X_ref` the reference.
Signatures and semantics: docs/contract.md section 6 and docs/kernels.md.
"""
from __future__ import annotations

from kernels import _triton_env  # noqa: F401  (sets TRITON_INTERPRET before triton loads)
from kernels.activation import silu_mul, silu_mul_ref
from kernels.greedy import argmax, argmax_ref
from kernels.attention import paged_attention, paged_attention_ref
from kernels.cache_loc import (assign_draft_cache_locs, assign_draft_cache_locs_ref,
                               assign_extend_cache_locs, assign_extend_cache_locs_ref,
                               assign_req_to_token_pool, assign_req_to_token_pool_ref)
from kernels.kv_move import move_kv_cache, move_kv_cache_ref
from kernels.kv_store import store_kv_cache, store_kv_cache_ref
from kernels.norm import rms_norm, rms_norm_ref
from kernels.peer_all_reduce import PeerBuffers, peer_all_reduce, peer_all_reduce_ref
from kernels.rope import rope_store_kv, rope_store_kv_ref
from kernels.chain_sampling import chain_speculative_sampling, chain_speculative_sampling_ref
from kernels.sampling import (tree_speculative_sampling_target_only,
                              tree_speculative_sampling_target_only_ref)
from kernels.tree import (FULL_MASK, QLEN_ONLY, QLEN_ONLY_BITPACKING, build_tree_in_place,
                          build_tree_in_place_ref, build_tree_kernel_efficient,
                          build_tree_kernel_efficient_ref, tree_column_offsets)
from kernels.verify import verify_tree_greedy, verify_tree_greedy_ref

__all__ = [
    "argmax", "argmax_ref",
    "FULL_MASK", "QLEN_ONLY", "QLEN_ONLY_BITPACKING",
    "assign_draft_cache_locs", "assign_draft_cache_locs_ref",
    "assign_extend_cache_locs", "assign_extend_cache_locs_ref",
    "assign_req_to_token_pool", "assign_req_to_token_pool_ref",
    "build_tree_kernel_efficient", "build_tree_kernel_efficient_ref",
    "build_tree_in_place", "build_tree_in_place_ref", "tree_column_offsets",
    "move_kv_cache", "move_kv_cache_ref",
    "paged_attention", "paged_attention_ref",
    "PeerBuffers", "peer_all_reduce", "peer_all_reduce_ref",
    "rms_norm", "rms_norm_ref", "rope_store_kv", "rope_store_kv_ref",
    "silu_mul", "silu_mul_ref",
    "store_kv_cache", "store_kv_cache_ref",
    "tree_speculative_sampling_target_only", "tree_speculative_sampling_target_only_ref",
    "chain_speculative_sampling", "chain_speculative_sampling_ref",
    "verify_tree_greedy", "verify_tree_greedy_ref",
]
