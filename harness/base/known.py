"""Whether the laws draw the cases of recorded findings (docs/findings/): by default they
draw around them, so a gate stays green on a release with a known bug until upstream
changes; `--with-known` (SPECDEC_KNOWN_FINDINGS=include) draws them too."""
from __future__ import annotations

import os


def include_known() -> bool:
    return os.environ.get("SPECDEC_KNOWN_FINDINGS", "") == "include"
