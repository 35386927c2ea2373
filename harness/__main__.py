"""`python -m harness check|repro|zoo|mixed|bench|acceptance`: the entry; the commands are in
harness/runners/cli.py."""
from __future__ import annotations

import sys

from harness.gate import bytecode  # noqa: I001
bytecode.redirect()  # before the big imports and the processes zoo jobs start (bytecode.py)
import kernels._triton_env  # noqa: F401,E402,I001  (before anything imports triton)
from harness.gate import profiles
from harness.runners.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    profiles.load_default()  # the profile pytest would use on this machine (profiles.py)
    sys.exit(main())
