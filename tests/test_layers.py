"""The layers import only downwards: faultpoints < kernels < specdec < harness, with cases
and tests on top (docs/structures.md). An engine that reaches up into the harness or the
test configuration cannot be installed and used without them."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Each layer and the top-level names of this repository it must not import.
FORBIDDEN = {
    "faultpoints": {"kernels", "specdec", "harness", "cases", "tests", "conftest"},
    "kernels": {"specdec", "harness", "cases", "tests", "conftest"},
    "specdec": {"harness", "cases", "tests", "conftest"},
    "harness": {"cases", "tests", "conftest"},
}
# No exception, inside functions either: the harness finds the cases through an entry point
# (harness/runners/cases.py), never by importing them.


def _imports(path: pathlib.Path) -> tuple[set[str], set[str]]:
    """Top-level names imported at module level, and inside functions."""
    module, lazy = set(), set()

    def visit(node, in_function: bool) -> None:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        (lazy if in_function else module).update(n.split(".")[0] for n in names)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    return module, lazy


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_only_go_down(layer):
    bad = {}
    for path in sorted((ROOT / layer).rglob("*.py")):
        module, lazy = _imports(path)
        up = (module | lazy) & FORBIDDEN[layer]
        if up:
            bad[str(path.relative_to(ROOT))] = sorted(up)
    assert not bad, f"{layer} imports a layer above it"


def test_the_check_sees_imports(tmp_path):
    """Not vacuous: what specdec/bench/harness_bench.py once did (a harness and a conftest
    import inside a function) is seen, module-level imports too."""
    src = tmp_path / "mod.py"
    src.write_text("import os\nfrom harness.runners.check import check\n\n"
                   "def f():\n    import conftest\n    from . import x\n")
    assert _imports(src) == ({"os", "harness"}, {"conftest"})


def _specdec_modules(path: pathlib.Path) -> set[str]:
    """Every `specdec.*` module a file imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("specdec"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.startswith("specdec"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_tp_does_not_import_the_engine():
    """specdec/tp/ sits below the engine: a worker builds its engine through the factory rank
    0 sends it, so no engine.py -> tp/ -> engine.py circle (not even a lazy import)."""
    bad = {str(p.relative_to(ROOT)): sorted(m for m in _specdec_modules(p)
                                            if m in ("specdec.engine", "specdec.Engine"))
           for p in sorted((ROOT / "specdec" / "tp").glob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}, f"specdec/tp imports the engine: {bad}"


def test_the_circle_check_sees_a_lazy_engine_import(tmp_path):
    """Not vacuous: the worker loop's former `from specdec.engine import Engine` (inside a
    function) is seen, and so is `from specdec import Engine`."""
    src = tmp_path / "mod.py"
    src.write_text("def serve():\n    from specdec.engine import Engine\n"
                   "    from specdec import Engine as E\n")
    assert {"specdec.engine", "specdec.Engine"} <= _specdec_modules(src)


def test_harness_finds_the_cases_without_importing_them():
    """The cases the harness loads (SPECDEC_CASES, else the `specdec.cases` entry point that
    pyproject.toml declares) are this checkout's, and the declared entry point names them."""
    import tomllib

    import cases
    from harness.runners.cases import GROUP, load_cases

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[GROUP] == {"specdec": "cases:CASES"}
    assert load_cases() == cases.CASES and len(cases.CASES) > 0


def _module_graph(root: pathlib.Path, packages) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports at module level (relative imports
    resolved; imports under an `if`, such as TYPE_CHECKING, and inside functions left out:
    neither runs while the module loads)."""
    mods = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out = set()
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.Import):
                out.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                out.update(filter(None, (known(f"{base}.{a.name}") for a in node.names)))
        graph[mod] = out - {mod}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_circle():
    """No two modules of the repository's packages import each other, directly or through
    others, while they load: a circle makes import order decide which names exist."""
    graph = _module_graph(ROOT, sorted(FORBIDDEN))
    assert len(graph) > 100
    assert not _circles(graph), "import circles"


def test_the_circle_check_sees_a_circle(tmp_path):
    """Not vacuous: a three-module circle through a relative import is found, and a lazy
    import that closes a circle is not one."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("from .c import thing\n")
    (pkg / "c.py").write_text("import pkg.a\nthing = 1\n")
    (pkg / "d.py").write_text("import pkg.a\n\ndef f():\n    from pkg import d\n")
    assert _circles(_module_graph(tmp_path, ["pkg"])) == [["pkg.a", "pkg.b", "pkg.c"]]
