"""`python -m harness zoo --jobs N`: the faults in N processes at once, spread over the GPUs
(or the cores), each fault in a process of its own as one at a time (the zoo hands in its
`detect_isolated`: this module sits below zoo.py and never imports it).

Job slot k runs its faults on GPU k mod G, with a Triton cache of its own beside the store of
published kernels (harness/gate/triton_cache.py), as an xdist worker does. On a host with
several GPUs the tensor-parallel engines take the GPU locks (specdec/tp/gpu_lock.py), so two
TP groups never share a GPU. On CPU each process gets cores / N threads. The processes are
forked by one fork server (harness/gate/fork_server.py), not started from scratch. The
faults whose case needs several GPUs start first: they run longest, and a pool that ends on
them idles."""
from __future__ import annotations

import os
import queue
from concurrent.futures import ThreadPoolExecutor

from harness.runners.cases import load_cases
from harness.runners.suite import gpus_needed
from harness.gate.xdist_gpu import cache_base


def auto_jobs(device: str) -> int:
    """As many as `pytest -n auto` starts workers: harness/gate/xdist_gpu.py."""
    if not device.startswith("cuda"):
        return os.cpu_count() or 1
    from harness.gate.xdist_gpu import auto_num_workers
    return auto_num_workers()


def job_env(slot: int, jobs: int, device: str) -> dict:
    """The environment of job slot `slot`'s processes."""
    env = dict(os.environ)
    if device.startswith("cuda"):
        env["TRITON_CACHE_DIR"] = os.path.join(cache_base(), f"zoo{slot}")
    else:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))
    return env


def gpus_of(device: str) -> int:
    if not device.startswith("cuda"):
        return 0
    import torch
    return torch.cuda.device_count()


def detect_in_parallel(names: list[str], *, device: str, profile_name: str, jobs: int,
                       report, detect_isolated, scope: str = "suite") -> list:
    """ZooRows for `names`, in their order: `detect_isolated(name, device=, profile_name=,
    gpu=, env=, scope=)` runs one fault in its own process; `report(row)` is called as each ends."""
    gpus = gpus_of(device)
    if gpus:
        from harness.gate import triton_cache
        from harness.gate.xdist_gpu import use_gpu_locks
        triton_cache.configure(cache_base())  # inherited by every job's processes
        use_gpu_locks(gpus)
    jobs = max(1, min(jobs, len(names)))
    cases = load_cases()
    order = sorted(names, key=lambda n: gpus_needed(cases[n].example, device) <= 1)
    slots: queue.Queue = queue.Queue()
    for k in range(jobs):
        slots.put(k)

    def one(name: str):
        slot = slots.get()
        try:
            row = detect_isolated(name, device=device, profile_name=profile_name,
                                  gpu=slot % gpus if gpus else None,
                                  env=job_env(slot, jobs, device), scope=scope)
        finally:
            slots.put(slot)
        report(row)
        return row

    from harness.gate import fork_server
    server = None if os.environ.get(fork_server.SERVER_ENV) else fork_server.start()
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {name: pool.submit(one, name) for name in order}
            return [futures[name].result() for name in names]
    finally:
        if server is not None:
            server.stop()
