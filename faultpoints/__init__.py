"""The bug zoo's fault points: named, historical mistakes the engine can be told to make.

Each fault is one line at the exact place where the engine could make that mistake
(`if faults.on("name"): ...`), off by default; checking one is a lookup in a frozenset.
Switch faults on with SPECDEC_FAULTS=name[,name] (read at import), `with faults.active(...)`,
or pytest's `--faults name`. docs/contract.md section 9 lists the classes.

A leaf: it imports nothing of ours, so every layer (kernels, engine, harness) reads the
same switches.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Fault:
    name: str
    source: str
    mistake: str
    devices: tuple = ("cpu", "cuda")  # device types whose code path holds the mistake
    zoo: int = 1                      # 1: the first zoo (SGLang's seed bugs), 2: 2025-2026


_FIRST_ZOO = [
    Fault("draft_positions_early_increment", "SGLang #25015",
          "positions incremented before each draft forward instead of after"),
    Fault("draft_capture_positions_not_restored", "SGLang #25015",
          "the captured draft function leaves positions advanced by num_steps-1"),
    Fault("draft_per_step_loc_unsliced", "SGLang #26239",
          "eager multi-step draft bakes a wrongly permuted out_cache_loc row into metadata"),
    Fault("draft_per_step_loc_strided", "SGLang per-step contiguity test",
          "per-step write slots handed to a stride-1 kernel as a strided view"),
    Fault("draft_extend_reads_graph_buffers_on_fallback", "SGLang #22832",
          "when the draft-extend graph cannot run, the state pool is updated from its static buffers"),
    Fault("verify_metadata_before_padding", "SGLang #26244",
          "eager verify initialises metadata before the batch is padded"),
    Fault("tree_accept_not_compacted", "SGLang #26997",
          "accepted tree path not moved to the front (KV, predict and hidden)"),
    Fault("bonus_stride_ndt", "SGLang #26866",
          "accepted-token buffer indexed with stride ndt instead of num_steps+1"),
    Fault("graph_pad_stale_positions", "SGLang #10892",
          "padded graph lanes keep stale positions and write slots"),
    Fault("graph_seq_lens_sum_unpadded", "SGLang #26880",
          "replay metadata sees the raw seq_lens_sum, not the padded one"),
    Fault("draft_kv_indices_missing_topk", "SGLang #27338",
          "graph-side draft kv-index (branch page table) buffer sized without the topk factor"),
    Fault("draft_extend_width_steps_plus_one", "SGLang #27545",
          "draft-extend graph laid out with num_steps+1 tokens per request instead of ndt"),
    Fault("page_tail_not_duplicated", "SGLang #26972 / #7725",
          "page_size>1, topk>1: prefix tail not copied into branches k >= 1"),
    Fault("kv_move_in_place", "SGLang compaction tests",
          "KV move scatters while gathering; overlapping ranges corrupt"),
    Fault("stale_draft_kv_after_accept", "vLLM #14649",
          "draft KV of accepted tokens not rewritten after accept"),
    Fault("recovered_token_out_of_vocab", "vLLM GHSA-8wr5-jm2h-8r4f / vLLM PR #21876",
          "recovered-token draw over a NaN / all-zero residual returns an id >= vocab_size"),
]
# Zoo v2: the 2025-2026 classes (docs/contract.md section 9; each story: cases/<name>.py).
_SECOND_ZOO = [
    Fault("finish_cap_before_stop", "SGLang #33758",
          "the max_new_tokens cap is applied before the stop check: a multi-token accept emits "
          "tokens past an earlier stop token"),
    Fault("coin_le_cdf_accepts_zero_prob", "SGLang #35798",
          "the sampler compares coin <= cdf with coins in [0, 1): coin 0 selects a token of "
          "probability 0"),
    Fault("final_coin_reused", "SGLang #7207 / #7231",
          "the final (bonus / recovery) draw reuses the last acceptance coin"),
    Fault("draft_noise_shares_accept_stream", "vLLM #54282",
          "probabilistic drafting keys its noise with the acceptance coin's stream and offset"),
    Fault("graph_output_not_captured", "vLLM #37639",
          "a per-step output of the captured multi-step draft is not written by replay"),
    Fault("dummy_lane_real_row", "vLLM #56734",
          "padded / dummy lanes write draft KV through a live request's row, not row 0"),
    Fault("unequal_accept_slicing", "SGLang #28496",
          "per-request results sliced as if every request accepted the same number of tokens"),
    Fault("draft_rope_table_short", "vLLM #48894",
          "the draft's RoPE table is sized by the draft's own max_position, shorter than the "
          "context"),
    Fault("tp_rank_divergent_padding", "SGLang DP/TP padding (cuda graph bs per rank)",
          "a worker rank runs a phase eagerly, unpadded, where rank 0 replays its padded graph"),
    Fault("tp_vocab_shard_argmax_local", "vocab-parallel LM head without the gather",
          "greedy verify / draft top-k taken over the rank's local vocabulary shard"),
    Fault("tp_idle_rank_dummy_writes", "vLLM #56734 (idle DP rank dummy batch)",
          "a worker rank's idle (padded) lanes run through its last live request row, writing "
          "KV and draft state into that request's shard"),
    Fault("tp_peer_buffer_stale", "custom all-reduce, registered peer buffer",
          "the peer-memory all-reduce skips staging this call's rows into the rank's buffer: "
          "every rank sums what the buffers held from the call before", devices=("cuda",)),
    # Overlap scheduling (contract section 10).
    Fault("overlap_early_free", "SGLang overlap scheduler (deferred free)",
          "when round i resolves, pages past the committed length are freed although round "
          "i+1, in flight, was reserved into them and may commit there"),
    Fault("overlap_placeholder_leak", "vLLM #47029",
          "one in-flight flag for the whole batch: a request admitted or resumed while a round "
          "is in flight gets its row's unresolved placeholder as its pending token"),
    Fault("overlap_stale_seq_lens", "vLLM #52179",
          "round i+1 takes the host's lagging committed lengths instead of the device's"),
    Fault("overlap_finish_late_tokens", "SGLang overlap scheduler (finished in round i)",
          "the extra round's results of a request that finished in round i are applied to it "
          "(tokens appended, lengths and statistics advanced)"),
    # The prefix cache (contract section 11).
    Fault("eagle_prefix_not_bigram_aligned", "SGLang #10846",
          "the EAGLE prefix tree is keyed by tokens, not bigrams: a cached draft row at the "
          "prefix boundary is reused although the token after it differs"),
    Fault("prefix_hit_draft_kv_uninitialized", "SGLang #19897",
          "on a prefix hit the draft extend starts at the tree's raw match, not the reuse "
          "length the target used: draft KV at recomputed positions is never written"),
    Fault("prefix_insert_uncommitted", "prefix cache, committed length",
          "a finished request inserts pages up to seq_len + 1: the pending bonus slot, whose "
          "target KV is speculative, enters the tree"),
    Fault("prefix_evict_referenced", "prefix cache, eviction",
          "eviction ignores reference counts and frees pages a running request still uses"),
]
# The registry, in this order: the contract's section 9 tables are generated from it
# (`python -m harness zoo-table`).
REGISTRY: dict[str, Fault] = {f.name: f for f in
                             _FIRST_ZOO + [replace(f, zoo=2) for f in _SECOND_ZOO]}

_active: frozenset[str] = frozenset()


def _validated(names) -> frozenset[str]:
    names = frozenset(n.strip() for n in names if n and n.strip())
    unknown = sorted(names - REGISTRY.keys())
    if unknown:
        raise ValueError(f"unknown fault(s) {unknown}; known faults: {sorted(REGISTRY)}")
    return names


def on(name: str) -> bool:
    return name in _active


def enabled() -> frozenset[str]:
    return _active


def set_active(names) -> None:
    global _active
    _active = _validated(names)


@contextlib.contextmanager
def active(*names: str):
    """Turn faults on for a block (they are read when the engine runs, not when it is built)."""
    global _active
    saved = _active
    _active = saved | _validated(names)
    try:
        yield
    finally:
        _active = saved


set_active(os.environ.get("SPECDEC_FAULTS", "").split(","))
