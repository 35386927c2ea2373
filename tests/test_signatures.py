"""Call sites say what they pass: in the engine, the harness, the cases and the benches, a
function of more than five parameters takes at most its first (what it acts on) by position,
the rest by keyword; SpecConfig and ForwardBatch are keyword-only. (`SpecConfig(1, 3, 4)` and
a 15-argument positional call once read as numbers and slots, not as what they meant.)

Left out: kernels/ (each kernel and its torch reference keep the signature of the SGLang
kernel they mirror, docs/contract.md section 5, so that harness/adapters drives ours and
SGLang's alike), Triton `@jit` functions (launched positionally by Triton), pytest tests and
fixtures (pytest calls them by name), tests/ (helpers that mirror those kernel signatures)."""
from __future__ import annotations

import ast
import dataclasses
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("specdec", "harness", "cases", "bench")
MAX_PARAMS = 5


def _positional_heavy(path: pathlib.Path, rel: str) -> list[str]:
    """`rel:line name` of each function with more than MAX_PARAMS parameters that takes more
    than its first by position."""
    bad = []
    for fn in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        decorators = " ".join(ast.unparse(d) for d in fn.decorator_list)
        if "jit" in decorators or "fixture" in decorators or fn.name.startswith("test_"):
            continue
        a = fn.args
        positional = [x.arg for x in a.posonlyargs + a.args if x.arg not in ("self", "cls")]
        if len(positional) + len(a.kwonlyargs) > MAX_PARAMS and len(positional) > 1:
            bad.append(f"{rel}:{fn.lineno} {fn.name}({', '.join(positional)}, ...)")
    return bad


def _scan(root: pathlib.Path) -> list[str]:
    bad = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = str(path.relative_to(root))
            if not rel.startswith("bench/results/"):
                bad += _positional_heavy(path, rel)
    return bad


def test_long_signatures_are_keyword_only():
    bad = _scan(ROOT)
    assert not bad, "functions of more than five parameters taking more than one by " \
                    "position:\n" + "\n".join(bad)


def test_spec_config_and_forward_batch_are_keyword_only():
    from specdec.attention.forward_batch import ForwardBatch
    from specdec.config import SpecConfig
    for cls in (SpecConfig, ForwardBatch):
        assert all(f.kw_only for f in dataclasses.fields(cls) if f.init), cls.__name__


def test_the_scan_sees_a_positional_signature(tmp_path):
    """Not vacuous: a six-parameter function taking two by position is named, with its
    line; one taking only its first by position, a Triton kernel and a test are not."""
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "m.py").write_text(
        "def measure(pair, prompts, a=1, b=2, c=3, d=4):\n    pass\n\n"
        "def fine(pair, *, prompts, a=1, b=2, c=3, d=4):\n    pass\n\n"
        "@triton.jit\ndef _k(a, b, c, d, e, f):\n    pass\n\n"
        "def test_x(a, b, c, d, e, f):\n    pass\n")
    assert _scan(tmp_path) == ["harness/m.py:1 measure(pair, prompts, a, b, c, d, ...)"]
