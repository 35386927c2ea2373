"""Where a foreign engine's code comes from, as `--engine NAME@WHAT` names it:

- `@0.5.23`: a published release, pip-installed (--no-deps) into a folder of its own with the
  side packages its import graph needs (install.py);
- `@PATH`: a source checkout (or an unpacked release) at PATH, the package found at
  PATH/<package> or PATH/python/<package> (SGLang's layout); its side packages go into a
  folder of their own, keyed by the checkout's path, and the checkout's files are imported
  as they are on disk: the change an upstream developer wants to merge, gated before it is;
- `@installed`: the package importable in this very environment, side packages and all.

A PATH is told from a version by its form: it holds a path separator or starts with "." or
"~" (a release is never spelled so)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

INSTALLED = "installed"


@dataclass(frozen=True)
class Source:
    kind: str       # "release" | "path" | "installed"
    spec: str       # what follows the "@": the release, the absolute path, "installed"
    root: str = ""  # path: the folder holding the package (first on the worker's path)


def is_path(text: str) -> bool:
    return os.sep in text or text.startswith((".", "~"))


def import_root(package: str, path: str) -> Path:
    """The folder to put on the path so that `import package` loads the checkout's copy;
    ValueError naming the path and the layouts looked for."""
    base = Path(path).expanduser().resolve()
    for root in (base, base / "python"):
        if (root / package / "__init__.py").is_file():
            return root
    raise ValueError(f"{path!r}: no {package} package there: expected "
                     f"{base / package / '__init__.py'} (an unpacked release, vLLM's checkout) "
                     f"or {base / 'python' / package / '__init__.py'} (SGLang's checkout)")


def parse_source(name: str, package: str, text: str) -> Source:
    """`text` (what follows NAME@) as a Source; ValueError naming it when it cannot be one."""
    if text == INSTALLED:
        if importlib.util.find_spec(package) is None:
            raise ValueError(f"--engine {name}@{INSTALLED}: no {package!r} package is "
                             "importable in this environment; install it, or name a release "
                             f"({name}@VERSION) or a checkout ({name}@PATH)")
        return Source("installed", INSTALLED)
    if is_path(text):
        root = import_root(package, text)
        return Source("path", str(Path(text).expanduser().resolve()), str(root))
    return Source("release", text)


def checkout_key(source: Source) -> str:
    """The side-package folder's name part for a checkout: stable per path."""
    return "checkout-" + hashlib.sha1(source.spec.encode()).hexdigest()[:12]
