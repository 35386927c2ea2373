"""Every law is declared once (`LAW = Law(...)` in its module) and reachable from everything
that runs laws: pytest (tests/test_properties.py over suite(), the black-box laws in
harness/runners/test_engine_laws.py, the kernel laws in test_kernel_laws.py), `python -m
harness check` (white box, and the kernel laws on specdec-kernels) and `check --engine`
(black box; kernel laws with a kernel engine), and the docs index; and every law names negative controls that exist
(a test that plants a mistake, or a zoo case of that law)."""
from __future__ import annotations

import ast
import pathlib

import pytest

from cases import CASES
from harness.laws import index
from harness.laws.declaration import Law
from harness.runners import check, engine_check, engine_suite, kernel_suite, suite

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAWS = index.laws()


def _defines_law(path: pathlib.Path) -> bool:
    """A module that looks like a law: a white-box property or a black-box check."""
    tree = ast.parse(path.read_text())
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return any(f.startswith("prop_") for f in funcs) or "check" in funcs


def test_every_law_module_is_declared():
    declared = {(law.prop or law.check).__module__ for law in LAWS.values()}
    modules = {f"harness.laws.{p.stem}" for p in (ROOT / "harness/laws").glob("*.py")
               if _defines_law(p)}
    assert modules - declared == set(), "a law module without LAW = Law(...)"


def test_every_law_is_reachable_from_pytest_and_check():
    white, black, kern = index.white_box(), index.black_box(), index.kernel()
    assert set(white) | set(black) | set(kern) == set(LAWS)
    assert len(white) + len(black) + len(kern) == len(LAWS)
    assert set(kernel_suite.KERNEL_LAWS) == set(kern)            # test_kernel_laws, check
    assert {e.prop for e in suite.suite()} == set(white)        # tests/test_properties.py
    assert set(check.LAWS) == set(white)                         # harness check
    assert set(engine_suite.ENGINE_LAWS) == set(black)           # test_engine_laws, --engine
    assert engine_check.ENGINE_LAWS is engine_suite.ENGINE_LAWS


@pytest.mark.parametrize("name", list(LAWS))
def test_every_control_exists(name):
    law = LAWS[name]
    for control in law.controls:
        if control.startswith("cases/"):
            fault = control.removeprefix("cases/")
            assert fault in CASES, f"{name}: no zoo case {fault}"
            assert CASES[fault].prop == name, f"{name}: {fault} is a case of {CASES[fault].prop}"
            continue
        path, _, test = control.partition("::")
        tree = ast.parse((ROOT / path).read_text())
        tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert test in tests, f"{name}: no test {test} in {path}"


def test_docs_index_is_generated_from_the_declarations():
    assert (ROOT / "docs/laws.md").read_text() == index.markdown() + "\n", (
        "docs/laws.md is stale: python -m harness laws > docs/laws.md")


def test_contract_zoo_tables_are_generated_from_the_registry():
    """Section 9 holds the registry's fault descriptions, never a hand copy; the control: a
    description edited by hand in the contract is seen as stale."""
    from harness.runners import zoo_table
    text = (ROOT / "docs/contract.md").read_text()
    assert zoo_table.rewritten(text) == text, (
        "docs/contract.md section 9 is stale: python -m harness zoo-table")
    edited = text.replace("| bonus_stride_ndt | SGLang #26866 | ",
                          "| bonus_stride_ndt | SGLang #26866 | (hand-edited) ")
    assert edited != text and zoo_table.rewritten(edited) == text


def test_a_law_without_a_control_is_refused():
    with pytest.raises(ValueError, match="no negative control"):
        Law(name="x", summary="", controls=(), rank=0, check=lambda a, c: None,
            cases=lambda e, d: None)
    with pytest.raises(ValueError, match="either prop"):
        Law(name="x", summary="", controls=("cases/x",), rank=0)


def test_the_module_finder_sees_an_undeclared_law(tmp_path):
    """Not vacuous: a module with a property and no declaration is seen as a law module."""
    mod = tmp_path / "new_law.py"
    mod.write_text("def prop_new_law(cfg, device=None):\n    pass\n")
    assert _defines_law(mod)
    (tmp_path / "helper.py").write_text("def margins(x):\n    return x\n")
    assert not _defines_law(tmp_path / "helper.py")
