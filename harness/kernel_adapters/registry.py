"""Which kernel adapter `--engine NAME[@VERSION]` means: `specdec-kernels` (in process),
`sglang-kernels@0.5.23`, `vllm-kernels@0.33.0` (each release in its own install folder and
worker subprocess; no version = the newest pinned one). Built once per (engine, device)."""
from __future__ import annotations

import importlib
from functools import lru_cache

BUILTIN = {
    "specdec-kernels": "harness.kernel_adapters.specdec_kernels:SpecdecKernels",
    "sglang-kernels": "harness.kernel_adapters.sglang_kernels:SglangKernels",
    "vllm-kernels": "harness.kernel_adapters.vllm_kernels:VllmKernels",
}


def is_kernel_engine(engine: str) -> bool:
    return engine.partition("@")[0] in BUILTIN


def kernel_class(name: str):
    if name not in BUILTIN:
        raise ValueError(f"--engine {name!r}: expected one of {sorted(BUILTIN)}")
    module, _, cls = BUILTIN[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def foreign_class(dist: str):
    """The foreign kernel adapter of a distribution name (`foreign install vllm==...`)."""
    for name in BUILTIN:
        cls = kernel_class(name)
        if getattr(cls, "DIST", None) == dist:
            return cls
    raise ValueError(f"{dist!r}: expected one of "
                     f"{sorted(kernel_class(n).DIST for n in BUILTIN if n != 'specdec-kernels')}")


def parse(engine: str) -> tuple[type, str | None]:
    """`name@version` -> (adapter class, version); a foreign engine without a version gets
    its newest pinned release. A version may be any release; the pinned ones (SUPPORTED)
    are those CI runs."""
    name, _, version = engine.partition("@")
    cls = kernel_class(name)
    if getattr(cls, "in_process", False):
        if version:
            raise ValueError(f"--engine {engine!r}: {name} is this checkout's own kernels; it "
                             "takes no version")
        return cls, None
    return cls, version or cls.SUPPORTED[-1]


@lru_cache(maxsize=16)
def get_kernels(engine: str, device: str, install: bool = True):
    """The adapter built once per (engine, device), reused across examples."""
    return build_kernels(engine, device, install)


def build_kernels(engine: str, device: str, install: bool = True):
    """A new adapter: in process for specdec-kernels, else a worker over the release's
    install folder (installed first when missing and `install`); `close()` stops it."""
    from harness.foreign import install as inst
    from harness.foreign.remote import RemoteKernels
    cls, version = parse(engine)
    if version is None:
        return cls(device)
    if not inst.installed(cls.DIST, version):
        if not install:
            raise ValueError(f"{engine}: not installed; run `python -m harness foreign install "
                             f"{cls.DIST}=={version}`")
        inst.install(cls, version, device)
    return RemoteKernels(cls.name, cls.TARGET, str(inst.site_dir(cls.DIST, version)), device,
                         cls.ENV, version)
