"""**Base**: what every layer of the harness raises and watches with, below all of them:
`OracleFailure` (failure.py), the failing check of a law, and `Progress` (liveness.py), the
stall watch every serving loop steps through."""
