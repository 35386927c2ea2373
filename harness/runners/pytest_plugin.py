"""The specdec pytest plugin, registered as the `pytest11` entry point `specdec`: any test
directory run where specdec is installed gets what this repository's own tests get.

- `--faults NAME[,NAME]`: bug-zoo faults on for the whole run (faultpoints/);
- the Hypothesis profiles dev / ci / gpu / nightly, chosen by SPECDEC_PROFILE, CI or the
  device (harness/runners/profiles.py; `--hypothesis-profile` still overrides);
- one torch thread on CPU and in xdist workers;
- under xdist, one GPU per worker and a Triton cache per worker; `-n auto` sized for the
  device; on a host with several GPUs the multi_gpu tests all on one worker, and a lock per
  GPU for TP engines (harness/runners/xdist_gpu.py);
- the device and profile in the report header.
"""
from __future__ import annotations

# First, before anything imports triton: without CUDA it must run under the interpreter, and
# TRITON_INTERPRET is read when triton is imported. Entry-point plugins load before any
# conftest or test module, so this is as early as pytest allows.
import kernels._triton_env  # noqa: F401,I001

import importlib.util

import pytest
import torch

from harness.runners import xdist_gpu

# Hypothesis comes with the `test` extra; an environment with a plain `pip install specdec`
# still runs its own pytest, just without the profiles.
HAVE_HYPOTHESIS = importlib.util.find_spec("hypothesis") is not None

if not torch.cuda.is_available() or xdist_gpu.worker_index() is not None:
    # The tiny models' CPU work is all overhead: OpenMP threads only contend, with each other
    # and with the other xdist workers (measured: one thread runs a property example 12x
    # faster on CPU; on a GPU machine the CPU-side references and smoke benches likewise).
    torch.set_num_threads(1)

if HAVE_HYPOTHESIS:
    from harness.runners import profiles
    profiles.load_default()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("specdec", "specdec (harness/runners/pytest_plugin.py)")
    group.addoption("--faults", default=None, metavar="NAME[,NAME]",
                    help="switch on bug-zoo faults for the whole run (names and the mistake "
                         "each one makes: faultpoints/__init__.py, cases/)")


def pytest_configure(config) -> None:
    names = config.getoption("--faults")
    if names:
        import faultpoints
        try:
            faultpoints.set_active(names.split(","))
        except ValueError as exc:  # an unknown name: a usage error, not a crash
            raise pytest.UsageError(f"--faults: {exc}") from None
    idx = xdist_gpu.worker_index()
    if idx is not None:
        xdist_gpu.pin_worker(idx)
    xdist_gpu.configure_multi_gpu(config)


@pytest.hookimpl(tryfirst=True)  # before xdist's own: it reads the xdist_group marks
def pytest_collection_modifyitems(config, items) -> None:
    xdist_gpu.group_multi_gpu(config, items)


def pytest_report_header(config) -> str:
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    line = f"specdec: device={dev}"
    if HAVE_HYPOTHESIS:
        from hypothesis import settings
        line += f" hypothesis-profile={settings._current_profile}"
    faults = config.getoption("--faults")
    return line + (f" faults={faults}" if faults else "")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist, nothing to size
def pytest_xdist_auto_num_workers(config) -> int:
    return xdist_gpu.auto_num_workers()


@pytest.hookimpl(optionalhook=True)  # an xdist hook: multi-GPU tests on one worker
def pytest_xdist_make_scheduler(config, log):
    return xdist_gpu.make_scheduler(config, log)
