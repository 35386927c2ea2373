"""Transition alias: installs made before the re-layout name the `pytest11` entry point
`harness.pytest_plugin`; the plugin is harness/runners/pytest_plugin.py. Remove once every
environment has run `pip install -e .` again."""
from __future__ import annotations

from harness.runners.pytest_plugin import *  # noqa: F401,F403
