"""Root pytest configuration: Hypothesis profiles, device selection, xdist on GPUs."""
from __future__ import annotations

import os

import kernels._triton_env  # noqa: F401  (sets TRITON_INTERPRET before anything imports triton)
import torch
from hypothesis import HealthCheck, settings

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
