"""xdist on GPUs (docs/contract.md, Tiers and profiles): one GPU per worker, a Triton cache
per worker, how many workers `-n auto` starts, and where the tests that need several GPUs
run."""
from __future__ import annotations

import os

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
    between workers through a store (harness/runners/triton_cache.py): compiled once, not
    once per worker."""
    base = cache_base()
    os.environ["TRITON_CACHE_DIR"] = os.path.join(base, f"worker{idx}")
    import torch
    if torch.cuda.is_available():
        from harness.runners import triton_cache
        triton_cache.configure(base)
        torch.cuda.set_device(idx % torch.cuda.device_count())


def auto_num_workers() -> int:
    import torch
    cpus = os.cpu_count() or 1
    if torch.cuda.is_available():
        # Workers are host-bound (tiny models: kernel launches, Python), so one per CPU core,
        # up to 16 per GPU (a CUDA context each, ~600 MiB). Measured on one H100 with 16
        # cores: 12 workers ran the gpu-profile suite in 6 min, 4 workers would need ~16.
        gpus = torch.cuda.device_count()
        return max(gpus, min(cpus, 16 * gpus))
    return cpus


# -- tests that need several GPUs, under `pytest -n auto` ------------------------------------
# On a host with G >= 2 GPUs every test marked multi_gpu (TP laws, TP zoo cases, the NCCL
# endings) runs on one xdist worker, one after another, while the others keep one GPU each:
# the controller schedules with xdist's LoadGroupScheduling (tests without the group are
# spread as under plain `load`) and the workers tag those tests' node ids with the group, as
# `--dist loadgroup` would, so `pytest -n auto` stays the one command. Across processes (zoo
# subprocesses, another pytest), rank 0 of a TP engine holds a lock per GPU of its group
# while the engine is in use (specdec/tp/gpu_lock.py, SPECDEC_TP_GPU_LOCKS). With fewer than
# 2 GPUs, or on CPU, none of this happens.
MULTI_GPU_GROUP = "multi_gpu"
_GROUPING_ENV = "SPECDEC_XDIST_MULTI_GPU_GROUP"  # controller -> workers: the group is on


def multi_gpu_host(gpus: int | None = None) -> bool:
    if gpus is None:
        import torch  # here, not at import: the plugin has it loaded; a test's conftest not
        gpus = torch.cuda.device_count()
    return gpus >= 2


def use_gpu_locks(gpus: int | None = None) -> bool:
    """On a multi-GPU host, a GPU lock directory for the TP engines of this process and those
    it starts (specdec/tp/gpu_lock.py); whether the host has several GPUs."""
    if not multi_gpu_host(gpus):
        return False
    import tempfile
    os.environ.setdefault("SPECDEC_TP_GPU_LOCKS",
                          os.path.join(tempfile.gettempdir(), f"specdec-gpu-locks-{os.getuid()}"))
    return True


def configure_multi_gpu(config, gpus: int | None = None) -> None:
    """Controller and workers alike: a GPU lock directory for TP engines, and (controller,
    `-n` with the default `load`) the grouping switched on for the workers it starts."""
    if not use_gpu_locks(gpus):
        return
    if worker_index() is None and getattr(config.option, "dist", "no") in ("load", "loadgroup"):
        os.environ[_GROUPING_ENV] = "1"  # inherited by the workers xdist spawns next


SPREAD_ENV = "SPECDEC_XDIST_MULTI_GPU"  # "group" (the default) or "spread"


def group_multi_gpu(config, items, gpus: int | None = None) -> int:
    """Put the multi_gpu tests in one xdist group; the count of them. With
    SPECDEC_XDIST_MULTI_GPU=spread, no group: the multi_gpu tests go first in the collection,
    each a unit of its own for LoadGroupScheduling (which hands the first units to distinct
    workers), so their engines queue on the GPU locks (specdec/tp/gpu_lock.py) while
    everything else they do (imports, subprocess start-up, model builds) runs side by side."""
    if not multi_gpu_host(gpus):
        return 0
    if os.environ.get(SPREAD_ENV, "group") == "spread":
        multi = [i for i in items if i.get_closest_marker("multi_gpu") is not None]
        items[:] = multi + [i for i in items if i.get_closest_marker("multi_gpu") is None]
        return len(multi)
    tag = worker_index() is not None and os.environ.get(_GROUPING_ENV) == "1" \
        and not getattr(config.option, "loadgroup", False)  # --dist loadgroup: xdist tags
    n = 0
    for item in items:
        if item.get_closest_marker("multi_gpu") is None:
            continue
        item.add_marker(pytest.mark.xdist_group(MULTI_GPU_GROUP))
        if tag and not item.nodeid.endswith("@" + MULTI_GPU_GROUP):
            item._nodeid = f"{item.nodeid}@{MULTI_GPU_GROUP}"  # what xdist's loadgroup does
        n += 1
    return n


def make_scheduler(config, log, gpus: int | None = None):
    """The controller's scheduler in place of `load`: LoadGroupScheduling on a multi-GPU
    host; on CPU, WorkStealingScheduling (xdist 3.2+): `load` hands out the tests in fixed
    batches, so on 2 cores a worker can end its batch on the slow engine tests while the
    other idles, and an idle worker now takes over half of the other's queue; None (xdist's
    own choice) on one GPU."""
    if getattr(config.option, "dist", "no") != "load":
        return None
    if multi_gpu_host(gpus):
        from xdist.scheduler import LoadGroupScheduling
        return LoadGroupScheduling(config, log)
    if _gpu_count(gpus) == 0:
        import xdist.scheduler
        steal = getattr(xdist.scheduler, "WorkStealingScheduling", None)
        return steal and steal(config, log)
    return None


def _gpu_count(gpus: int | None) -> int:
    if gpus is None:
        import torch
        gpus = torch.cuda.device_count()
    return gpus
