"""The documentation a newcomer follows must exist in the repository.

* Code under ``collc/`` cites papers and pages under ``docs/``, never files outside the
  repository (the reference notes, a sibling checkout, an absolute path).
* Every registered algorithm names its family page under ``docs/``, and that page exists.
* Every test, test file and module a ``docs/`` page names exists, so the pages' "which test
  reproduces it" tables cannot silently rot.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from collc.frontends.registry import Algorithm, algorithms

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
SOURCES = sorted((REPO / "collc").rglob("*.py"))
PAGES = sorted(DOCS.glob("*.md"))

MD_FILE = re.compile(r"[\w./-]*[\w-]\.md\b")
DOCS_PAGE = re.compile(r"docs/[\w.-]+\.md")
# path fragments that point at the project's notes and papers outside the repository
OUTSIDE = re.compile(r"\breference/|\bseeds/|/work/|\.\./shared\b|\bshared/(?:reference|seeds)\b")


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_there_are_pages_and_sources() -> None:
    assert len(SOURCES) > 20
    assert (DOCS / "runtime-model.md").is_file()
    assert len(PAGES) >= 8


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_sources_cite_only_pages_in_the_repository(path: Path) -> None:
    bad: list[str] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if OUTSIDE.search(line):
            bad.append(f"{n}: {line.strip()}")
        for cited in MD_FILE.findall(line):
            if not DOCS_PAGE.fullmatch(cited):
                bad.append(f"{n}: cites {cited}, which is not a page under docs/")
            elif not (REPO / cited).is_file():
                bad.append(f"{n}: cites {cited}, which does not exist")
    assert not bad, f"{_rel(path)}:\n" + "\n".join(bad)


def test_the_citation_check_catches_outside_paths() -> None:
    samples = ["(swing.md 1.3)", "(reference/multitree.md section 3)", "see ../shared/reference/x.md",
               "(docs/nope.md)"]
    for text in samples:
        cited = MD_FILE.findall(text)
        assert OUTSIDE.search(text) or any(not DOCS_PAGE.fullmatch(c) or not (REPO / c).is_file()
                                           for c in cited), text
    assert not OUTSIDE.search("(docs/swing.md; Swing NSDI'24 section 3.1.1)")
    assert [c for c in MD_FILE.findall("(docs/swing.md)") if DOCS_PAGE.fullmatch(c)] == ["docs/swing.md"]


def family_page(module: str) -> str | None:
    """The first docs page the module's docstring names (its family page)."""
    doc = sys.modules[module].__doc__ or ""
    found = DOCS_PAGE.search(doc)
    return found.group(0) if found else None


@pytest.mark.parametrize("alg", algorithms(), ids=lambda a: a.name)
def test_every_algorithm_names_an_existing_family_page(alg: Algorithm) -> None:
    page = family_page(alg.build.__module__)
    assert page is not None, f"{alg.name}: the docstring of {alg.build.__module__} names no docs/*.md page"
    assert (REPO / page).is_file(), f"{alg.name}: {page} does not exist"
    text = (REPO / page).read_text()
    assert f"`{alg.name}`" in text or alg.name in text.lower(), f"{page} never mentions {alg.name}"


def _registers(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "register"
               for n in ast.walk(tree))


def test_every_module_that_registers_an_algorithm_names_a_family_page() -> None:
    """Read from the source, so a module the registry failed to import is caught too."""
    registering = 0
    for path in sorted((REPO / "collc").rglob("*.py")):
        tree = ast.parse(path.read_text())
        if not _registers(tree):
            continue
        registering += 1
        page = DOCS_PAGE.search(ast.get_docstring(tree) or "")
        assert page and (REPO / page.group(0)).is_file(), f"{_rel(path)} names no existing docs/ page"
    assert registering >= 10


def _test_names() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


TEST_NAME = re.compile(r"(?<![\w/])test_\w+(?!\w|\.py)")
REPO_PATH = re.compile(r"(?<![\w/.-])((?:collc|tests|scripts|benchmarks|docs|schedules)/[\w./-]*\w)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_name_only_tests_and_files_that_exist(page: Path) -> None:
    text = page.read_text()
    known = _test_names()
    missing = sorted({t for t in TEST_NAME.findall(text) if t not in known})
    assert not missing, f"{page.name} names tests that do not exist: {missing}"
    paths = sorted({p for p in REPO_PATH.findall(text) if not (REPO / p).exists()})
    assert not paths, f"{page.name} names files that do not exist: {paths}"
    for test_file, test in re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", text):
        assert re.search(rf"^def {test}\(", (REPO / test_file).read_text(), re.MULTILINE), \
            f"{page.name}: {test} is not in {test_file}"
