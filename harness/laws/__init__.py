"""The laws: what must always hold, one file per law. Each file's docstring states the law, the
observables it needs, and where its references (harness/references/) and strategy
(harness/strategies/) are; each law raises OracleFailure (common.py) naming its first
violation. harness/runners/suite.py pairs each property with the strategy it is drawn over.

- structure.py: positions, slots, tree, acceptance, compaction, padding, metadata (oracle 1)
- eager_vs_graph.py: CUDA graphs == batch-invariant eager, bit for bit (oracle 2)
- kv_content.py: committed KV == a dense reference prefill (oracle 3)
- lossless_greedy.py: speculative greedy == plain greedy, tree == chain (oracle 4)
- self_draft.py: self-draft logits == verify logits; topk 1 accepts all (oracle 5)
- eagle_draft.py: an EAGLE head's draft logits == the dense head along each node's ancestry
  (oracle 5 for the drafter that has no twin)
- distribution.py: sampled tokens follow the filtered target distribution (oracle 7)
- finish.py: output length, stop position and finish reason (oracle 8)
- overlap_equals_sync.py: overlap scheduling == synchronous (section 10)
- prefix_transparent.py: the prefix cache is transparent (section 11)
- radix_tree.py: the prefix cache's radix tree == an uncompressed map of held page paths:
  matches, insertions, references, and LRU eviction of unreferenced leaves (section 11)
- random_streams.py: the three random streams: independent, uniform, batch invariant, and
  keyed by engine seed and request id when a request names no seed (section 12)
- sampling_bounds.py: tree speculative sampling never leaves the vocabulary
- sampling_edges.py: edge coins never emit a token of filtered probability 0 (every sampler,
  the draft's noise included)
- sampling_filter.py: the engine's temperature / top-k / top-p filter == the float64 reference,
  cuts on exact boundaries and inside ties included
- long_context.py: KV content and lossless past every position-table boundary
- tp_equals_single.py: tensor parallel == one rank
- lifecycle.py: the stateful machine over add / step / abort / refuse (continuous batching)
- structure_under_churn.py: oracle 1 while batches shrink and grow across padded buckets
- liveness.py: a served engine commits tokens until its requests finish
- acceptance_path_invariant.py: per-round accept lengths are the same on every path
- acceptance_floor.py: the trained pair's accept length stays above its baseline's bound

Black-box laws, over any engine adapter (harness/adapters/), each naming in NEEDS the
observables it needs; harness/runners/engine_suite.py lists them:
- engine_lossless_greedy.py: speculative greedy == the engine's own plain greedy (tie-aware)
- engine_finish.py: length, stop position, reason, == plain continuation cut at stop or cap
- engine_self_draft.py: drafter = target accepts every draft, ties aside
- engine_sampled_distribution.py: the first two sampled tokens follow the filtered target
- engine_seeded_determinism.py: a seeded batch is reproducible across calls
- engine_support.py: what they share (margins for ties, the plain continuation)
"""
