#!/usr/bin/env python3
"""Regenerate the algorithm table of docs/algorithms.md from the registry.

    python scripts/regen_readme.py          # rewrite the table in docs/algorithms.md
    python scripts/regen_readme.py --check  # exit 1 if the table is stale (what the test does)

(The script keeps its name from when the table sat in README.md; the README links to the page.)

``python scripts/regen_golden.py`` runs this too, so one command regenerates every
generated file.  The table sits between ``<!-- algorithms:begin -->`` and
``<!-- algorithms:end -->``; everything outside the markers is left alone.  Its
columns follow ``collc list algorithms``: name, collectives (sorted), summary,
topologies, parameters with defaults, and the family's page under ``docs/`` (the
first ``docs/*.md`` that the algorithm's module docstring names), linked relative to
``docs/algorithms.md``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))   # this checkout's collc, not an installed one

from collc.driver import sync_files  # noqa: E402
from collc.frontends.registry import Algorithm, algorithms  # noqa: E402

PAGE = REPO / "docs" / "algorithms.md"
BEGIN = "<!-- algorithms:begin -->"
END = "<!-- algorithms:end -->"
DOCS_PAGE = re.compile(r"docs/[\w.-]+\.md")


def docs_page(alg: Algorithm) -> str | None:
    """The family page the algorithm's module docstring names first, or None."""
    doc = sys.modules[alg.build.__module__].__doc__ or ""
    found = DOCS_PAGE.search(doc)
    return found.group(0) if found else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def table() -> str:
    """The Markdown table, one row per registered algorithm in `collc list` order."""
    rows = ["| name | collectives | summary | topologies | parameters (default) | docs |",
            "|---|---|---|---|---|---|"]
    for alg in algorithms():
        colls = ", ".join(sorted(k.value for k in alg.collectives))
        params = ", ".join(f"`{p.name}={p.default!r}`" for p in alg.params)
        page = docs_page(alg)
        name = page.removeprefix("docs/") if page else ""
        link = f"[{name}]({name})" if page else ""
        rows.append(f"| `{alg.name}` | {colls} | {_cell(alg.summary)} | {_cell(alg.topologies)} | "
                    f"{_cell(params)} | {link} |")
    return "\n".join(rows) + "\n"


def render(text: str | None = None) -> dict[Path, str]:
    """docs/algorithms.md with the table between the markers replaced; SystemExit if a marker is missing."""
    text = PAGE.read_text() if text is None else text
    head, sep1, rest = text.partition(BEGIN + "\n")
    _, sep2, tail = rest.partition(END)
    if not sep1 or not sep2:
        raise SystemExit(f"docs/algorithms.md lacks the markers {BEGIN} / {END} (each on its own line)")
    return {PAGE: head + BEGIN + "\n" + table() + END + tail}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    return sync_files(render(), args.check, REPO)


if __name__ == "__main__":
    sys.exit(main())
