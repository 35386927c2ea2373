"""The Hypothesis profiles (docs/contract.md, Tiers and profiles) and which one a run uses.

Used by the pytest plugin (harness/gate/pytest_plugin.py) and by `python -m harness`, so a sweep
and a test run draw the same number of examples on the same machine."""
from __future__ import annotations

import os

import torch
from hypothesis import HealthCheck, settings

NAMES = ("dev", "ci", "gpu", "nightly")
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
_registered = False


def register() -> None:
    """Register dev, ci, gpu and nightly (idempotent: `ci` extends Hypothesis's own `ci`,
    which a second registration would extend again)."""
    global _registered
    if _registered:
        return
    settings.register_profile("dev", max_examples=10, deadline=None, suppress_health_check=_SLOW_OK)
    # ci keeps Hypothesis's own CI defaults (derandomize, no database, print_blob).
    settings.register_profile("ci", parent=settings.get_profile("ci"), max_examples=10,
                              deadline=None, suppress_health_check=_SLOW_OK)
    settings.register_profile("gpu", max_examples=25, deadline=None, suppress_health_check=_SLOW_OK)
    settings.register_profile("nightly", max_examples=300, deadline=None,
                              suppress_health_check=_SLOW_OK)
    _registered = True


def default_name() -> str:
    """SPECDEC_PROFILE if set, else ci under CI=..., else gpu with CUDA, else dev."""
    if os.environ.get("SPECDEC_PROFILE"):
        return os.environ["SPECDEC_PROFILE"]
    if os.environ.get("CI"):
        return "ci"
    return "gpu" if torch.cuda.is_available() else "dev"


def load_default() -> str:
    register()
    name = default_name()
    settings.load_profile(name)
    return name
