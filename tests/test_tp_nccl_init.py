"""NCCL groups start complete (specdec/tp/process_groups.py init_groups): the communicator
made at init, every connection with it, one all-reduce proving them, then an ordered end.
One rank on one GPU, in a subprocess of its own (a process holds one default group), so the
single-GPU machines run the NCCL start-up too; the 2-rank endings are tests/test_tp_exit.py."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest
import torch

from harness.gate.fork_server import run_bounded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import os, socket, time
    import torch
    from specdec.tp import process_groups as pg
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    pg.init_groups(0, world=1, device_type="cuda", port=port, cuda_index=torch.cuda.current_device())
    print("runtime connect", os.environ.get("NCCL_RUNTIME_CONNECT"))
    print("ended", pg.end_groups(healthy=True), round(time.monotonic() - t0, 1))
""")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="NCCL needs a GPU")
def test_nccl_groups_start_complete_and_end():
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("NCCL_RUNTIME_CONNECT", None)
    rc, out, err = run_bounded([sys.executable, "-c", SCRIPT], 120, "the NCCL group script",
                               env, cwd=ROOT)
    assert rc == 0, err[-3000:]
    assert "runtime connect 0" in out, out
    assert "ended True" in out, out + err[-3000:]
