"""Whether the laws draw the cases of recorded findings (docs/findings/): by default they
draw around them, so a gate stays green on a release with a known bug until upstream
changes; `--with-known` (SPECDEC_KNOWN_FINDINGS=include) draws them too."""
from __future__ import annotations

import os


def include_known() -> bool:
    return os.environ.get("SPECDEC_KNOWN_FINDINGS", "") == "include"


def drawn_around(accepts: dict, *, law: str | None = None, finding: str | None = None) -> list:
    """The recorded findings of this release (an adapter's accepts["known"]) that the laws
    draw around now: those of `law`, or the one named `finding`; none with --with-known."""
    if include_known():
        return []
    return [f for f in accepts.get("known", ())
            if (law is None or law in f["laws"]) and (finding is None or f["id"] == finding)]
