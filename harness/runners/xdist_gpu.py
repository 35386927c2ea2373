"""xdist on GPUs (shared/spec/harness.md): one GPU per worker, a Triton cache per worker, and
how many workers `-n auto` starts."""
from __future__ import annotations

import os

import torch


def worker_index() -> int | None:
    """gw3 -> 3; None outside an xdist worker."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") else None


def pin_worker(idx: int) -> None:
    """Round robin over the GPUs, and a Triton cache of the worker's own: a shared cache under
    concurrent compiles has produced silent NaNs upstream."""
    base = os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))
    os.environ["TRITON_CACHE_DIR"] = os.path.join(base, f"worker{idx}")
    if torch.cuda.is_available():
        torch.cuda.set_device(idx % torch.cuda.device_count())


def auto_num_workers() -> int:
    cpus = os.cpu_count() or 1
    if torch.cuda.is_available():
        # Workers are host-bound (tiny models: kernel launches, Python), so one per CPU core,
        # up to 16 per GPU (a CUDA context each, ~600 MiB). Measured on one H100 with 16
        # cores: 12 workers ran the gpu-profile suite in 6 min, 4 workers would need ~16.
        gpus = torch.cuda.device_count()
        return max(gpus, min(cpus, 16 * gpus))
    return cpus
