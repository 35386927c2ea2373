"""One Hypothesis test split into parts that run side by side (docs/contract.md, Glossary:
entry): each part draws its share of the examples, and under a derandomized profile a seed
of its own, since one derandomized seed would give every part the same examples. The
black-box laws' `parts` (engine_suite.py) and the lifecycle machine (tests/test_lifecycle.py)
split this way."""
from __future__ import annotations

import zlib

from hypothesis import seed, settings


def share(examples: int, of: int) -> int:
    """Each of `of` parts' examples: together at least `examples`."""
    return -(-examples // of)


def seeded(test, key: str, k: int, of: int, profile: settings):
    """`test` (a @given test, or a state machine class) as part k of `of`: a seed of its own
    under a derandomized profile; as it is otherwise (fresh seeds per test) or unsplit."""
    if of > 1 and profile.derandomize:
        return seed(zlib.crc32(f"{key}/part{k}".encode()))(test)
    return test
