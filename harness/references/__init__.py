"""Independent re-derivations the laws compare against, written from the conventions
(shared/spec/conventions.md) without calling the code under test's bookkeeping: dense.py
(dense prefill, greedy), layout.py (positions and slots), tree.py (verify tree, acceptance,
compaction), ties.py (tie-aware greedy comparison)."""
