"""What the kernel laws found in SGLang's and vLLM's released kernels (docs/findings/
<engine>_*.py, one script each with its verdict and upstream reference), kept as regression
examples: on each release a finding was reproduced on, its law fails on the recorded case
(a strict xfail: the test flips if the release's kernel or our law changes), and on each
pinned release (the ones CI installs) the law holds there, unless the finding was reproduced
on it (the laws then draw around it there: the adapter's accepts["known"]). A release that
is not installed ($SPECDEC_FOREIGN_DIR) is skipped: `python -m harness foreign install
DIST==V` first."""
from __future__ import annotations

import pathlib

import pytest
import torch

from harness.adapters.foreign.install import installed
from harness.adapters.registry import kernel_class
from harness.runners.kernel_findings import finding_scripts, reproduces

SCRIPTS = finding_scripts()
FINDINGS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "findings"


def _finding(name: str):
    return SCRIPTS[name]


def _releases(pinned: bool):
    for name in SCRIPTS:
        f = _finding(name)
        cls = kernel_class(f.ENGINE)
        for v in ([v for v in cls.SUPPORTED if v not in f.REPRODUCED_ON] if pinned
                  else f.REPRODUCED_ON):
            marks = [pytest.mark.skipif(not installed(cls.DIST, v), reason=(
                f"{cls.DIST} {v} is not installed: python -m harness foreign install "
                f"{cls.DIST}=={v}"))]
            if not pinned:
                marks.append(pytest.mark.xfail(strict=True, reason=f"{name} on {v}"))
                if getattr(f, "DEVICE", None) == "cuda":  # compiled Triton's finding
                    marks.append(pytest.mark.skipif(not torch.cuda.is_available(),
                                                    reason=f"{name}: compiled Triton only"))
            yield pytest.param(name, v, marks=marks, id=f"{name}@{v}")


@pytest.mark.parametrize("name,release", list(_releases(pinned=False)))
def test_finding_reproduces_where_recorded(name, release):
    f = _finding(name)
    failure = reproduces(f.LAW, f"{f.ENGINE}@{release}", f.SEED, f.KNOBS, f.DEVICE)
    assert failure is None, failure


@pytest.mark.parametrize("name,release", list(_releases(pinned=True)))
def test_pinned_releases_pass_the_recorded_case(name, release):
    """On the GPU where there is one: a pack carries no CPU-interpreter numpy pin."""
    f = _finding(name)
    failure = reproduces(f.LAW, f"{f.ENGINE}@{release}", f.SEED, f.KNOBS)
    assert failure is None, failure


def test_every_kernel_finding_names_its_case():
    for name in SCRIPTS:
        f = _finding(name)
        assert f.REPRODUCED_ON and f.LAW and f.ENGINE, name
        assert (FINDINGS / f"{name}.py").read_text().count("Verdict:") == 1, name
