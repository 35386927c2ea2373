"""Root pytest configuration: Hypothesis profiles, device selection, xdist on GPUs."""
from __future__ import annotations

import os

import kernels._triton_env  # noqa: F401  (sets TRITON_INTERPRET before anything imports triton)
import torch
from hypothesis import HealthCheck, settings

if not torch.cuda.is_available() or os.environ.get("PYTEST_XDIST_WORKER"):
    # The tiny models' CPU work is all overhead: OpenMP threads only contend, with each other
    # and with the other xdist workers (measured: one thread runs a property example 12x
    # faster on CPU; on a GPU machine the CPU-side references and smoke benches likewise).
    torch.set_num_threads(1)

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("dev", max_examples=10, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile(
    "ci", parent=settings.get_profile("ci"), max_examples=10, deadline=None,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile("gpu", max_examples=25, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile("nightly", max_examples=300, deadline=None, suppress_health_check=_SLOW_OK)


def _default_profile() -> str:
    if os.environ.get("CI"):
        return "ci"
    return "gpu" if torch.cuda.is_available() else "dev"


settings.load_profile(os.environ.get("SPECDEC_PROFILE", _default_profile()))


def pytest_report_header(config):
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return f"specdec: device={dev} hypothesis-profile={settings._current_profile}"


# -- xdist on GPUs (harness.md): one GPU per worker, a Triton cache per worker ------------------
def _worker_index() -> int | None:
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") else None


def pytest_addoption(parser):
    parser.addoption("--faults", default=None, metavar="NAME[,NAME]",
                     help="switch on bug-zoo faults (specdec/faults.py) for the whole run")


def pytest_configure(config):
    names = config.getoption("--faults", default=None)
    if names:
        from specdec import faults
        faults.set_active(names.split(","))
    idx = _worker_index()
    if idx is not None:
        # A shared Triton cache under concurrent compiles has produced silent NaNs upstream.
        base = os.environ.get("TRITON_CACHE_DIR", os.path.expanduser("~/.triton/cache"))
        os.environ["TRITON_CACHE_DIR"] = os.path.join(base, f"worker{idx}")
        if torch.cuda.is_available():
            torch.cuda.set_device(idx % torch.cuda.device_count())


def pytest_xdist_auto_num_workers(config):
    cpus = os.cpu_count() or 1
    if torch.cuda.is_available():
        # Workers are host-bound (tiny models: kernel launches, Python), so one per CPU core,
        # up to 16 per GPU (a CUDA context each, ~600 MiB). Measured on one H100 with 16
        # cores: 12 workers ran the gpu-profile suite in 6 min, 4 workers would need ~16.
        gpus = torch.cuda.device_count()
        return max(gpus, min(cpus, 16 * gpus))
    return cpus
