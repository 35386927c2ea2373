"""The kernel store between xdist workers (harness/runners/triton_cache.py): a kernel one
worker compiled is found by another, from that worker's own cache directory; a store entry
is only ever a whole kernel; the first publisher wins. Shown with the cache manager's own
calls, as Triton's compiler makes them (put each file, then put_group), on any machine."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("triton")
from harness.runners import triton_cache  # noqa: E402

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
