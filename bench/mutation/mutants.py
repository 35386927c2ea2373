# (name, file, old, new): one realistic mistake each, planted alone by run.sh. The 2026-11-25
# campaign: every one is caught by `pytest -n auto` except four judged equivalent (they change
# nothing an observable reads): draft_carried_state_padding_unmasked,
# sample_accept_greedy_rows_left, deferred_released_early, filter_no_max_subtraction. On
# 2026-11-27 (bench/results/mutation-cpu-2026-11-27*.txt) the sampling_filter law caught the
# last one: with the filters off, its probabilities are no longer the plain softmax bit for bit.
M = [
 ("admit_ignores_deferred", "specdec/scheduler.py",
  "while self.waiting and len(self.holding()) + len(new) < self.e.max_batch:",
  "while self.waiting and len(self.running) + len(new) < self.e.max_batch:"),
 ("commit_keep_drops_bonus_page", "specdec/rounds.py",
  "keep = self.step_ends([r.seq_len])[0] if r.unresolved else r.seq_len + 1",
  "keep = self.step_ends([r.seq_len])[0] if r.unresolved else r.seq_len"),
 ("shrink_floor", "specdec/memory/manager.py",
  "n_keep = -(-keep // self.page_size)", "n_keep = keep // self.page_size"),
 ("coins_base_ignore_unresolved", "specdec/rounds.py",
  "base = [r.seq_len + 1 + r.unresolved for r in reqs]", "base = [r.seq_len + 1 for r in reqs]"),
 ("tree_hidden_not_compacted", "specdec/spec/verify.py",
  "        hidden = compact_accepted_to_front(hidden, accept_index, bs, ndt)\n", ""),
 ("extend_last_row_off_by_one", "specdec/spec/phases.py",
  "last = (x.accept_lens - 1).clamp(min=0)  # padded requests: their row 0",
  "last = (x.accept_lens - 2).clamp(min=0)  # padded requests: their row 0"),
 ("topk_drops_kth", "specdec/sampler.py",
  "x = x.masked_fill(x < kth, float(\"-inf\"))", "x = x.masked_fill(x <= kth, float(\"-inf\"))"),
 ("top_p_keeps_boundary", "specdec/sampler.py",
  "drop_sorted = (before >= top_p.double() * csum[..., -1:]) & (top_p < 1.0)",
  "drop_sorted = (before > top_p.double() * csum[..., -1:]) & (top_p < 1.0)"),
 ("prefix_share_last_page", "specdec/prefix_cache/cache.py",
  "n_shared = min(m, (len(tokens) - 1) // ps)", "n_shared = min(m, len(tokens) // ps)"),
 ("retract_to_back", "specdec/scheduler.py",
  "self.waiting.appendleft(victim)", "self.waiting.append(victim)"),
 ("draft_carried_state_padding_unmasked", "specdec/spec/draft_decode_phase.py",
  "\"hidden\": torch.where(real, state.hidden[rows], 0.0)}", "\"hidden\": state.hidden[rows]}"),
 ("finish_stop_past_cap", "specdec/request.py",
  "for i, t in enumerate(self.output[:self.max_new_tokens]):", "for i, t in enumerate(self.output):"),
 ("req_seed_ignores_engine_seed", "specdec/random_streams.py",
  "return s if s is not None else mix_seed(engine_seed + (1 << 32), req.rid)",
  "return s if s is not None else mix_seed(1 << 32, req.rid)"),
 ("sample_accept_greedy_rows_left", "specdec/spec/verify.py",
  "        predict.view(-1, ndt)[rows] = 0  # drop the greedy walk's entries for these rows\n", ""),
 ("graph_bucket_smaller", "specdec/graphs/runner.py",
  "return next(b for b in self.buckets if b >= bs)", "return next(b for b in self.buckets if b >= bs - 1)"),
]
M += [
 ("select_hidden_not_reparented", "specdec/spec/select.py",
  "    hidden_states = hidden_states[parent_row]\n", ""),
 ("organize_unsorted", "specdec/spec/select.py",
  "top_scores_index = torch.sort(top_scores.indices).values", "top_scores_index = top_scores.indices"),
 ("verify_kv_len_short", "specdec/attention/metadata.py",
  "(seq + ndt).to(torch.int32), mask_start, offset, fb.custom_mask)",
  "(seq + ndt - 1).to(torch.int32), mask_start, offset, fb.custom_mask)"),
 ("draft_decode_kv_len_short", "specdec/attention/metadata.py",
  "kv_len = (fb.kv_prefix_lens.repeat_interleave(fb.topk) + 1).to(torch.int32)",
  "kv_len = fb.kv_prefix_lens.repeat_interleave(fb.topk).to(torch.int32)"),
 ("evict_locked_parent", "specdec/prefix_cache/tree.py",
  "if parent is not self.root and parent.is_leaf and evictable(parent):",
  "if parent is not self.root and parent.is_leaf:"),
 ("deferred_released_early", "specdec/scheduler.py",
  "for r in [r for r in self.deferred if not r.unresolved]:", "for r in list(self.deferred):"),
 ("retract_oldest", "specdec/scheduler.py",
  "victim = max(self.running, key=lambda r: r.rid)", "victim = min(self.running, key=lambda r: r.rid)"),
]
M += [
 ("tp_o_proj_kv_offset", "specdec/tp/shard.py",
  "_cols(m.o_proj.weight, r * hq * d, hq * d)", "_cols(m.o_proj.weight, r * hkv * d, hq * d)"),
]
M += [
 ("select_repeat_not_interleave", "specdec/spec/select.py",
  "hidden_states = hidden_states.repeat_interleave(topk, dim=0)", "hidden_states = hidden_states.repeat(topk, 1)"),
]
M += [
 ("filter_no_max_subtraction", "specdec/sampler.py",
  "x = (x - x.amax(-1, keepdim=True)) / temperature[:, None, None]", "x = x / temperature[:, None, None]"),
 ("coins_ignore_position", "specdec/random_streams.py",
  "mix_seed(mix_seed(seed, stream), position)", "mix_seed(mix_seed(seed, stream), 0)"),
 ("admit_ignores_evictable", "specdec/scheduler.py",
  "if need + pages > mem.available:", "if need + pages > mem.allocator.num_free:"),
]
M += [
 ("kv_moves_skip_last", "specdec/spec/compaction.py",
  "valid = j < accept_lens[:, None]", "valid = j < accept_lens[:, None] - 1"),
 ("branch_npb_short", "specdec/spec/layout.py",
  "npb = (last + num_steps + page_size - 1) // page_size",
  "npb = (last + num_steps - 1 + page_size - 1) // page_size"),
 ("state_commit_seq_minus", "specdec/rounds.py",
  "            new_seq = seq + accept_lens\n", "            new_seq = seq + accept_lens - 1\n"),
 ("step_ends_extend_short", "specdec/rounds.py",
  "n + shift + spec.ndt) for n in seq_lens]", "n + shift + spec.ndt - 1) for n in seq_lens]"),
 ("evict_mru", "specdec/prefix_cache/tree.py",
  "heap = [(n.last_access, n.serial, n) for n in self.nodes() if n.is_leaf and evictable(n)]",
  "heap = [(-n.last_access, n.serial, n) for n in self.nodes() if n.is_leaf and evictable(n)]"),
 ("match_overclaims", "specdec/prefix_cache/tree.py",
  "            i += n\n            if n < len(child.key):\n                break\n            node = child\n        return i",
  "            i += len(child.key) if n else 0\n            if n < len(child.key):\n                break\n            node = child\n        return min(i, len(keys))"),
 ("extend_writes_rejected_row", "specdec/spec/phases.py",
  'loc = torch.where(j < x.accept_lens[:, None], slots, 0)',
  'loc = torch.where(j <= x.accept_lens[:, None], slots, 0)'),
 ("admit_over_max_batch", "specdec/scheduler.py",
  "while self.waiting and len(self.holding()) + len(new) < self.e.max_batch:",
  "while self.waiting and len(self.holding()) + len(new) <= self.e.max_batch:"),
]
M += [
 ("fused_pad_mask_not_true", "specdec/spec/round_phase.py",
  "        mask[cols] = mask[cols] | ~real[:, None]\n", ""),
 ("fused_extend_seq_unmasked", "specdec/spec/round_phase.py",
  "torch.where(real, new_seq, SEQ_LEN_FILL), x.kv_prefix_lens,", "new_seq, x.kv_prefix_lens,"),
 ("fused_extend_accept_minus", "specdec/spec/round_phase.py",
  "torch.where(real, res.accept_lens, 0), table)",
  "torch.where(real, (res.accept_lens - 1).clamp(min=1), 0), table)"),
 ("fused_last_from_first", "specdec/spec/phases.py",
  "last = (x.accept_lens - 1).clamp(min=0)", "last = (x.accept_lens * 0).clamp(min=0)"),
 ("fused_verify_positions_unmasked", "specdec/spec/round_phase.py",
  'vx = VerifyInputs(torch.where(lane, tokens, 0), torch.where(lane, positions, 0), rows,',
  'vx = VerifyInputs(torch.where(lane, tokens, 0), positions, rows,'),
]
# 2026-11-27: mistakes in parts the first 40 left alone (TP collectives, the EAGLE head, the
# overlap scheduler's device state, the draft's carried state).
M += [
 ("tp_vocab_rows_floor", "specdec/tp/comm.py",
  "per = -(-vocab // self.world)\n        first = self.rank * per",
  "per = vocab // self.world\n        first = self.rank * per"),
 ("tp_vocab_embed_unmasked", "specdec/tp/comm.py",
  "return self.all_reduce(emb * mine[:, None].to(emb.dtype))", "return self.all_reduce(emb)"),
 ("tp_group_norm_drops_residual", "specdec/tp/comm.py",
  "        return norm(s, weight, eps, residual)\n",
  "        return norm(s, weight, eps), s\n"),
 ("eagle_concat_swapped", "specdec/model/eagle.py",
  "torch.cat([emb, fb.hidden_states.to(emb.dtype)], dim=-1)",
  "torch.cat([fb.hidden_states.to(emb.dtype), emb], dim=-1)"),
 ("eagle_hidden_drops_residual", "specdec/model/eagle.py",
  "x = reduced(self.tp, x) + residual", "x = reduced(self.tp, x)"),
 ("row_state_pending_not_committed", "specdec/overlap.py",
  "        self.pending.index_copy_(0, rows, pending)\n", ""),
 ("draft_state_scores_not_stored", "specdec/memory/req_pool.py",
  "        self.topk_p[req_pool_indices] = topk_p\n", ""),
 # The decode-step work of #34 (host1 branch): its metadata fast path, the skipped gather,
 # the greedy argmax kernel, the RoPE store inside the attention launch.
 ("decode_metadata_misses_itself", "specdec/attention/metadata.py",
  "kv_len = (fb.kv_prefix_lens + 1).to(torch.int32)", "kv_len = fb.kv_prefix_lens.to(torch.int32)"),
 ("gather_flag_from_seq_list", "specdec/overlap.py",
  "return min(seq, default=0) < 0, min(pending, default=0) < 0",
  "return min(seq, default=0) < 0, min(seq, default=0) < 0"),
 ("argmax_ties_to_last_block", "kernels/greedy.py",
  "tl.store(out_ptr + r, tl.min(tl.where(hit, idx, vocab), axis=0).to(tl.int64))",
  "tl.store(out_ptr + r, tl.max(tl.where(hit, idx, -1), axis=0).to(tl.int64))"),
 ("rope_store_skips_split_start", "kernels/attention.py",
  "if (start <= last) & (last < end):", "if (start < last) & (last < end):"),
]


def stale(root: str) -> dict[str, str]:
    """Each mutant whose text does not occur exactly once in the file it names (one that no
    longer applies measures nothing: six had gone stale through refactors)."""
    import os
    names = [m[0] for m in M]
    out = {n: "name repeats" for n in names if names.count(n) > 1}
    for name, path, old, new in M:
        with open(os.path.join(root, path)) as f:
            n = f.read().count(old)
        if n != 1 or old == new:
            out[name] = f"{path}: found {n} times" if n != 1 else "changes nothing"
    return out


if __name__ == "__main__":
    # `python bench/mutation/mutants.py`: whether every mutant still applies to this checkout.
    # A source-text check, so it lives here and in .ci/run's own stage, never in the gate: an
    # edit of a mutated line (a planted bug, say) must fail a behavioural law first.
    import os
    import sys
    bad = stale(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    print(f"{len(M)} mutants, {len(bad)} stale" + "".join(f"\n  {k}: {v}" for k, v in bad.items()))
    sys.exit(1 if bad else 0)

