"""Independent re-derivations the laws compare against, written from the contract
(docs/contract.md) without calling the code under test's bookkeeping: dense.py
(dense prefill, greedy), layout.py (positions and slots), tree.py (verify tree, acceptance,
compaction), ties.py (tie-aware greedy comparison), acceptance_ties.py (near-ties behind a
round's accept length)."""
