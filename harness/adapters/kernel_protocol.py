"""The kernel adapter protocol: the speculative components an engine implements as kernels,
each called in one harness-side form, so that the kernel laws (harness/laws/kernel_*.py)
run on any engine's own kernels: specdec's, SGLang's and vLLM's from their released wheels.

An adapter is a class with `name`, `version()`, `components` (the Components it has),
`why_not` (Component -> why it lacks it), `accepts` (the corners of each contract it takes,
below) and one method per component it has. Tensors come in and go out on the CPU; the
adapter moves them to its device. Where the engine's own contract differs (padding value,
index layout, an input the harness form has and the engine draws itself), the adapter maps
it, and docs/adapters.md ("Kernel adapters") names each difference. A law never bends to an
engine: a mapping that loses information is a component the adapter does not have.

Components and their harness-side forms (node 0 of a tree is the root, the pending bonus
token; index layouts follow docs/contract.md sections 4-6):

- TREE_BUILD: `tree_build(parent_list [bs, P] i64, top_scores_index [bs, ndt-1] i64,
  seq_lens [bs] i64, topk, spec_steps, ndt, mode) -> dict(mask, positions [bs*ndt],
  retrieve_index [bs, ndt], next_token [bs, ndt], next_sibling [bs, ndt])`; `mask` is flat in
  `mode` (0 full, 1 qlen-only, 2 bit-packed), retrieve_index holds flat ids b*ndt + t.
- CHAIN_TREE_BUILD: `chain_tree_build(bonus [bs] i64, *, draft_tokens [bs, S] i64, seq_lens
  [bs] i64, req_to_token [R, L] i32, req_pool_indices [bs] i64, mrope) -> dict(mask, positions,
  retrieve_index, next_token, next_sibling (as TREE_BUILD's for topk 1, ndt S + 1, mode 1),
  tokens [bs*(S+1)] (the bonus, then the drafts), out_cache_loc [bs*(S+1)] (the request's
  req_to_token row at seq_len + t, or None where the engine makes it elsewhere),
  mrope_positions [3, bs*(S+1)] where `mrope`)`: a chain draft's verify batch, built in one.
- GREEDY_TREE_VERIFY: `greedy_tree_verify(candidates [bs, ndt] i64, retrieve_index,
  next_token, next_sibling, target_predict [bs, ndt] i64, num_steps) -> dict(predicts
  [bs*ndt], accept_index [bs, num_steps+1] (flat ids, -1 padded), accept_len [bs])`; only
  the entries at accepted nodes of `predicts` are defined.
- CHAIN_SAMPLING: `chain_sampling(draft_ids [bs, K] i64, num_drafts [bs] i64, draft_probs
  [bs, K, V] f32 or None, target_probs [bs, K+1, V] f32, greedy [bs] bool, seed, variant,
  [coins [bs, K+1] f32, final_coins [bs] f32]) -> tokens [bs, K+1] i64` (the coins only to
  an adapter with accepts["coin_inputs"], whose kernel takes its coins from the caller:
  coins[b, i] is the one read when draft i is tried, final_coins[b] the recovered or bonus
  draw's): row b emits its accepted drafts, then one recovered (after a
  rejection) or bonus (all accepted) token, then -1. `draft_probs=None` means a draft that
  proposes deterministically (q one-hot on the proposed token); greedy rows take the
  target's argmax; `variant` names the acceptance rule ("classic" or "block").
- TREE_SAMPLING: `tree_sampling(candidates [bs, ndt] i64, retrieve_index, next_token,
  next_sibling, target_probs [bs, ndt, V] f32, seed, num_steps) -> dict(accept_index
  [bs, num_steps+1] (flat ids, -1 padded), accept_len [bs], tokens [bs, num_steps+1] i64)`:
  speculative sampling over a draft tree whose drafts were proposed deterministically (a
  draft's top-k, distinct among siblings, as EAGLE trees are), so the rule reads p alone
  (SGLang's "target only"): target_probs[b, t] is p at node t (the next token's); at each
  accepted node its children are tried in sibling order; `tokens[b]` holds the accepted
  nodes' candidates, then the one bonus or recovered token drawn at the last accepted node,
  then -1. Every random draw comes from `seed`.
- REQ_TO_TOKEN_WRITE: `req_to_token_write(req_to_token [R, L] i32, req_pool_indices [bs],
  start [bs], end [bs], out_cache_loc [sum(end-start)]) -> req_to_token after the write`.
- DRAFT_CACHE_LOCS: `draft_cache_locs(req_to_token, req_pool_indices [bs], seq_lens [bs],
  topk, num_steps, page_size) -> dict(out_cache_loc [bs*topk*num_steps] in layout [bs, topk,
  num_steps], copies: (source, target) slot lists of the prefix-tail copies, or None when
  the engine makes them elsewhere)`.
- DRAFT_DECODE_KV_INDICES: `draft_decode_kv_indices(req_to_token [R, L] i32, req_pool_indices
  [bs] i64, seq_lens [bs] i64, topk, num_steps, page_size) -> dict(kv_indices, kv_indptr
  [num_steps, bs*topk+1])`: the KV slots draft decode step i (i = 0 .. num_steps-1; SGLang's
  forwards read 0 .. num_steps-2) attends to, flat, row r = b*topk + k at kv_indptr[i, r]:
  request b's prefix (req_to_token at positions 0 .. seq_len-1) then branch k's draft slots
  of steps 0..i. req_to_token already holds the draft slots (section 4's layout, as
  DRAFT_CACHE_LOCS assigned them); seq_lens are the draft prefix lengths. kv_indices: a
  [num_steps, W] tensor or num_steps 1-D tensors, row i's first kv_indptr[i, -1] defined.
- DRAFT_EXTEND_INPUTS: `draft_extend_inputs(seq_lens [bs] i64, num_drafts [bs] i64,
  num_accepted [bs] i64, layout) -> dict(positions [T], last_token_indices [bs],
  source_indices [T]; each None where the engine makes it elsewhere)`: after a verify round
  over request b's pending token (at position seq_lens[b]) and its num_drafts[b] drafts, the
  drafter's next forward takes its v = num_accepted[b] + 1 verified tokens, token i at
  position seq_lens[b] + i, laid out "padded" (the verify batch's own layout, request b from
  sum(num_drafts[:b] + 1), its rejected drafts left in place as padding) or "packed" (the v
  tokens of each request back to back); last_token_indices[b] is the flat index of its
  last verified token (where the next draft token is sampled), source_indices (packed) the
  verify-batch index each token comes from. Optional outputs, for kernels that make them:
  input_ids [T] (the drafter's token ids, where the verify batch's token at flat index j is
  1000 + j and request b's next token, its last sampled one, is 2000 + b, VERIFY_ID and
  NEXT_ID of references/draft_inputs.py: the adapter hands these ids to the engine through
  whatever indirection it has), num_rejected [bs],
  query_start_loc [bs+1], seq_lens [bs] (the lengths the drafter attends to), and
  graph_padding: dict of the entries a kernel writes past the batch for CUDA graphs
  (last_token_indices, seq_lens, query_start_loc, draft_step).
- DRAFT_NEXT_TOKEN: `draft_next_token(sampled [bs, W] i64 (-1 padded, as chain_sampling
  returns), discard [bs] bool, backup [bs] i64, vocab_size) -> dict(next_token [bs],
  valid_count [bs])`: the token the drafter continues from, the row's last emitted token,
  or backup[b] where the row emitted none or the request is discarded (valid_count 0 then).
- VERIFY_COMMIT: `verify_commit(predict [bs*ndt] i64, accept_index [bs, S+1] i32 (-1
  padded), accept_lens [bs] i32 (accepted nodes, root included), seq_lens [bs] i64,
  out_cache_loc [bs*ndt] i64 (the verify window's slots, = req_to_token[req_pool_indices[b],
  seq_lens[b] + t]), req_to_token [R, L] i32, req_pool_indices [bs] i64, topk, ndt, hidden
  [bs*ndt, H] f32 or None) -> dict(new_seq_lens, bonus (and "bonus_<path>" for another of
  the engine's paths to it), kv_moves: the engine's KV move calls [(tgt, src)], predict and
  hidden compacted, select_index / correct (a chain's draft-extend inputs); each None where
  the engine makes it elsewhere)`: what a verify round commits.
- DRAFT_STEP_SLOTS: `draft_step_slots(positions [bs] i64, block_table [bs, ceil(M/B)] i32,
  seq_lens [bs] i32, block_size B, max_model_len M, padded_bs, steps) -> dict(positions
  [steps, bs], slot_mapping [steps, padded_bs], seq_lens [steps, bs])`: the EAGLE drafter's
  autoregressive steps after its first token, chained as the drafter chains them (step s's
  outputs, in the engine's own buffers, are step s+1's inputs): request b's draft position
  moves from positions[b] (its last verified token's; seq_lens[b] = positions[b] + 1) by
  one a step; slot_mapping is where that step's token KV goes (-1: no write), rows past bs
  the CUDA-graph padding.

`accepts`: what the adapter's kernels take, so the strategies draw it all and no more:
"tree_mask_modes" (tuple), "ragged_drafts" (bool: num_drafts may differ per row),
"greedy_rows" (bool: greedy and sampled rows in one batch), "deterministic_draft" (bool:
draft_probs=None), "variants" (tuple), "ratio_variants" (the variants whose acceptance is
the per-token rule min(1, p/q) with recovered tokens from max(0, p - q); the others, such
as block verification or comparing the target's own sample with the draft, are lossless
by another rule and held to the per-token support rules and the distribution law),
"page_sizes" (tuple or None for any), "draft_extend_layouts" (tuple: "padded", "packed"),
"coin_inputs" (bool: chain_sampling takes the caller's coins).
"""
from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable


class Component(str, enum.Enum):
    TREE_BUILD = "tree_build"
    CHAIN_TREE_BUILD = "chain_tree_build"
    GREEDY_TREE_VERIFY = "greedy_tree_verify"
    CHAIN_SAMPLING = "chain_sampling"
    TREE_SAMPLING = "tree_sampling"
    REQ_TO_TOKEN_WRITE = "req_to_token_write"
    DRAFT_CACHE_LOCS = "draft_cache_locs"
    DRAFT_DECODE_KV_INDICES = "draft_decode_kv_indices"
    DRAFT_EXTEND_INPUTS = "draft_extend_inputs"
    DRAFT_NEXT_TOKEN = "draft_next_token"
    DRAFT_STEP_SLOTS = "draft_step_slots"
    VERIFY_COMMIT = "verify_commit"


DEFAULT_ACCEPTS = {"tree_mask_modes": (0, 1, 2), "ragged_drafts": False, "greedy_rows": False,
                   "deterministic_draft": False, "variants": ("classic",), "ratio_variants": ("classic",),
                   "page_sizes": None, "draft_extend_layouts": ("padded", "packed"),
                   "coin_inputs": False}


@runtime_checkable
class KernelAdapter(Protocol):
    name: str
    components: frozenset
    why_not: dict
    accepts: dict

    def version(self) -> str: ...
