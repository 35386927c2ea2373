"""A zoo subprocess (one per fault on a GPU) that hangs is stopped at its limit and named,
with the stacks of where it hung, instead of holding `pytest -n auto` or `harness zoo`
forever (harness/runners/zoo.py)."""
from __future__ import annotations

import sys
import time

import pytest

from harness.gate.fork_server import run_bounded

HANG = "import time\ndef wait_here():\n    time.sleep(60)\nwait_here()\n"


def test_a_hung_subprocess_is_stopped_with_its_stacks():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        run_bounded([sys.executable, "-X", "faulthandler", "-c", HANG], 2, "the sleeper")
    assert time.monotonic() - t0 < 20
    message = str(info.value)
    assert "the sleeper still running after 2 s" in message
    assert "wait_here" in message, message  # faulthandler's dump: where it hung


def test_a_subprocess_that_ends_is_returned_whole():
    rc, out, err = run_bounded([sys.executable, "-c", "print('done'); raise SystemExit(3)"],
                               30, "the quick one")
    assert (rc, out.strip(), err) == (3, "done", "")
