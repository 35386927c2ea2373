"""The gate profiler (harness/runners/gate_profile.py): every phase it names exists where it
says (a rename in the engine must not silently drop a phase from the table), and its clock
is exclusive, so a test's phases sum to its wall time."""
from __future__ import annotations

import importlib
import json
import time

import pytest

from harness.runners import gate_profile


@pytest.mark.parametrize("label,module,attr", gate_profile.PHASES, ids=lambda v: str(v))
def test_every_phase_names_a_function(label, module, attr):
    try:
        owner = importlib.import_module(module)
    except ImportError:
        pytest.skip(f"{module} is not installed")
    cls_name, name = attr.split(".")
    assert callable(getattr(getattr(owner, cls_name), name)), f"{label}: {module}.{attr}"


def test_clock_is_exclusive_and_sums_to_wall(tmp_path, monkeypatch):
    clock = gate_profile._Clock()
    monkeypatch.setattr(gate_profile, "CLOCK", clock)
    inner = gate_profile._timed("graph capture", lambda: time.sleep(0.05))
    outer = gate_profile._timed("engine build", lambda: (time.sleep(0.05), inner()))
    t0 = time.monotonic()
    gate_profile.test_started("t::a")
    outer()
    time.sleep(0.02)
    gate_profile.test_ended()
    wall = time.monotonic() - t0
    got = clock.tests["t::a"]
    assert set(got) == {"examples", "engine build", "graph capture"}
    assert got["graph capture"] >= 0.05 and 0.05 <= got["engine build"] < 0.1, got
    assert got["examples"] >= 0.02, got
    assert abs(sum(got.values()) - wall) < 0.01, (got, wall)
    monkeypatch.setenv(gate_profile.ENV, str(tmp_path))
    gate_profile.write("gw0")
    rec = json.loads((tmp_path / "gw0.json").read_text())
    assert rec["tests"] == {"t::a": got}
    text = gate_profile.table(str(tmp_path))
    assert "graph capture" in text and "idle" in text and "t::a" in text, text


def test_table_names_an_empty_directory(tmp_path):
    with pytest.raises(ValueError, match="no gate profile records"):
        gate_profile.table(str(tmp_path))
