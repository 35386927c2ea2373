"""Longest tests first on a GPU (harness/gate/gate_order.py): the order comes from a
profiled gate's per-test seconds, written by `harness gate-profile DIR --durations FILE`;
unknown tests go first, equal ones keep the collection order, a worker's group suffix does
not hide a test, a test's waits for the GPU locks are not its own time, and without a file
nothing moves. The committed file names real tests."""
from __future__ import annotations

import json
import subprocess
import sys

from harness.gate import gate_order


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def _ids(items):
    return [i.nodeid for i in items]


def test_longest_first_unknown_with_the_longest_and_stable():
    seconds = {"t.py::short": 1.0, "t.py::long": 30.0, "t.py::mid": 5.0, "t.py::mid2": 5.0,
               "t.py::tp": 20.0}
    items = [_Item(n) for n in ("t.py::short", "t.py::mid", "t.py::new", "t.py::long",
                                "t.py::mid2", "t.py::tp@multi_gpu-t-tp")]
    gate_order.longest_first(items, seconds)
    assert _ids(items) == ["t.py::new", "t.py::long", "t.py::tp@multi_gpu-t-tp", "t.py::mid",
                           "t.py::mid2", "t.py::short"]
    unsorted = [_Item(n) for n in ("b", "a")]
    gate_order.longest_first(unsorted, {})  # no measurements: the collection order
    assert _ids(unsorted) == ["b", "a"]


def test_gate_profile_writes_the_durations_it_orders_by(tmp_path):
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "gw0.json").write_text(json.dumps({"worker": "gw0", "wall": 9.0, "tests": {
        "t.py::a": {"examples": 2.0, "graph capture": 1.0, "gpu lock wait": 30.0},
        "t.py::b@multi_gpu-t-b": {"examples": 4.0}}}))
    out = tmp_path / "durations.json"
    res = subprocess.run([sys.executable, "-m", "harness", "gate-profile", str(prof),
                          "--durations", str(out), "--source", "here"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert gate_order.load(str(out)) == {"t.py::a": 3.0, "t.py::b": 4.0}
    assert json.loads(out.read_text())["source"] == "here"
    assert gate_order.load(str(tmp_path / "missing.json")) == {}


def test_committed_durations_name_collected_files():
    """A file of stale ids orders nothing: every id's module exists in this checkout."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    seconds = gate_order.load()
    assert len(seconds) > 100
    missing = {k.split("::")[0] for k in seconds} - {
        p for p in {k.split("::")[0] for k in seconds} if os.path.exists(os.path.join(root, p))}
    assert not missing, missing
