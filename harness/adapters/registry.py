"""Which adapter `--engine NAME[@VERSION|@PATH|@installed]` means, engine and kernel alike: the one place an
engine name is resolved, and one built adapter per (engine, device, settings).

Engine adapters (the black-box laws' door, protocol.py): the built-ins below, a name that an
installed package registers in the entry point group `specdec.adapters` (pyproject:
`[project.entry-points."specdec.adapters"] mine = "my_pkg.adapter:MyAdapter"`), or
`module:Class` (importable from the working directory).

Kernel adapters (the kernel laws' door, kernel_protocol.py): `specdec-kernels` (this
checkout's kernels/, in process, no version), `sglang-kernels@0.5.23`, `vllm-kernels@0.33.0`
(each release in its own install folder and worker subprocess, foreign/; no version = the
newest pinned release, the class's SUPPORTED)."""
from __future__ import annotations

import importlib
import json
from functools import lru_cache

ENGINES = {
    "specdec": "harness.adapters.specdec_engine:SpecdecAdapter",
    "transformers": "harness.adapters.transformers_assisted:TransformersAdapter",
}
KERNELS = {
    "specdec-kernels": "harness.adapters.specdec_kernels:SpecdecKernels",
    "sglang-kernels": "harness.adapters.sglang_kernels:SglangKernels",
    "vllm-kernels": "harness.adapters.vllm_kernels:VllmKernels",
}
GROUP = "specdec.adapters"


def _load(engine: str, target: str):
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--engine {engine!r}: cannot load {target} ({exc})") from None


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def known_engines() -> list[str]:
    return sorted(set(ENGINES) | set(_entry_points()))


def is_kernel_engine(engine: str) -> bool:
    return engine.partition("@")[0] in KERNELS


def validate(engine: str) -> None:
    """ValueError naming the bad `engine` and what is allowed; nothing is built."""
    parse(engine) if is_kernel_engine(engine) else adapter_class(engine)


# Engine adapters ------------------------------------------------------------------------

def adapter_class(engine: str):
    """The engine adapter class for `engine`; ValueError naming what is allowed otherwise."""
    target = ENGINES.get(engine) or _entry_points().get(engine) or (engine if ":" in engine
                                                                   else None)
    if target is None:
        raise ValueError(f"--engine {engine!r}: expected one of {known_engines()} (entry point "
                         f"group {GROUP!r}), module:Class, or a kernel adapter "
                         f"{sorted(KERNELS)}[@VERSION|@PATH|@installed]")
    return _load(engine, target)


@lru_cache(maxsize=32)
def _built(engine: str, device: str, settings_json: str):
    return adapter_class(engine).build(device, **json.loads(settings_json))


def get_adapter(engine: str, device: str, settings: dict | None = None):
    """The adapter built once per (engine, device, settings): models are built once and
    reused across examples, as a serving engine would be."""
    return _built(engine, device, json.dumps(settings or {}, sort_keys=True))


def default_adapter(engine: str, device: str):
    """The adapter with its class's default settings (reports, applicability)."""
    return get_adapter(engine, device, {})


# Kernel adapters ------------------------------------------------------------------------

def kernel_class(name: str):
    if name not in KERNELS:
        raise ValueError(f"--engine {name!r}: expected one of {sorted(KERNELS)}")
    return _load(name, KERNELS[name])


def foreign_classes() -> list:
    """The kernel adapters of released wheels (those with a DIST), in registry order."""
    return [cls for cls in map(kernel_class, KERNELS) if getattr(cls, "DIST", None)]


def foreign_class(dist: str):
    """The foreign kernel adapter of a distribution name (`foreign install vllm==...`)."""
    for cls in foreign_classes():
        if cls.DIST == dist:
            return cls
    raise ValueError(f"{dist!r}: expected one of {sorted(c.DIST for c in foreign_classes())}")


def pinned_releases() -> list[str]:
    """`dist==version` of every pinned release (the classes' SUPPORTED): what CI installs and
    runs (.ci/run reads them from `python -m harness foreign pinned`)."""
    return [f"{cls.DIST}=={v}" for cls in foreign_classes() for v in cls.SUPPORTED]


def pinned_engines() -> list[str]:
    """The pinned releases as `--engine` values (`sglang-kernels@0.5.23` ...)."""
    return [f"{cls.name}@{v}" for cls in foreign_classes() for v in cls.SUPPORTED]


def parse(engine: str) -> tuple[type, str | None]:
    """`name@version` -> (adapter class, what follows the "@"); a foreign engine without one
    gets its newest pinned release. It may be any release (the pinned ones, SUPPORTED, are
    those CI runs), a checkout's PATH or `installed` (foreign/source.py); a PATH comes back
    absolute. ValueError naming the value and what is allowed."""
    from harness.adapters.foreign.source import parse_source
    name, _, version = engine.partition("@")
    cls = kernel_class(name)
    if getattr(cls, "in_process", False):
        if version:
            raise ValueError(f"--engine {engine!r}: {name} is this checkout's own kernels; it "
                             "takes no version")
        return cls, None
    return cls, parse_source(name, cls.DIST, version).spec if version else cls.SUPPORTED[-1]


@lru_cache(maxsize=16)
def get_kernels(engine: str, device: str, install: bool = True):
    """The kernel adapter built once per (engine, device), reused across examples."""
    return build_kernels(engine, device, install)


def build_kernels(engine: str, device: str, install: bool = True):
    """A new kernel adapter: in process for specdec-kernels, else a worker over the
    release's install folder (installed first when missing and `install`), over a checkout
    (@PATH: its side packages resolved as a release's) or over this environment's package
    (@installed); `close()` stops it."""
    from harness.adapters.foreign import install as inst
    from harness.adapters.foreign.remote import RemoteKernels
    from harness.adapters.foreign.source import parse_source
    cls, version = parse(engine)
    if version is None:
        return cls(device)
    source = parse_source(cls.name, cls.DIST, version)
    if source.kind == "installed":
        return RemoteKernels(cls.name, target=cls.TARGET, paths=[], device=device, env=cls.ENV,
                             release=source.spec, user_site=True)
    if source.kind == "path":
        return inst.serve_checkout(cls, source, device, log=_stderr_log)
    if not inst.installed(cls.DIST, version):
        if not install:
            raise ValueError(f"{engine}: not installed; run `python -m harness foreign install "
                             f"{cls.DIST}=={version}`")
        inst.install(cls, version, device)
    site = str(inst.site_dir(cls.DIST, version))
    return RemoteKernels(cls.name, target=cls.TARGET, paths=[site], device=device, env=cls.ENV,
                         release=version)


def _stderr_log(line: str) -> None:
    import sys
    print(line, file=sys.stderr, flush=True)
