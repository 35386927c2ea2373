"""Contract section 9's tables of fault classes, generated from the fault registry
(faultpoints.REGISTRY: name, source, mistake, zoo) so that the contract never holds a hand
copy of them: `python -m harness zoo-table` rewrites them in docs/contract.md between its
markers; tests/test_law_declarations.py fails while they are stale."""
from __future__ import annotations

from pathlib import Path

from faultpoints import REGISTRY

BEGIN = "<!-- zoo-table: generated from faultpoints.REGISTRY by `python -m harness zoo-table` -->"
END = "<!-- end zoo-table -->"
HEADINGS = {1: "The first zoo:",
            2: "The second zoo (the 2025-2026 classes; several need the structures of sections "
               "10-13):"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    out = []
    for zoo, heading in HEADINGS.items():
        out += [heading, "", "| fault | source | the mistake |", "| --- | --- | --- |"]
        out += [f"| {f.name} | {_cell(f.source)} | {_cell(f.mistake)} |"
                for f in REGISTRY.values() if f.zoo == zoo]
        out.append("")
    return "\n".join(out).rstrip("\n")


def rewritten(text: str) -> str:
    """`text` (the contract) with the generated tables between the markers."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"docs/contract.md: the markers {BEGIN!r} ... {END!r} are missing")
    return f"{head}{BEGIN}\n{markdown()}\n{END}{tail}"


def write(path: Path) -> bool:
    """Rewrite the tables in `path`; whether anything changed."""
    text = path.read_text()
    new = rewritten(text)
    if new != text:
        path.write_text(new)
    return new != text
