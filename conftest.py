"""This repository's own pytest configuration: only what is specific to this checkout.

The options (`--faults`), Hypothesis profiles, xdist GPU pinning and per-worker Triton cache
come from the specdec pytest plugin (harness/gate/pytest_plugin.py, the `pytest11` entry
point), which pytest loads wherever specdec is installed; nothing here registers them again.
The harness finds this checkout's historical cases (cases/) through SPECDEC_CASES, set here
by default (harness/runners/cases.py), so it never imports them by name.
"""
from __future__ import annotations

import os

import pytest

# Before collection: the suite's entries read the cases' regression examples when collected.
os.environ.setdefault("SPECDEC_CASES", "cases:CASES")


def pytest_configure(config) -> None:
    # Without the plugin these tests would run with Hypothesis's defaults (100 examples, a
    # 200 ms deadline) and no --faults; with another checkout's plugin, against that
    # checkout's harness. Both look like a run and are not one.
    plugin = config.pluginmanager.get_plugin("specdec")
    if plugin is None:
        raise pytest.UsageError("the specdec pytest plugin is not loaded: install this "
                                "checkout first (pip install -e \".[test]\")")
    here = os.path.dirname(os.path.realpath(__file__))
    # The plugin is a module somewhere inside this checkout's harness package, at any depth.
    if not os.path.realpath(plugin.__file__).startswith(os.path.join(here, "harness") + os.sep):
        raise pytest.UsageError(f"the specdec pytest plugin was loaded from {plugin.__file__}, "
                                f"not from this checkout ({here}): pip install -e \".[test]\" "
                                "here, in this environment")
