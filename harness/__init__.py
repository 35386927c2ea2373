"""The correctness harness, laid out by role (docs/structures.md): laws/ (what must always
hold), references/ (independent re-derivations), strategies/ (what is drawn), runners/ (what
runs the laws: pytest, `python -m harness`), adapters/ (the engines the laws drive)."""
