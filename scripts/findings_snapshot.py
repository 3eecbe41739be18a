"""Print what the checker finds on every golden file, prebuilt schedule and corpus file, as JSON.

Usage: ``python scripts/findings_snapshot.py [--data-check auto|exact|numeric] > out.json``

Each file is checked in every dialect (executor, rccl, legacy), whether or not it targets
it, so that a refactoring of the checker can be diffed against a saved snapshot: the
output maps ``"<relative path> | <dialect>"`` to the sorted list of findings
(``severity code: message``).  The real-world corpus is read from ``../shared/msccl-corpus``
(relative to the repository root) and skipped, with a message on stderr, when absent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from collc.backends.msccl_xml import read_xml  # noqa: E402
from collc.check import check_parsed  # noqa: E402
from collc.limits import Dialect  # noqa: E402
from collc.errors import CollcError  # noqa: E402

CORPUS = (REPO / ".." / "shared" / "msccl-corpus").resolve()


def files() -> list[tuple[str, Path]]:
    out = [(p.relative_to(REPO).as_posix(), p) for p in sorted((REPO / "tests" / "golden").rglob("*.xml"))]
    out += [(p.relative_to(REPO).as_posix(), p) for p in sorted((REPO / "schedules").rglob("*.xml"))]
    if CORPUS.is_dir():
        out += [("msccl-corpus/" + p.relative_to(CORPUS).as_posix(), p) for p in sorted(CORPUS.rglob("*.xml"))]
    else:
        print(f"corpus not found at {CORPUS}: skipped", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-check", default="auto", choices=("auto", "exact", "numeric"))
    args = ap.parse_args()
    snapshot: dict[str, list[str]] = {}
    for rel, path in files():
        try:
            parsed = read_xml(path)
        except CollcError as exc:
            snapshot[f"{rel} | read"] = [f"error read: {exc}"]
            continue
        for dialect in Dialect:
            try:
                rep = check_parsed(parsed, dialect, data_check=args.data_check)
                found = [f"{f.severity} {f.code}: {f.message}" for f in rep.findings]
            except CollcError as exc:
                found = [f"raised {type(exc).__name__}: {exc}"]
            snapshot[f"{rel} | {dialect.value}"] = sorted(found)
    json.dump(snapshot, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
