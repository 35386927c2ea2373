"""The kernel store between xdist workers (harness/gate/triton_cache.py): a kernel one
worker compiled is found by another, from that worker's own cache directory; a store entry
is only ever a whole kernel; the first publisher wins. Shown with the cache manager's own
calls, as Triton's compiler makes them (put each file, then put_group), on any machine."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("triton")
from harness.gate import triton_cache  # noqa: E402

FILES = {"k.cubin": b"\x7fELF cubin bytes", "k.ptx": b"// ptx", "k.json": b'{"name": "k"}'}


def _compile(manager, files=FILES) -> dict:
    """What triton.compile does on a miss: each file put, then the group."""
    group = {name: manager.put(data, name) for name, data in files.items()}
    manager.put_group("k.json", group)
    return group


@pytest.fixture
def worker(tmp_path, monkeypatch):
    monkeypatch.setenv(triton_cache.STORE_ENV, str(tmp_path / "published"))

    def as_worker(name: str, key: str = "KEY"):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / name))
        return triton_cache.PublishingCacheManager(key)
    return as_worker


def test_a_kernel_compiled_by_one_worker_is_found_by_another(worker):
    a = worker("worker0")
    assert a.get_group("k.json") is None
    _compile(a)
    b = worker("worker1")
    group = b.get_group("k.json")
    assert set(group) == set(FILES)
    for name, path in group.items():
        assert path.startswith(b.cache_dir + os.sep), path  # the worker's own copy
        with open(path, "rb") as f:
            assert f.read() == FILES[name]
    assert worker("worker1").get_group("k.json") == group  # now a plain hit in its own cache


def test_other_keys_and_unpublished_temporaries_are_not_found(worker, tmp_path):
    _compile(worker("worker0", key="KEY"))
    assert worker("worker1", key="OTHER").get_group("k.json") is None
    # A publisher that died mid-copy leaves a temporary directory, never a key.
    os.makedirs(tmp_path / "published" / ".tmp-1-dead")
    (tmp_path / "published" / ".tmp-1-dead" / "k.cubin").write_bytes(b"half")
    assert worker("worker2", key=".tmp-1-dead").get_group("k.json") is None


def test_the_first_publisher_wins(worker, tmp_path):
    _compile(worker("worker0"))
    _compile(worker("worker1"), {**FILES, "k.cubin": b"another build"})
    entry = tmp_path / "published" / "KEY"
    assert (entry / "k.cubin").read_bytes() == FILES["k.cubin"]
    assert json.loads((entry / "__grp__k.json").read_text())["child_paths"] == sorted(FILES)
    assert not [p for p in os.listdir(tmp_path / "published") if p.startswith(".tmp")]


def test_a_broken_store_entry_is_a_miss_not_an_error(worker, tmp_path):
    entry = tmp_path / "published" / "KEY"
    entry.mkdir(parents=True)
    (entry / "__grp__k.json").write_text(json.dumps({"child_paths": ["k.cubin"]}))
    assert worker("worker0").get_group("k.json") is None  # its child is missing


def _claim_path(tmp_path, key: str = "KEY"):
    return tmp_path / "published" / f"{key}.claim"


def test_a_worker_waits_for_the_claimers_compile_instead_of_compiling(worker, tmp_path,
                                                                       monkeypatch):
    """The key claimed by a live process: the next worker to miss takes the kernel once it
    is published (here 0.3 s later, from another thread standing in for that process)."""
    import threading
    import time
    monkeypatch.setattr(triton_cache, "CLAIM_WAIT_S", 20.0)
    publisher = worker("worker0")
    _claim_path(tmp_path).parent.mkdir(parents=True)
    _claim_path(tmp_path).write_text(str(os.getpid()))
    waiter = worker("worker1")
    timer = threading.Timer(0.3, lambda: _compile(publisher))
    t0 = time.monotonic()
    timer.start()
    group = waiter.get_group("k.json")
    timer.join()
    assert group is not None and set(group) == set(FILES)  # taken, not compiled
    assert time.monotonic() - t0 >= 0.3


def test_a_dead_claimers_key_is_compiled_and_its_claim_dropped(worker, tmp_path):
    import subprocess
    import sys
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _claim_path(tmp_path).parent.mkdir(parents=True)
    _claim_path(tmp_path).write_text(str(dead.pid))
    assert worker("worker0").get_group("k.json") is None  # compile it here
    assert not _claim_path(tmp_path).exists()


def test_a_claim_ends_with_its_publish_or_the_next_miss(worker, tmp_path):
    """A miss claims the key; publishing ends the claim; a compile that raised publishes
    nothing, and the claimer's next miss ends that claim (no one waits on it for long)."""
    a = worker("worker0")
    assert a.get_group("k.json") is None and _claim_path(tmp_path).exists()
    _compile(a)
    assert not _claim_path(tmp_path).exists()
    b = worker("worker1", key="RAISES")
    assert b.get_group("k.json") is None and _claim_path(tmp_path, "RAISES").exists()
    assert worker("worker1", key="NEXT").get_group("k.json") is None
    assert not _claim_path(tmp_path, "RAISES").exists()
    assert _claim_path(tmp_path, "NEXT").exists()
    triton_cache._end_claim()
