"""The kernel laws under pytest: `pytest --engine sglang-kernels@0.5.23` (repeatable) runs
them on that release's own kernels, in its worker subprocess (installed first when missing:
harness/adapters/foreign/); plain `pytest` on specdec's kernels through the same door. A law the
adapter's components cannot serve is skipped with "not applicable: needs X"; each failure
carries its one-line replay (`python -m harness repro ...`)."""
from __future__ import annotations

import pytest
from hypothesis import settings

from harness.adapters.registry import get_kernels, is_kernel_engine
from harness.runners.kernel_suite import (KERNEL_LAWS, cpu_examples, law_test,
                                         not_applicable)
from harness.strategies.runs import default_device

DEVICE = default_device()


def pytest_generate_tests(metafunc) -> None:
    if "kernel_engine" in metafunc.fixturenames:
        asked = metafunc.config.getoption("engine", None)
        engines = [e for e in asked if is_kernel_engine(e)] if asked else ["specdec-kernels"]
        metafunc.parametrize("kernel_engine", engines)


@pytest.mark.engine_law
@pytest.mark.parametrize("law", list(KERNEL_LAWS))
def test_kernel_law(kernel_engine, law):
    kernels = get_kernels(kernel_engine, DEVICE)
    reason = not_applicable(law, kernels)
    if reason:
        pytest.skip(f"{law} on {kernel_engine}: {reason}")
    # CPU CI: a few examples per law (the interpreter is slow); nightly and a GPU: the profile's.
    cpu_tier = DEVICE == "cpu" and settings._current_profile != "nightly"
    n = (max(1, cpu_examples(kernel_engine) // KERNEL_LAWS[law].fraction) if cpu_tier
         else settings.default.max_examples)
    law_test(law, kernels, DEVICE, n)()
