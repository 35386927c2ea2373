"""The correctness harness, laid out by role (docs/structures.md), from the bottom up; each
layer imports only those below it (tests/test_layers.py): base/ (OracleFailure, the
liveness watch), references/ (independent re-derivations), adapters/ (the engines and
kernels the laws drive, foreign releases included, one registry), strategies/ (what is
drawn), laws/ (what must always hold), gate/ (the pytest plugin and its GPU plumbing),
runners/ (what runs the laws: pytest modules, `python -m harness`)."""
