"""xdist on GPUs (docs/contract.md, Tiers and profiles): one GPU per worker, a Triton cache
per worker, how many workers `-n auto` starts, and where the tests that need several GPUs
run."""
from __future__ import annotations

import contextlib
import os
import time

import pytest


def worker_index() -> int | None:
    """gw3 -> 3; None outside an xdist worker."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") else None


def cache_base() -> str:
    """The Triton cache directory this process was given (Triton's default if none): the
    parent of the per-worker caches and of the store of published kernels."""
    return os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))


def pin_worker(idx: int) -> None:
    """Round robin over the GPUs, and a Triton cache of the worker's own (a shared cache under
    concurrent compiles has produced silent NaNs upstream), with finished kernels passed
    between workers through a store (harness/gate/triton_cache.py): compiled once, not
    once per worker."""
    base = cache_base()
    os.environ["TRITON_CACHE_DIR"] = os.path.join(base, f"worker{idx}")
    import torch
    if torch.cuda.is_available():
        from harness.gate import triton_cache
        triton_cache.configure(base)
        torch.cuda.set_device(idx % torch.cuda.device_count())


def auto_num_workers() -> int:
    import torch
    cpus = os.cpu_count() or 1
    if torch.cuda.is_available():
        # Workers are host-bound (tiny models: kernel launches, Python), so one per CPU core,
        # up to 16 per GPU (a CUDA context each, ~600 MiB). Measured, the 1-GPU gate on one
        # H100 of a 32-core host, both runs at once (bench/results/gate-workers-h100x2-
        # 2026-11-26.txt): 16 workers 258 s, 8 workers not done at 380 s.
        gpus = torch.cuda.device_count()
        return max(gpus, min(cpus, 16 * gpus))
    return cpus


# -- tests that need several GPUs, under `pytest -n auto` ------------------------------------
# On a host with G >= 2 GPUs the tests marked multi_gpu (TP laws, TP zoo cases, the NCCL
# endings) go first in the collection, in xdist groups (BINS_PER_GPU bins per GPU, balanced
# over their measured seconds): each bin's tests run on one worker, one after another, and
# the bins start at once on distinct workers. Across processes (those workers, zoo
# subprocesses, another pytest), rank 0 of a TP engine holds a lock per GPU of its group
# while the engine is in use (specdec/tp/gpu_lock.py, SPECDEC_TP_GPU_LOCKS), so the engines
# still take the GPUs one at a time while everything else those tests do (subprocess start-up, imports, single-GPU
# examples, model builds) runs side by side. The controller schedules with xdist's
# LoadGroupScheduling (tests without a group are spread as under plain `load`), the groups
# read from a file each worker writes after its collection (node id -> group), so
# `pytest -n auto` stays the one command. Not through the node ids: `--dist loadgroup`
# appends the group to `item._nodeid`, which pytest 9.2 no longer reads (a node's id lives
# in `_id`), so on pytest 9.2 the tests were silently spread (tests/test_xdist_multi_gpu.py).
# With fewer than 2 GPUs, or on CPU, none of this happens.
MULTI_GPU_GROUP = "multi_gpu"
# controller -> workers: the folder where each worker writes its groups (unset: no grouping)
_GROUPING_ENV = "SPECDEC_XDIST_MULTI_GPU_GROUPS"


def multi_gpu_host(gpus: int | None = None) -> bool:
    return _gpu_count(gpus) >= 2


def use_gpu_locks(gpus: int | None = None) -> bool:
    """On a multi-GPU host, a GPU lock directory for the TP engines of this process and those
    it starts (specdec/tp/gpu_lock.py); whether the host has several GPUs."""
    if not multi_gpu_host(gpus):
        return False
    import tempfile
    os.environ.setdefault("SPECDEC_TP_GPU_LOCKS",
                          os.path.join(tempfile.gettempdir(), f"specdec-gpu-locks-{os.getuid()}"))
    return True


TEST_BUDGET_S = 60.0  # the gate's bound on one test (docs/contract.md, Tiers)


@contextlib.contextmanager
def test_deadline(budget: float = TEST_BUDGET_S):
    """While a test runs on a host with GPU locks: its deadline (now + budget) in the
    environment, for the GPU locks to serve the TP engines of this process and of those it
    starts earliest deadline first (specdec/tp/gpu_lock.py): a test that started sooner goes
    first, instead of every test taking turns per example and all finishing late."""
    from specdec.tp import gpu_lock
    if not os.environ.get(gpu_lock.ENV):
        yield
        return
    before = os.environ.get(gpu_lock.DEADLINE_ENV)
    os.environ[gpu_lock.DEADLINE_ENV] = repr(time.time() + budget)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(gpu_lock.DEADLINE_ENV, None)
        else:
            os.environ[gpu_lock.DEADLINE_ENV] = before


def configure_multi_gpu(config, gpus: int | None = None) -> None:
    """Controller and workers alike: a GPU lock directory for TP engines, and (controller,
    `-n` with the default `load`) the grouping switched on for the workers it starts."""
    if not use_gpu_locks(gpus):
        return
    if worker_index() is None and getattr(config.option, "dist", "no") == "load":
        import shutil
        import tempfile
        folder = tempfile.mkdtemp(prefix="specdec-xdist-groups-")
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        os.environ[_GROUPING_ENV] = folder  # inherited by the workers xdist spawns next


SPREAD_ENV = "SPECDEC_XDIST_MULTI_GPU"
GROUPINGS = ("bins", "function", "one", "spread")  # SPREAD_ENV's values; "bins" the default
# How many bins per GPU. Every bin's tests take the GPU locks in turn with the other bins',
# so more bins are shorter sequences but more workers waiting on the locks. On 2 H100s
# (bench/results/gate-profile-h100x2-2026-11-26-*.log): a group per test function (10) left
# 100 s of TP zoo cases on one worker, the critical path (2105e58); 13 bins of at most 40 s
# each had 309 s of lock waits against 207 s (0816e27); with 8 bins the gate took 107 s
# and workers waited 100 s on the locks in all (b653b48, bytecode cached: bytecode.py).
BINS_PER_GPU = 4
UNKNOWN_S = 45.0  # a test without a measurement counts as this long


def grouping() -> str:
    mode = os.environ.get(SPREAD_ENV, "bins")
    if mode not in GROUPINGS:
        raise pytest.UsageError(f"{SPREAD_ENV}={mode!r}: expected one of {', '.join(GROUPINGS)}")
    return mode


def bins(items, seconds: dict[str, float], count: int) -> dict[str, str]:
    """{node id: its bin's group}: the tests, longest measured first, each into the bin with
    the fewest seconds so far (longest-processing-time), `count` bins at most, none empty.
    The same collection and file give every xdist process the same bins."""
    from harness.gate.gate_order import base_id
    sized = sorted(((seconds.get(base_id(i.nodeid), UNKNOWN_S), n, i.nodeid)
                    for n, i in enumerate(items)), key=lambda t: (-t[0], t[1]))
    loads = [0.0] * max(1, min(count, len(items)))
    out = {}
    for sec, _, nodeid in sized:
        k = min(range(len(loads)), key=lambda b: (loads[b], b))
        loads[k] += sec
        out[nodeid] = f"{MULTI_GPU_GROUP}-bin{k}"
    return out


def group_of(item, mode: str) -> str | None:
    """The xdist group of a multi_gpu test outside "bins" (the default, drawn up by `bins`
    over them all): one per test function ("function"), one for them all ("one": a single
    worker runs every multi-GPU test in turn; 2 H100s, 2026-11-26: the gate's critical
    path), none ("spread": every test a unit of its own, so up to one worker per test
    blocks on the GPU locks)."""
    if mode == "spread":
        return None
    if mode == "one":
        return MULTI_GPU_GROUP
    module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    function = getattr(item, "originalname", None) or item.nodeid.split("::")[-1].split("[")[0]
    return f"{MULTI_GPU_GROUP}-{module}-{function}"


def group_multi_gpu(config, items, gpus: int | None = None) -> int:
    """Put the multi_gpu tests first in the collection (LoadGroupScheduling hands the first
    units to distinct workers: the long poles start at once), each in its xdist group
    (group_of); the count of them. The rest keep their order."""
    if not multi_gpu_host(gpus):
        return 0
    mode = grouping()
    multi = [i for i in items if i.get_closest_marker("multi_gpu") is not None]
    items[:] = multi + [i for i in items if i.get_closest_marker("multi_gpu") is None]
    binned = {}
    if mode == "bins":
        from harness.gate import gate_order
        binned = bins(multi, gate_order.load(), BINS_PER_GPU * _gpu_count(gpus))
    groups = {}
    for item in multi:
        group = binned[item.nodeid] if mode == "bins" else group_of(item, mode)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
    folder = os.environ.get(_GROUPING_ENV)
    if folder and worker_index() is not None:  # for the controller's scheduler (GroupFile)
        import json
        path = os.path.join(folder, f"gw{worker_index()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(groups, f)
        os.replace(path + ".tmp", path)  # whole or absent: the scheduler never reads half
    return len(multi)


def read_groups(folder: str) -> dict[str, str]:
    """{node id: xdist group} as the workers wrote them (every worker collects alike)."""
    import json
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                out.update(json.load(f))
    return out


def make_scheduler(config, log, gpus: int | None = None):
    """The controller's scheduler in place of `load`. On GPUs, LoadGroupScheduling: it hands
    out one unit at a time as a worker runs low (at most three tests queued on a worker),
    which with the longest tests first (harness/gate/gate_order.py) is close to longest-
    processing-time scheduling; `load` sends a quarter of the tests round robin up front,
    and on one H100 a worker was left with 277 s of them while the others ran out at 140 s
    (bench/results/gate-profile-h100-2026-11-26-66d97d7.log). The groups of multi_gpu tests
    need it on several GPUs anyway. On CPU, WorkStealingScheduling (xdist 3.2+): `load`
    hands out the tests in fixed batches, so on 2 cores a worker can end its batch on the
    slow engine tests while the other idles, and an idle worker now takes over half of the
    other's queue."""
    if getattr(config.option, "dist", "no") != "load":
        return None
    if _gpu_count(gpus) > 0:
        from xdist.scheduler import LoadGroupScheduling

        class GroupFile(LoadGroupScheduling):
            """LoadGroupScheduling with each test's group read from the workers' files
            (group_multi_gpu) instead of a suffix of its node id. Scopes are first asked for
            once every worker has collected, and so written its file."""
            groups = None

            def _split_scope(self, nodeid: str) -> str:
                folder = os.environ.get(_GROUPING_ENV)
                if self.groups is None:
                    self.groups = read_groups(folder) if folder else {}
                return self.groups.get(nodeid, nodeid)

        return GroupFile(config, log)
    import xdist.scheduler
    steal = getattr(xdist.scheduler, "WorkStealingScheduling", None)
    return steal and steal(config, log)


def _gpu_count(gpus: int | None) -> int:
    """`gpus` (a test pretending), else the visible GPUs."""
    if gpus is None:
        import torch  # here, not at import: the plugin has it loaded; a test's conftest not
        gpus = torch.cuda.device_count()
    return gpus


def on_gpus() -> bool:
    """Whether this pytest runs on GPUs (where harness/gate/gate_order.py orders tests)."""
    return _gpu_count(None) > 0
