"""The laws: what must always hold, one file per law. Each file's docstring states the law, the
observables it needs, and where its references (harness/references/) and strategy
(harness/strategies/) are; each law raises OracleFailure (common.py) naming its first
violation. harness/runners/suite.py pairs each property with the strategy it is drawn over.

- structure.py: positions, slots, tree, acceptance, compaction, padding, metadata (oracle 1)
- eager_vs_graph.py: CUDA graphs == batch-invariant eager, bit for bit (oracle 2)
- kv_content.py: committed KV == a dense reference prefill (oracle 3)
- lossless_greedy.py: speculative greedy == plain greedy, tree == chain (oracle 4)
- self_draft.py: self-draft logits == verify logits; topk 1 accepts all (oracle 5)
- distribution.py: sampled tokens follow the filtered target distribution (oracle 7)
- finish.py: output length, stop position and finish reason (oracle 8)
- overlap_equals_sync.py: overlap scheduling == synchronous (section 10)
- prefix_transparent.py: the prefix cache is transparent (section 11)
- random_streams.py: the three random streams: independent, uniform, batch invariant (section 12)
- sampling_bounds.py: tree speculative sampling never leaves the vocabulary
- sampling_edges.py: edge coins never emit a token of filtered probability 0
- long_context.py: KV content and lossless past every position-table boundary
- tp_equals_single.py: tensor parallel == one rank
- lifecycle.py: the stateful machine over add / step / abort / refuse (continuous batching)
"""
