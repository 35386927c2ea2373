"""Compiled Triton kernels shared between xdist workers, without a shared cache directory
(docs/contract.md, Tiers and profiles).

Each worker keeps a Triton cache of its own (TRITON_CACHE_DIR; a cache that several
processes compile into at once has produced silent NaNs upstream), so by itself every
worker compiles every kernel it meets: on 2 GPUs with 32 workers the gate spent a quarter
of its process time compiling the same kernels again. This cache manager (Triton's
TRITON_CACHE_MANAGER hook) adds a store of finished kernels beside the workers' caches:
- a worker that compiled a kernel publishes it whole: its files are copied into a fresh
  temporary directory, which is then renamed to the kernel's key (one atomic rename; if
  another worker published that key first, the copy is dropped). Nothing in the store is
  ever written in place, so no reader sees a kernel half written;
- a worker that misses in its own cache looks in the store, and on a hit copies the
  kernel into its own cache (through Triton's own atomic puts) and loads it from there.
- a worker that misses in the store too claims the key before it compiles (a file made with
  O_EXCL beside the store, holding its pid). A worker that finds the key claimed waits for
  the kernel to be published and takes it, instead of compiling it a second time (workers
  start on the same tests at once, and met the same kernels together); it compiles after
  all if the claimer dies or CLAIM_WAIT_S pass. A claim ends with its publish, or with the
  claimer's next miss (a compile that raised publishes nothing).
The store outlives the run (it sits beside the workers' caches), so later runs on the
machine start warm. Triton checks a kernel's key (its source, options and compiler
version) as always: the store only saves compiling what is already compiled."""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid

from triton.runtime.cache import FileCacheManager

from specdec.tp.gpu_lock import pid_alive

STORE_ENV = "SPECDEC_TRITON_STORE"   # the directory of published kernels
MANAGER = "harness.gate.triton_cache:PublishingCacheManager"
_GROUP = "__grp__"
CLAIM_WAIT_S = 120.0  # the longest a worker waits for another's compile of the same kernel
_claimed: list[str] = []  # this process's open claim (at most one: compiles do not nest)


def configure(base: str) -> None:
    """Switch the manager on for this process and the processes it starts: the store is
    <base>/published (base: the directory holding the workers' own caches)."""
    os.environ.setdefault(STORE_ENV, os.path.join(base, "published"))
    os.environ["TRITON_CACHE_MANAGER"] = MANAGER


class PublishingCacheManager(FileCacheManager):
    """Triton's file cache in this worker's own directory, plus the store of published
    kernels (module docstring). Dumps and overrides behave as Triton's own."""

    def __init__(self, key, override=False, dump=False):
        super().__init__(key, override=override, dump=dump)
        store = os.environ.get(STORE_ENV)
        self.store = (os.path.join(store, self.key)
                      if store and not override and not dump else None)

    def get_group(self, filename: str):
        found = super().get_group(filename)
        if found is not None or self.store is None:
            return found
        _end_claim()  # a compile of ours that raised: its claim ends here
        if self._take_published(filename) or (not self._claim() and self._await(filename)):
            return super().get_group(filename)
        return None  # ours to compile (claimed), or the claimer gone: compile

    def put_group(self, filename: str, group):
        path = super().put_group(filename, group)
        if self.store is not None:
            self._publish(filename, group)
            _end_claim()
        return path

    def _claim(self) -> bool:
        """Claim the key for this process's compile; False if another process holds it."""
        try:
            os.makedirs(os.path.dirname(self.store), exist_ok=True)
            fd = os.open(self.store + ".claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        except OSError:
            return True  # no claim possible: compile, as without a store
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        _claimed.append(self.store + ".claim")
        return True

    def _await(self, filename: str) -> bool:
        """Wait for the claimer to publish the kernel, then take it; False (compile it here)
        if the claimer is gone or CLAIM_WAIT_S pass."""
        deadline = time.monotonic() + CLAIM_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if self._take_published(filename):
                return True
            if not _claimer_alive(self.store + ".claim"):
                _drop_stale(self.store + ".claim")
                return self._take_published(filename)
        return False

    def _take_published(self, filename: str) -> bool:
        """Copy the published kernel into this worker's cache; whether there was one."""
        grp = os.path.join(self.store, _GROUP + filename)
        try:
            with open(grp) as f:
                children = json.load(f)["child_paths"]
            group = {}
            for child in children:
                with open(os.path.join(self.store, child), "rb") as f:
                    group[child] = self.put(f.read(), child)
        except (OSError, KeyError, ValueError):  # not published, or published another way
            return False
        super().put_group(filename, group)
        return True

    def _publish(self, filename: str, group) -> None:
        if os.path.isdir(self.store):
            return
        parent = os.path.dirname(self.store)
        tmp = os.path.join(parent, f".tmp-{os.getpid()}-{uuid.uuid4().hex}")
        try:
            os.makedirs(tmp)
            for child, path in group.items():
                shutil.copyfile(path, os.path.join(tmp, child))
            with open(os.path.join(tmp, _GROUP + filename), "w") as f:
                json.dump({"child_paths": sorted(group)}, f)
            os.rename(tmp, self.store)  # atomic; fails if another worker published first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)


def _end_claim() -> None:
    while _claimed:
        try:
            os.unlink(_claimed.pop())
        except OSError:
            pass


def _drop_stale(claim: str) -> None:
    """A claim whose process died (a crashed run's, the store outliving it) goes, or every
    later miss of its key would stop to look at it."""
    try:
        os.unlink(claim)
    except OSError:
        pass


def _claimer_alive(claim: str) -> bool:
    """Whether the claim still stands, is younger than CLAIM_WAIT_S, and its process lives."""
    try:
        if time.time() - os.stat(claim).st_mtime > CLAIM_WAIT_S:
            return False  # a pid reused since would pass for its claimer
        with open(claim) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False  # ended (published or given up) or unreadable
    return pid <= 0 or pid_alive(pid)  # pid 0: being written, its process is alive
