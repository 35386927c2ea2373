"""Every declared law, found by reading the modules of this package: a module that ends with
`LAW = Law(...)` (harness/laws/declaration.py) is a law; nothing else lists them. The runners
and the docs index (docs/laws.md, `python -m harness laws`) read this."""
from __future__ import annotations

import functools
import importlib
import pkgutil

from harness.laws.declaration import Law


@functools.cache
def laws() -> dict[str, Law]:
    """name -> declaration, in ascending rank."""
    import harness.laws as package
    found = []
    for mod in pkgutil.iter_modules(package.__path__):
        law = getattr(importlib.import_module(f"{package.__name__}.{mod.name}"), "LAW", None)
        if isinstance(law, Law):
            found.append(law)
    names = [law.name for law in found]
    if len(set(names)) != len(names):
        raise ValueError(f"a law name is declared twice: {sorted(names)}")
    return {law.name: law for law in sorted(found, key=lambda law: (law.rank, law.name))}


def white_box() -> dict[str, Law]:
    return {n: law for n, law in laws().items() if law.prop is not None}


def black_box() -> dict[str, Law]:
    return {n: law for n, law in laws().items() if law.black_box}


def kernel() -> dict[str, Law]:
    """The kernel laws (door="kernels"): over any kernel adapter's components."""
    return {n: law for n, law in laws().items() if law.kernel}


def markdown() -> str:
    """The docs index (docs/laws.md), generated: `python -m harness laws > docs/laws.md`."""
    lines = ["# The laws", "",
             "Generated from the declarations (`LAW = Law(...)` in each `harness/laws/` module) "
             "by `python -m harness laws > docs/laws.md`; `tests/test_law_declarations.py` "
             "fails when this file is out of date. How to add one: "
             "[adding-a-law.md](adding-a-law.md).", ""]
    for title, group in (("White box: over specdec's configuration space", white_box()),
                         ("Black box: over any engine adapter", black_box()),
                         ("Kernel: over any kernel adapter's components (specdec's, SGLang's, "
                          "vLLM's own kernels)", kernel())):
        lines += [f"## {title}", "", "| law | what must hold | negative controls |",
                  "| --- | --- | --- |"]
        for law in group.values():
            module = law.prop.__module__ if law.prop else law.check.__module__
            path = module.replace(".", "/") + ".py"
            controls = "<br>".join(f"`{c}`" for c in law.controls)
            needs = (f" Needs: {', '.join(sorted(getattr(o, 'value', o) for o in law.needs))}."
                     if law.needs else "")
            lines.append(f"| [`{law.name}`](../{path}) | {law.summary}{needs} | {controls} |")
        lines.append("")
    return "\n".join(lines)
