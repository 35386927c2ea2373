"""The bug zoo: one module per historical fault (contract section 9), each defining CASE.

`CASES` maps fault name -> Case, in the registry's order. `python -m harness zoo` and the
meta-test `pytest cases/` prove the ordinary property suite catches every one."""
from __future__ import annotations

import importlib
import pkgutil

from specdec.faults import REGISTRY


def _load() -> dict:
    found = {}
    for mod in pkgutil.iter_modules(__path__):
        if mod.name in ("case",) or mod.name.startswith("test_"):
            continue
        case = importlib.import_module(f"{__name__}.{mod.name}").CASE
        if case.fault != mod.name:
            raise ValueError(f"cases/{mod.name}.py holds the case of {case.fault!r}")
        found[case.fault] = case
    return {name: found[name] for name in REGISTRY if name in found}


CASES = _load()
