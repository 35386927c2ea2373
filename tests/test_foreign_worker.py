"""The foreign-engine machinery without a network: a release folder holding a tiny engine
and its kernel adapter, run in the worker subprocess exactly as SGLang's and vLLM's are
(harness/adapters/foreign/). The worker keeps the engine's prints off the reply pipe, names a missing
module, and hands back the engine's exceptions; the installer reads version ranges from the
engine's own metadata."""
from __future__ import annotations

import pytest
import torch

from harness.adapters.foreign import install
from harness.adapters.foreign.remote import ForeignCallError, ForeignImportError, RemoteKernels

ADAPTER = '''
import fake_engine  # the "engine": missing until the test writes it
class FakeKernels:
    name = "fake-kernels"
    components = frozenset()
    why_not = {}
    accepts = {}
    def __init__(self, device):
        print("engine banner on stdout")  # must not reach the reply pipe
    def version(self):
        return fake_engine.VERSION
    def double(self, x):
        print("noise")
        return fake_engine.double(x)
'''


def _start(folder):
    return RemoteKernels("fake-kernels", target="fake_adapter:FakeKernels", paths=[str(folder)],
                         device="cpu", env={},
                         release="1.0")


def test_a_missing_module_is_named(tmp_path):
    (tmp_path / "fake_adapter.py").write_text(ADAPTER)
    with pytest.raises(ForeignImportError) as info:
        _start(tmp_path)
    assert info.value.module == "fake_engine" and "fake-kernels@1.0" in str(info.value)


def test_calls_round_trip_and_errors_come_back(tmp_path):
    (tmp_path / "fake_adapter.py").write_text(ADAPTER)
    (tmp_path / "fake_engine.py").write_text(
        "VERSION = '1.0'\ndef double(x):\n    if x.numel() == 0:\n"
        "        raise ValueError('empty input')\n    return x * 2\n")
    k = _start(tmp_path)
    try:
        assert k.version() == "1.0" and k.engine == "fake-kernels@1.0"
        assert torch.equal(k.double(torch.arange(3)), torch.tensor([0, 2, 4]))
        with pytest.raises(ForeignCallError, match="ValueError: empty input"):
            k.double(torch.empty(0))
        assert torch.equal(k.double(torch.ones(1)), torch.tensor([2.0]))  # still serving
        assert "fake_engine.py" in k.call("loaded_files", str(tmp_path))["inside"]
    finally:
        k.close()


def test_side_packages_take_the_engines_version_range(tmp_path):
    info = tmp_path / "engine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: engine\nRequires-Dist: pyzmq>=25.0\n"
                                   "Requires-Dist: fastapi<0.137,>=0.133\n"
                                   "Requires-Dist: pytest; extra == 'test'\n")
    reqs = install._requirements(tmp_path, "engine")
    assert install._side_requirement("zmq", reqs) == "pyzmq>=25.0"
    assert install._side_requirement("fastapi", reqs) == "fastapi<0.137,>=0.133"
    assert install._side_requirement("cbor2", reqs) == "cbor2"
    assert "pytest" not in reqs
