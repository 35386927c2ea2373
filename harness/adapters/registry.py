"""Which adapter `--engine NAME` means, and one built adapter per (engine, device, settings).

NAME is one of the built-in engines, a name registered by an installed package in the entry
point group `specdec.adapters` (pyproject: `[project.entry-points."specdec.adapters"]
mine = "my_pkg.adapter:MyAdapter"`), or `module:Class` (importable from the working
directory)."""
from __future__ import annotations

import importlib
import json
from functools import lru_cache

BUILTIN = {
    "specdec": "harness.adapters.specdec_engine:SpecdecAdapter",
    "transformers": "harness.adapters.transformers_assisted:TransformersAdapter",
}
GROUP = "specdec.adapters"


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def known_engines() -> list[str]:
    return sorted(set(BUILTIN) | set(_entry_points()))


def adapter_class(engine: str):
    """The adapter class for `engine`; ValueError naming what is allowed otherwise."""
    target = BUILTIN.get(engine) or _entry_points().get(engine) or (engine if ":" in engine
                                                                   else None)
    if target is None:
        raise ValueError(f"--engine {engine!r}: expected one of {known_engines()} (entry point "
                         f"group {GROUP!r}) or module:Class")
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--engine {engine!r}: cannot load {target} ({exc})") from None


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
