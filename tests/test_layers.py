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
    """Module -> the modules of `packages` it imports, at module level or inside functions
    (relative imports resolved). Only `if TYPE_CHECKING:` blocks are left out: they never run.
    A lazy import counts: it still ties the two modules together, and moving it into a
    function only hides the circle from the import order."""
    mods = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    def nodes(tree):
        """Every import node but those under `if TYPE_CHECKING:`."""
        todo = [tree]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                todo.extend(node.orelse)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            todo.extend(ast.iter_child_nodes(node))

    graph = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out = set()
        for node in nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(filter(None, (known(a.name) for a in node.names)))
            else:
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
    others, at module level or inside functions: a circle makes import order decide which
    names exist, and a lazy one only hides it."""
    graph = _module_graph(ROOT, sorted(FORBIDDEN))
    assert len(graph) > 100
    assert not _circles(graph), "import circles"


def test_the_circle_check_sees_a_circle(tmp_path):
    """Not vacuous: a three-module circle through a relative import is found, and so is a
    circle closed by an import inside a function (zoo.py and zoo_jobs.py once were one); an
    import under `if TYPE_CHECKING:` closes none."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("from .c import thing\n")
    (pkg / "c.py").write_text("import pkg.a\nthing = 1\n")
    (pkg / "d.py").write_text("import pkg.e\n")
    (pkg / "e.py").write_text("def f():\n    from pkg import d\n")
    (pkg / "f.py").write_text("from typing import TYPE_CHECKING\nimport pkg.g\n")
    (pkg / "g.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    import pkg.f\n")
    assert sorted(_circles(_module_graph(tmp_path, ["pkg"]))) == [["pkg.a", "pkg.b", "pkg.c"],
                                                                 ["pkg.d", "pkg.e"]]


# The harness's own floors, bottom up (harness/__init__.py): a subpackage imports only its own
# floor and those below, inside functions too. Files directly under harness/ (__main__.py) are
# the top floor.
HARNESS_FLOORS = ["base", "references", "adapters", "strategies", "laws", "gate", "runners"]


def _harness_floor(module: str) -> int:
    parts = module.split(".")
    if len(parts) < 3 and not (len(parts) == 2 and parts[1] in HARNESS_FLOORS):
        return len(HARNESS_FLOORS)
    return HARNESS_FLOORS.index(parts[1])


def _upward(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return {m: sorted(t for t in out if t.startswith("harness.")
                      and _harness_floor(t) > _harness_floor(m))
            for m, out in graph.items() if m.startswith("harness.")}


def test_harness_floors_only_go_down():
    """No arrow inside the harness runs back up: strategies, adapters and the gate reach no
    law or runner (Progress and OracleFailure live in base/), at module level or inside
    functions."""
    graph = _module_graph(ROOT, ["harness"])
    assert set(HARNESS_FLOORS) == {p.name for p in (ROOT / "harness").iterdir()
                                   if (p / "__init__.py").exists()}
    bad = {m: up for m, up in _upward(graph).items() if up}
    assert not bad, f"harness modules importing a floor above their own: {bad}"


def test_the_floor_check_sees_a_lazy_upward_import(tmp_path):
    """Not vacuous: a strategy that imports a law's Progress inside a function is flagged, as
    harness/strategies/runs.py's import of harness.laws.liveness once was."""
    for floor in HARNESS_FLOORS:
        (tmp_path / "harness" / floor).mkdir(parents=True)
        (tmp_path / "harness" / floor / "__init__.py").write_text("")
    (tmp_path / "harness" / "__init__.py").write_text("")
    (tmp_path / "harness" / "laws" / "liveness.py").write_text("class Progress: pass\n")
    (tmp_path / "harness" / "strategies" / "runs.py").write_text(
        "def serve():\n    from harness.laws.liveness import Progress\n")
    (tmp_path / "harness" / "runners" / "check.py").write_text("import harness.strategies.runs\n")
    up = _upward(_module_graph(tmp_path, ["harness"]))
    assert up["harness.strategies.runs"] == ["harness.laws.liveness"]
    assert up["harness.runners.check"] == []
