"""Longest tests first under `pytest -n auto` on a GPU (docs/contract.md, Tiers and profiles).

xdist hands tests out in collection order, so a long test collected late starts late and
the gate ends on it while the other workers idle (on one H100, 11 % of the gate's process
time). The order comes from measurement: each test's seconds in a profiled gate
(`SPECDEC_GATE_PROFILE=DIR pytest -n auto`, then `python -m harness gate-profile DIR
--durations harness/gate/gate_durations.json`). A test the file does not know (new, or
renamed) goes first with the longest: it may be long, and one short test early costs
nothing. Every process sorts the same collection with the same file, so xdist's workers
agree on the order. CPU runs keep the collection order (their scheduler steals work)."""
from __future__ import annotations

import json
import os

DURATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate_durations.json")


def base_id(nodeid: str) -> str:
    """A node id without the xdist group suffix a worker adds (`...@multi_gpu-...`)."""
    return nodeid.split("@", 1)[0]


def load(path: str = DURATIONS) -> dict[str, float]:
    """{test id: seconds}; empty where there is no file."""
    try:
        with open(path) as f:
            return json.load(f)["seconds"]
    except FileNotFoundError:
        return {}


def longest_first(items: list, seconds: dict[str, float]) -> None:
    """Sort `items` in place, longest measured first, unknown tests with the longest; a
    stable sort, so equal times keep the collection order."""
    if not seconds:
        return
    top = max(seconds.values())
    items.sort(key=lambda i: -seconds.get(base_id(i.nodeid), top))


def save(seconds: dict[str, float], path: str, source: str) -> None:
    """Write the durations file: {test id: seconds}, and where they were measured."""
    with open(path, "w") as f:
        json.dump({"source": source,
                   "seconds": {base_id(k): round(v, 1) for k, v in sorted(seconds.items())}},
                  f, indent=0)
        f.write("\n")
