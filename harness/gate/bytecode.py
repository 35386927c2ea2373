"""Bytecode for the processes a test run starts, where the environment forbids writing it.

With PYTHONDONTWRITEBYTECODE set (common in container images, and on our GPU hosts) every
Python process compiles every module it imports from source: on one H100, 1052 modules and
2.5 s of a single test's process (cProfile, 2026-11-26). A gate starts hundreds of
processes: 16 xdist workers per GPU, each tensor-parallel engine's worker ranks, each zoo
fault's process, each exit-path script. So the processes a test run starts write their
bytecode under a private prefix (PYTHONPYCACHEPREFIX, in the temporary directory): compiled
once, read by every later process, and nothing written beside the sources, which is what
the variable is there to prevent. A prefix the user set is kept; SPECDEC_NO_PYCACHE=1 keeps
the environment as it is."""
from __future__ import annotations

import os
import sys
import tempfile

OPT_OUT = "SPECDEC_NO_PYCACHE"


def private_prefix() -> str:
    return os.path.join(tempfile.gettempdir(), f"specdec-pycache-{os.getuid()}")


def redirect(environ=os.environ, this_process: bool = True) -> bool:
    """Where PYTHONDONTWRITEBYTECODE forbids writing bytecode beside the sources, write it
    under a private prefix: in the processes started from here on (their environment) and,
    `this_process`, in this one's later imports. Whether it did."""
    if not environ.get("PYTHONDONTWRITEBYTECODE") or environ.get(OPT_OUT) == "1":
        return False
    prefix = environ.setdefault("PYTHONPYCACHEPREFIX", private_prefix())
    del environ["PYTHONDONTWRITEBYTECODE"]
    if this_process:
        sys.pycache_prefix = sys.pycache_prefix or prefix
        sys.dont_write_bytecode = False
    return True
