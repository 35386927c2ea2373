"""Where a foreign engine's code comes from (harness/adapters/foreign/source.py): `@VERSION` a
release, `@PATH` a checkout in either layout (the package at PATH or at PATH/python, as
SGLang's repository has it), `@installed` this environment's package; a bad one is refused
naming the value and what is allowed. And the install manager's rule that the user's
environment never breaks a release: a package present here at a version the engine does not
accept goes into the engine's folder at the engine's own range (install.mismatched)."""
from __future__ import annotations

import pytest
import torch

from harness.adapters.foreign import install
from harness.adapters.foreign.remote import RemoteKernels
from harness.adapters.foreign.source import import_root, is_path, parse_source
from harness.adapters.registry import parse
from test_foreign_worker import ADAPTER  # the same fake engine's kernel adapter


def _package(root, name="fake_engine"):
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("VERSION = '9.9.dev0'\n"
                                            "def double(x):\n    return x * 2\n")
    return root


def test_a_checkout_is_found_in_either_layout(tmp_path):
    flat = _package(tmp_path / "unpacked")
    nested = _package(tmp_path / "repo" / "python").parent
    assert import_root("fake_engine", str(flat)) == flat.resolve()
    assert import_root("fake_engine", str(nested)) == (nested / "python").resolve()
    with pytest.raises(ValueError, match="no fake_engine package there: expected .*python"):
        import_root("fake_engine", str(tmp_path))


def test_versions_paths_and_installed_are_told_apart(tmp_path, monkeypatch):
    assert not is_path("0.5.23") and not is_path("0.4.6.post5")
    assert is_path("./sglang") and is_path("~/src/vllm") and is_path(str(tmp_path))
    assert parse_source("x", "fake_engine", "0.5.23").kind == "release"
    src = parse_source("x", "fake_engine", str(_package(tmp_path / "co")))
    assert (src.kind, src.root) == ("path", str((tmp_path / "co").resolve()))
    with pytest.raises(ValueError, match="no 'fake_engine' package is importable"):
        parse_source("x", "fake_engine", "installed")
    monkeypatch.syspath_prepend(str(tmp_path / "co"))
    assert parse_source("x", "fake_engine", "installed").kind == "installed"


def test_the_registry_takes_a_path_and_refuses_a_bad_one(tmp_path):
    _package(tmp_path / "python", "sglang")
    cls, spec = parse(f"sglang-kernels@{tmp_path}")
    assert cls.DIST == "sglang" and spec == str(tmp_path.resolve())
    with pytest.raises(ValueError, match="no vllm package there"):
        parse(f"vllm-kernels@{tmp_path}")
    with pytest.raises(ValueError, match="this checkout's own kernels; it takes no version"):
        parse(f"specdec-kernels@{tmp_path}")


def test_a_checkout_is_served_as_it_is_on_disk(tmp_path):
    """The worker imports the checkout's files (an edit shows at the next start), before
    anything of the same name the side folder holds."""
    checkout, side = _package(tmp_path / "co"), tmp_path / "side"
    _package(side)  # a stale copy in the side folder must not win
    (side / "fake_engine" / "__init__.py").write_text("VERSION = 'stale'\n")
    (side / "fake_adapter.py").write_text(ADAPTER)
    k = RemoteKernels("fake-kernels", target="fake_adapter:FakeKernels",
                      paths=[str(checkout), str(side)], device="cpu", env={},
                      release=str(checkout))
    try:
        assert k.version() == "9.9.dev0" and k.engine == f"fake-kernels@{checkout}"
        assert torch.equal(k.double(torch.arange(3)), torch.tensor([0, 2, 4]))
    finally:
        k.close()


def test_the_environments_wrong_versions_go_into_the_folder(tmp_path):
    """Control in the same test: what this environment has in range, what the folder holds,
    what is absent, and what is never installed (torch) are left alone."""
    import hypothesis
    import pytest as pt
    (tmp_path / "toolz-1.0.0.dist-info").mkdir()
    reqs = {"hypothesis": f"hypothesis<{hypothesis.__version__}",      # here, too new
            "pytest": f"pytest=={pt.__version__}",                      # here, in range
            "toolz": "toolz<2",                                         # the folder's, in range
            "not-a-package-here": "not-a-package-here<1",               # absent
            "torch": "torch==1.0"}                                      # never
    assert install.mismatched(reqs, tmp_path, frozenset({"torch"})) == [
        f"hypothesis<{hypothesis.__version__}"]
    (tmp_path / "hypothesis-0.1.dist-info").mkdir()  # now the folder's copy is the one seen
    assert install.mismatched(reqs, tmp_path, frozenset({"torch"})) == []


def test_a_checkouts_requirements_come_from_its_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "fake"\ndependencies = ["transformers==4.57.1", "numpy"]\n')
    (tmp_path / "python").mkdir()
    reqs = install._pyproject_requirements(tmp_path / "python")
    assert reqs == {"transformers": "transformers==4.57.1", "numpy": "numpy"}
