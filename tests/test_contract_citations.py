"""The contract stands in the repository (docs/contract.md): every "section N" the code and
docs cite is a numbered section of it, every "oracle N" one of its oracles, every `*.md` they
name and every relative markdown link of README.md and docs/ exists in the checkout, and
nothing cites the spec directory that once lay beside the checkout. Negative controls: the
same checkers, run on synthetic text, report a missing section, a missing oracle, a missing
file, a broken link and the old path."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "docs/contract.md"
SKIP = ("bench/results/",)
OLD_SPEC = "shared" + "/spec/"  # spelled in two parts so this file does not cite it

_NUMS = r"(\d+)((?:\s*(?:,|,?\s*and|,?\s*or|-|–|to)\s*\d+)*)"
# "section 4", "sections 5, 6 and 7", "sections 10-13", "§4"; a line break (and a comment
# leader) may fall between the word and the number.
SECTION_RE = re.compile(r"(?:\bsections?|§)\s*(?:#\s*)?" + _NUMS, re.I)
ORACLE_RE = re.compile(r"\boracles?\s+(?:#\s*)?" + _NUMS, re.I)
# "X.md section N" / "section N of X.md" cites another document (not the contract).
OTHER_DOC_RE = re.compile(r"[\w./-]+\.md$|\b(?:PEP|RFC)\s*\d*$", re.I)
OTHER_DOC_AFTER_RE = re.compile(r"\s+of\s+(?:`)?([\w./-]+\.md)")
MD_NAME_RE = re.compile(r"[\w./-]*\w\.md\b")
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE_RE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def repo_files() -> list[str]:
    """Tracked and not-ignored untracked .py / .md files, bench/results/ left out, and hidden
    directories (.ci/ aside: a local .venv or a scratch copy of an older tree is not ours,
    whether or not this checkout's ignore rules name it)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names = out.split("\n")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk it
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")]
    return sorted({n for n in names if n.endswith((".py", ".md")) and not n.startswith(SKIP)
                   and not any((part.startswith(".") and part != ".ci")
                               or part.endswith(".egg-info") for part in n.split("/")[:-1])
                   and (ROOT / n).is_file()})


def _numbers(m: re.Match) -> list[int]:
    """The numbers one citation names; a range N-M names N..M."""
    first, rest = int(m.group(1)), m.group(2)
    out = [first]
    for sep, num in re.findall(r"\s*(,|,?\s*and|,?\s*or|-|–|to)\s*(\d+)", rest):
        n = int(num)
        if sep.strip() in ("-", "–", "to") and n > out[-1]:
            out.extend(range(out[-1] + 1, n + 1))
        else:
            out.append(n)
    return out


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def contract_numbers(text: str) -> tuple[set[int], set[int]]:
    """The contract's numbered sections (`## N. Title`) and its oracles (`N. ` entries under
    `## Oracles`)."""
    sections = {int(n) for n in re.findall(r"^## (\d+)\. \S", text, re.M)}
    oracles: set[int] = set()
    block = re.search(r"^## Oracles\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if block:
        oracles = {int(n) for n in re.findall(r"^(\d+)\. \S", block.group(1), re.M)}
    return sections, oracles


def bad_citations(name: str, text: str, sections: set[int], oracles: set[int]) -> list[str]:
    """file:line for every "section N" that is not a contract section and every "oracle N"
    that is not a contract oracle."""
    problems = []
    for m in SECTION_RE.finditer(text):
        before = OTHER_DOC_RE.search(text[max(0, m.start() - 60):m.start()].rstrip(" `'s"))
        after = OTHER_DOC_AFTER_RE.match(text, m.end())
        doc = (before.group(0) if before else "") or (after.group(1) if after else "")
        if doc and not doc.endswith(CONTRACT.rsplit("/", 1)[1]):
            continue  # a section of another document
        for n in _numbers(m):
            if n not in sections:
                problems.append(f"{name}:{_line(text, m.start())}: cites section {n}, which "
                                f"{CONTRACT} does not have ({m.group(0)!r})")
    for m in ORACLE_RE.finditer(text):
        for n in _numbers(m):
            if n not in oracles:
                problems.append(f"{name}:{_line(text, m.start())}: cites oracle {n}, which "
                                f"{CONTRACT} does not list ({m.group(0)!r})")
    return problems


def outside_references(name: str, text: str, root: Path, basenames: set[str]) -> list[str]:
    """file:line for every mention of the old spec directory and every `*.md` named that is
    no file of the checkout (by path from the root or from the file, or by file name)."""
    problems = []
    for i, line in enumerate(text.splitlines(), 1):
        if OLD_SPEC in line:
            problems.append(f"{name}:{i}: points outside the checkout ({OLD_SPEC}); "
                            f"cite {CONTRACT}")
        for md in MD_NAME_RE.findall(line):
            if OLD_SPEC in md:
                continue  # reported above
            here = (root / name).parent / md
            if not ((root / md).exists() or here.exists() or md in basenames):
                problems.append(f"{name}:{i}: names {md}, which is not in the checkout")
    return problems


def _slug(heading: str) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def broken_links(name: str, text: str, root: Path) -> list[str]:
    """file:line for every relative markdown link whose file (or #anchor) does not exist.
    Links inside fenced code blocks are skipped; URLs are not followed."""
    blanked = FENCE_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    problems = []
    for m in LINK_RE.finditer(blanked):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue
        path, _, anchor = target.partition("#")
        dest = ((root / name).parent / path).resolve() if path else root / name
        where = f"{name}:{_line(blanked, m.start())}"
        if not dest.exists():
            problems.append(f"{where}: link to {target}: no such file")
        elif anchor and dest.is_file() and dest.suffix == ".md":
            slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}
            if anchor.lower() not in slugs:
                problems.append(f"{where}: link to {target}: no such heading")
    return problems


def _read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8", errors="replace")


def test_contract_has_sections_and_oracles():
    sections, oracles = contract_numbers(_read(CONTRACT))
    assert sections == set(range(1, 14)), sorted(sections)
    assert oracles == set(range(1, 11)), sorted(oracles)


def test_citations_name_contract_sections():
    sections, oracles = contract_numbers(_read(CONTRACT))
    files = repo_files()
    assert CONTRACT in files and len(files) > 50
    problems = [p for f in files for p in bad_citations(f, _read(f), sections, oracles)]
    assert not problems, "\n".join(problems)


def test_nothing_points_outside_the_checkout():
    files = repo_files()
    basenames = {os.path.basename(f) for f in files}
    problems = [p for f in files if f != "tests/test_contract_citations.py"
                for p in outside_references(f, _read(f), ROOT, basenames)]
    assert not problems, "\n".join(problems)


def test_zoo_tables_list_the_registry():
    """Section 9's tables name exactly the faults of faultpoints.REGISTRY, with their sources."""
    from faultpoints import REGISTRY
    text = _read(CONTRACT)
    zoo = re.search(r"^## 9\. .*?(?=^## )", text, re.M | re.S).group(0)
    rows = [(n, src) for n, src in re.findall(r"^\| ([a-z0-9_]+) \| ([^|]+) \|", zoo, re.M)
            if n != "fault"]  # the header rows
    assert sorted(name for name, _ in rows) == sorted(REGISTRY), "section 9 vs REGISTRY"
    wrong = [n for n, src in rows if src.strip() != REGISTRY[n].source]
    assert not wrong, f"sources differ from REGISTRY: {wrong}"


def test_markdown_links_resolve():
    docs = [f for f in repo_files() if f == "README.md" or (f.startswith("docs/")
                                                            and f.endswith(".md"))]
    assert "README.md" in docs and CONTRACT in docs
    problems = [p for f in docs for p in broken_links(f, _read(f), ROOT)]
    assert not problems, "\n".join(problems)


def test_checkers_report_what_they_should(tmp_path):
    """Negative controls (the checkers are not vacuous) and the citation forms they read."""
    sections, oracles = set(range(1, 14)), set(range(1, 11))
    sec, para = "sec" + "tion", "\u00a7"  # so that this file cites nothing itself
    text = (f"ok: {sec}s 2 and 3; {sec}s 5, 6 and 7; {sec}s 10-13; {sec}\n    # 12;"
            f" harness.md {sec} 40; {sec} 30 of harness.md; contract.md {sec} 15.\n"
            f"bad: {sec} 14 here.\nbad: see {para}0 and {sec}s 4 and\n99.\n"
            f"bad: ora" "cle 11; ok: ora" "cle 6, ora" "cles 1 and 2\n")
    got = bad_citations("x.py", text, sections, oracles)
    found = [(int(line), kind, int(n))
             for line, kind, n in (re.match(r"x\.py:(\d+): cites (\w+) (\d+)", p).groups()
                                   for p in got)]
    assert found == [(2, sec, 15), (3, sec, 14), (4, sec, 0), (4, sec, 99),
                     (6, "ora" "cle", 11)], got

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# Here\n\n## Some Heading\n")
    md = ("# Links\n[ok](here.md) [ok](here.md#some-heading) [ok](#links)\n"
          "[ok](https://x.invalid/a)\n[bad](missing/nowhere.md)\n[bad](here.md#no-such-heading)\n"
          "```\n[fenced, skipped](nowhere.md)\n```\n")
    (tmp_path / "docs" / "t.md").write_text(md)
    got = broken_links("docs/t.md", md, tmp_path)
    assert [p.split(": link")[0] for p in got] == ["docs/t.md:4", "docs/t.md:5"], got

    text = (f"see {OLD_SPEC}conventions.md and nowhere.md\n"
            "and docs/here.md, here.md, bugs-2026.md\n")
    got = outside_references("docs/t.md", text, tmp_path, {"here.md", "t.md"})
    assert len(got) == 3 and "docs/t.md:1: points outside" in got[0] \
        and "docs/t.md:1: names nowhere.md" in got[1] \
        and "docs/t.md:2: names bugs-2026.md" in got[2], got
