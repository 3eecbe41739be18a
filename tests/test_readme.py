"""docs/algorithms.md's algorithm table is generated from the registry and must not go stale.

Regenerate with ``python scripts/regen_golden.py`` (or ``scripts/regen_readme.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "regen_readme.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("regen_readme", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


README = _module()


def test_readme_algorithm_table_is_current() -> None:
    [(path, text)] = README.render().items()
    assert path.read_text() == text, "docs/algorithms.md's algorithm table is stale; run scripts/regen_golden.py"


def test_table_has_one_row_per_algorithm_with_its_docs_page() -> None:
    from collc.frontends.registry import algorithms
    rows = [line for line in README.table().splitlines()[2:]]
    assert [r.split("|")[1].strip().strip("`") for r in rows] == [a.name for a in algorithms()]
    for alg, row in zip(algorithms(), rows):
        page = README.docs_page(alg)
        assert page is not None, alg.name
        name = page.removeprefix("docs/")       # linked relative to docs/algorithms.md
        assert f"[{name}]({name})" in row and (README.PAGE.parent / name).is_file(), alg.name


def test_render_refuses_a_readme_without_markers() -> None:
    with pytest.raises(SystemExit, match="lacks the markers"):
        README.render("# no table here\n")


def test_render_replaces_only_between_the_markers() -> None:
    text = f"before\n{README.BEGIN}\nold table\n{README.END}\nafter\n"
    [(_, out)] = README.render(text).items()
    assert out == f"before\n{README.BEGIN}\n{README.table()}{README.END}\nafter\n"
