"""Whether the gate has stopped, for any loop of the harness to ask between its steps.

The pytest gate (harness/gate/red_gate.py) writes a stop file once a run under `-x` (any
`--maxfail`) is red, and names it in STOP_ENV for its workers; a law's examples, a serving
loop's steps (Progress), a zoo subprocess or a GPU lock's wait then call `check()`, which
ends the test at once as skipped. Outside such a run (`python -m harness check`, a script)
STOP_ENV is unset and `check()` does nothing."""
from __future__ import annotations

import os

STOP_ENV = "SPECDEC_GATE_STOP"


def reason() -> str | None:
    """Why the gate stopped, once it has; None while it runs (or outside a gate)."""
    path = os.environ.get(STOP_ENV)
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return f.read().strip() or "another test failed"
    except OSError:
        return "another test failed"


def check() -> None:
    """End this test as skipped once the gate has stopped (a skip is a BaseException:
    Hypothesis neither shrinks nor retries it, it ends the test)."""
    why = reason()
    if why:
        import pytest
        pytest.skip(f"the gate stopped: {why}")
