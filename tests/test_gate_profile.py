"""The gate profiler (harness/gate/gate_profile.py): every phase it names exists where it
says (a rename in the engine must not silently drop a phase from the table), and its clock
is exclusive, so a test's phases sum to its wall time."""
from __future__ import annotations

import importlib
import json
import os
import time

import pytest

from harness.gate import gate_profile


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
    # The nested phase sleeps far longer than the outer one's own share, so "exclusive" stays
    # decidable on a loaded machine: an outer phase that counted it would hold >= 0.35 s.
    inner = gate_profile._timed("graph capture", lambda: time.sleep(0.3))
    outer = gate_profile._timed("engine build", lambda: (time.sleep(0.05), inner()))
    t0 = time.monotonic()
    gate_profile.test_started("t::a")
    outer()
    time.sleep(0.02)
    gate_profile.test_ended()
    wall = time.monotonic() - t0
    got = clock.tests["t::a"]
    assert set(got) == {"examples", "engine build", "graph capture"}
    assert got["graph capture"] >= 0.3 and 0.05 <= got["engine build"] < 0.3, got
    assert got["examples"] >= 0.02, got
    assert 0 <= wall - sum(got.values()) < 0.25, (got, wall)  # the phases tile the test
    monkeypatch.setenv(gate_profile.ENV, str(tmp_path))
    gate_profile.write("gw0")
    rec = json.loads((tmp_path / "gw0.json").read_text())
    assert rec["tests"] == {"t::a": got}
    text = gate_profile.table(str(tmp_path))
    assert "graph capture" in text and "idle" in text and "t::a" in text, text


def test_table_names_an_empty_directory(tmp_path):
    with pytest.raises(ValueError, match="no gate profile records"):
        gate_profile.table(str(tmp_path))


def test_gpu_lock_holds_are_recorded_and_tabled(tmp_path, monkeypatch):
    """Each hold of the TP engines' GPU locks is one line the profile sums per GPU against
    the run's wall; a lock never taken records nothing."""
    from specdec.tp import gpu_lock
    monkeypatch.setenv(gpu_lock.ENV, str(tmp_path / "locks"))
    monkeypatch.setenv(gpu_lock.HOLDS_ENV, str(tmp_path / gate_profile.HOLDS))
    locks = gpu_lock.GPULocks([1, 0])
    locks.acquire(5)
    time.sleep(0.05)
    locks.release()
    locks.release()  # released twice: one hold
    gpu_lock.GPULocks([0]).release()  # never taken
    holds = [json.loads(line) for line in (tmp_path / gate_profile.HOLDS).read_text().splitlines()]
    assert len(holds) == 1 and holds[0]["gpus"] == [0, 1]
    assert holds[0]["end"] - holds[0]["start"] >= 0.05
    (tmp_path / "gw0.json").write_text(json.dumps({"worker": "gw0", "wall": 1.0, "tests": {}}))
    text = gate_profile.table(str(tmp_path))
    pct = 100 * (holds[0]["end"] - holds[0]["start"]) / 1.0  # the hold as slept, under load
    line = f"held 0 s ({pct:.0f}% of the 1 s run)"
    assert f"GPU locks: 1 holds; GPU 0 {line}, GPU 1 {line}" in text, text


CHILD = """
from harness.gate import gate_profile
from specdec.tp.gpu_lock import GPULocks
with gate_profile.inside_parent():
    locks = GPULocks([0])
    locks.acquire(30)
    locks.release()
"""


@pytest.mark.parametrize("named", [True, False])
def test_a_subprocess_lock_wait_is_a_wait_of_its_test(tmp_path, monkeypatch, named):
    """A test's subprocess started with child_env (a zoo detection process) times its phases
    under the test: its wait for a GPU lock the test's neighbour holds is a lock wait of the
    test, not the test's own time. Control: started without child_env, it records nothing
    and the whole wait stays the test's own time."""
    import subprocess
    import sys
    from specdec.tp import gpu_lock
    monkeypatch.setenv(gate_profile.ENV, str(tmp_path / "prof"))
    monkeypatch.setenv(gpu_lock.ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gate_profile, "CLOCK", gate_profile._Clock())
    neighbour = gpu_lock.GPULocks([0])
    neighbour.acquire(5)
    gate_profile.test_started("t::zoo")
    env = gate_profile.child_env(dict(os.environ)) if named else dict(os.environ)
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env)
    queue = tmp_path / "locks" / gpu_lock.QUEUE
    end = time.monotonic() + 60
    while not (queue.exists() and any(queue.iterdir())):  # the child is waiting for GPU 0
        assert child.poll() is None and time.monotonic() < end, "the child never waited"
        time.sleep(0.05)
    time.sleep(0.8)
    neighbour.release()
    assert child.wait(60) == 0
    gate_profile.test_ended()
    gate_profile.write("gw0")
    own = gate_profile.seconds_per_test(str(tmp_path / "prof"))["t::zoo"]
    wall = gate_profile.CLOCK.tests["t::zoo"]["examples"]
    text = gate_profile.table(str(tmp_path / "prof"))
    if named:
        assert own < wall - 0.5, (own, wall, text)
        assert "in its subprocess: gpu lock wait" in text, text
        assert "tests with a timed subprocess" in text and "t::zoo" in text.split("timed")[-1]
        assert "1 processes" in text, text  # the subprocess's record is inside its test
    else:
        assert own == pytest.approx(wall)
        assert "timed subprocess" not in text, text
