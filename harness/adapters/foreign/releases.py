"""Every published release of a foreign engine since its first speculative kernel (the adapter
class's FIRST), oldest first, as the package index lists them: what `harness sweep --versions
all` runs. Pre-releases and yanked files are left out (pip's own listing); a release the
adapter cannot serve still gets its column, with the reason."""
from __future__ import annotations

import re
import subprocess
import sys


def index_versions(dist: str) -> list[str]:
    """The index's releases of `dist` (`pip index versions`), newest first; ValueError naming
    the package when the index cannot be read."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", dist,
                           "--disable-pip-version-check"], capture_output=True, text=True)
    found = re.search(r"Available versions:\s*(.+)", done.stdout)
    if done.returncode or not found:
        raise ValueError(f"{dist}: the package index gave no release list "
                         f"({(done.stderr or done.stdout).strip().splitlines()[-1:]})")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def since_first(versions: list[str], first: str) -> list[str]:
    """`versions` at or after `first`, final releases only (post releases included), oldest
    first."""
    from packaging.version import Version
    floor = Version(first)
    keep = [v for v in versions if Version(v) >= floor and not Version(v).is_prerelease]
    return sorted(set(keep), key=Version)


def every_release(adapter_cls) -> list[str]:
    return since_first(index_versions(adapter_cls.DIST), adapter_cls.FIRST)


def nearest_older(version: str, candidates: list[str]) -> str | None:
    """The newest of `candidates` at or below `version` (the lock a release without its own
    starts from), else the oldest candidate, else None."""
    from packaging.version import InvalidVersion, Version
    try:
        here = Version(version)
    except InvalidVersion:
        return None
    ordered = sorted(candidates, key=Version)
    older = [c for c in ordered if Version(c) <= here]
    return older[-1] if older else (ordered[0] if ordered else None)
