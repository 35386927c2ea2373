"""The black-box laws under pytest, on every engine asked for: `pytest --engine NAME` (the
specdec plugin's option; repeatable) runs them on NAME, plain `pytest` on both built-in
adapters (specdec and transformers) with a small CPU budget. A law the engine cannot serve
is skipped with "not applicable: needs X" (a skip, never a pass). Each failure carries its
one-line replay (`python -m harness repro ...`).

Elsewhere than this checkout: `pytest -n auto --pyargs harness.runners.test_engine_laws
--engine mine` (harness/adapters/registry.py says how `mine` is found)."""
from __future__ import annotations

import pytest
from hypothesis import settings

from harness.adapters.registry import default_adapter
from harness.adapters.registry import is_kernel_engine
from harness.runners.engine_suite import (CPU_EXAMPLES, ENGINE_LAWS, FRACTION, law_test,
                                          not_applicable)
from harness.strategies.runs import default_device

DEVICE = default_device()
BUILTIN = ("specdec", "transformers")


def pytest_generate_tests(metafunc) -> None:
    if "engine" in metafunc.fixturenames:
        asked = metafunc.config.getoption("engine", None)
        engines = [e for e in asked if not is_kernel_engine(e)] if asked else list(BUILTIN)
        metafunc.parametrize("engine", engines)


def _examples(engine: str, law: str) -> int | None:
    """CPU: a few examples per law (CI stays within its 15 minutes); GPU: the profile's."""
    if DEVICE != "cpu":
        return None
    cap = CPU_EXAMPLES.get(engine, 3)
    return max(1, min(settings.default.max_examples, cap) // FRACTION.get(law, 1))


def _laws() -> list:
    """Each law, or on a GPU each of its parts (its declaration's `parts`: tests that share
    its examples and run side by side, so none outlasts the gate's 60 s). On CPU a law's
    few examples stay one test."""
    out = []
    for name, law in ENGINE_LAWS.items():
        of = law.parts if DEVICE != "cpu" else 1
        out += [pytest.param(name, (k, of), id=name if of == 1 else f"{name}-part{k + 1}of{of}")
                for k in range(of)]
    return out


@pytest.mark.engine_law
@pytest.mark.parametrize("law,part", _laws())
def test_engine_law(engine, law, part):
    reason = not_applicable(ENGINE_LAWS[law].needs, default_adapter(engine, DEVICE))
    if reason:
        pytest.skip(f"{law} on {engine}: {reason}")
    law_test(law, engine=engine, device=DEVICE, max_examples=_examples(engine, law), part=part)()
