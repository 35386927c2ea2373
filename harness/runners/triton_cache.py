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
The store outlives the run (it sits beside the workers' caches), so later runs on the
machine start warm. Triton checks a kernel's key (its source, options and compiler
version) as always: the store only saves compiling what is already compiled."""
from __future__ import annotations

import json
import os
import shutil
import uuid

from triton.runtime.cache import FileCacheManager

STORE_ENV = "SPECDEC_TRITON_STORE"   # the directory of published kernels
MANAGER = "harness.runners.triton_cache:PublishingCacheManager"
_GROUP = "__grp__"


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
        if found is None and self.store is not None and self._take_published(filename):
            found = super().get_group(filename)
        return found

    def put_group(self, filename: str, group):
        path = super().put_group(filename, group)
        if self.store is not None:
            self._publish(filename, group)
        return path

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
