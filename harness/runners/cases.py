"""The historical cases (fault name -> Case: the bug zoo's faults and the suite's regression
examples), found without naming them.

`cases/` is built on the harness (its examples are harness configurations), so the harness
never imports it by name: that would run upward (tests/test_layers.py). It loads the mapping
that an entry point of the group `specdec.cases` names (pyproject.toml: `specdec =
"cases:CASES"`, registered by `pip install -e .`), or, taking precedence, the
`module:attribute` in SPECDEC_CASES. This checkout's conftest.py sets SPECDEC_CASES by
default, so pytest finds the checkout's own cases even where the install predates the entry
point; `python -m harness zoo|repro` outside pytest needs either."""
from __future__ import annotations

import functools
import importlib
import os
from importlib.metadata import entry_points

GROUP = "specdec.cases"
ENV = "SPECDEC_CASES"


def _load(spec: str, where: str) -> dict:
    module, sep, attr = spec.partition(":")
    if not (sep and module and attr):
        raise ValueError(f"{where} = {spec!r}: expected 'module:attribute', e.g. 'cases:CASES'")
    return dict(getattr(importlib.import_module(module), attr))


@functools.cache
def load_cases() -> dict:
    """Fault name -> Case, from SPECDEC_CASES or else the `specdec.cases` entry points."""
    if os.environ.get(ENV):
        return _load(os.environ[ENV], ENV)
    found = list(entry_points(group=GROUP))
    if not found:
        raise RuntimeError(f"no cases found: no entry point in group {GROUP!r} (pip install -e . "
                           f"in this checkout registers it) and {ENV} is unset (e.g. "
                           f"{ENV}=cases:CASES)")
    out: dict = {}
    for ep in found:
        out.update(_load(ep.value, f"entry point {ep.name} of {GROUP}"))
    return out
