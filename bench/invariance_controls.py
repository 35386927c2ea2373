"""How often the gate catches each planted family of request_invariance's negative controls
(tests/test_request_invariance.py): per family, N runs of the new law's pytest entries under
the default Hypothesis profile, each from a fresh seed, and N runs of every other white-box
law's entries (the laws the gate had before), each run stopping at its first failure.

usage: PYTHONPATH=. python bench/invariance_controls.py [--runs N] [--old-runs M] [--device D]
Prints one line per family: caught in k of N runs (new law), k of M (old laws), seconds."""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import time

from hypothesis import settings

from harness.gate import profiles
from harness.runners.suite import ALL_PROPERTIES, runnable, suite
from harness.strategies.runs import default_device

HERE = os.path.dirname(os.path.abspath(__file__))


def _controls():
    path = os.path.join(HERE, "..", "tests", "test_request_invariance.py")
    spec = importlib.util.spec_from_file_location("invariance_controls_tests", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"offsets by subset position (overlap)": mod.offsets_by_subset_position,
            "draft coins by subset position (probabilistic drafting)":
                mod.draft_coins_by_subset_position,
            "pending token dropped at retraction": mod.retraction_drops_the_pending_token}


class Patch:
    def __init__(self):
        self.undo = []

    def setattr(self, obj, name, value):
        self.undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def restore(self):
        for obj, name, value in reversed(self.undo):
            setattr(obj, name, value)


def caught(entries, device: str) -> str | None:
    """The first entry that fails, under the default profile from a fresh seed; None."""
    profile = settings(settings.default, derandomize=False, database=None)
    for entry in entries:
        if not runnable(entry.axes, device):
            continue
        test = entry.law(device, lambda name, cfg: ALL_PROPERTIES[name](cfg, device), profile)
        random.seed(os.urandom(8))
        try:
            test()
        except BaseException as exc:  # noqa: BLE001 - a failure of any kind is a catch
            if isinstance(exc, KeyboardInterrupt):
                raise
            return f"{entry.id}: {type(exc).__name__}"
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--old-runs", type=int, default=2)
    ap.add_argument("--device", default=default_device())
    args = ap.parse_args()
    profiles.load_default()  # the profile pytest would run (dev on CPU, ci under CI=true)
    entries = suite()
    new = [e for e in entries if e.prop == "request_invariance"]
    old = [e for e in entries if e.prop != "request_invariance"]
    print(f"profile {settings.default}, device {args.device}")
    for family, plant in _controls().items():
        for name, group, runs in (("new law", new, args.runs), ("old laws", old, args.old_runs)):
            t0, hits, firsts = time.perf_counter(), 0, []
            for _ in range(runs):
                patch = Patch()
                plant(patch)
                try:
                    first = caught(group, args.device)
                finally:
                    patch.restore()
                hits += first is not None
                firsts.append(first)
            print(f"{family:<58} {name:<9} caught in {hits} of {runs} runs "
                  f"({time.perf_counter() - t0:.0f} s); first: {firsts}", flush=True)


if __name__ == "__main__":
    main()
