"""The mutation campaign (bench/mutation/) stays a measurement of this engine: each planted
mistake's text occurs exactly once in the file it names, so `bench/mutation/run.sh` plants
every one of them (one that no longer applies measures nothing, and six had gone stale
through refactors before this test). Inside the campaign's own copy (SPECDEC_MUTANT, set by
run.sh) the planted mutant is left out: it has been applied there."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "mutation"))
from mutants import M  # noqa: E402


def test_every_mutant_applies_once():
    names = [m[0] for m in M]
    assert len(names) == len(set(names)), "mutant names repeat"
    stale = {}
    planted = os.environ.get("SPECDEC_MUTANT")
    for name, path, old, new in M:
        if name == planted:
            continue
        with open(os.path.join(ROOT, path)) as f:
            n = f.read().count(old)
        if n != 1 or old == new:
            stale[name] = f"{path}: found {n} times" if n != 1 else "changes nothing"
    assert not stale, f"mutants that no longer apply: {stale}"
