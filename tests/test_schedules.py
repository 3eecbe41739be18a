"""The prebuilt schedules/ are current and each passes `collc check` in its dialect."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collc.backends.msccl_xml import read_xml
from collc.compiler.limits import Dialect
from collc.check import check_parsed

REPO = Path(__file__).resolve().parent.parent
FILES = sorted((REPO / "schedules").rglob("*.xml"))


def test_there_are_schedules() -> None:
    assert len(FILES) >= 8


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_schedule_passes_check(path: Path) -> None:
    dialect = Dialect(path.parent.name.rsplit("-", 1)[1])
    report = check_parsed(read_xml(path), dialect)
    assert report.ok, [f.message for f in report.errors()]


def test_algorithm_dirs_hold_only_xml() -> None:
    # the runtimes parse every file of MSCCL_ALGO_DIR: a stray README breaks loading
    for d in (REPO / "schedules").iterdir():
        if d.is_dir():
            assert all(f.suffix == ".xml" for f in d.iterdir()), d


def test_schedules_are_current() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_schedules.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_windows_do_not_overlap_within_a_directory() -> None:
    # one MSCCL_ALGO_DIR must select exactly one file per collective, placement and size
    for d in (REPO / "schedules").iterdir():
        if not d.is_dir():
            continue
        seen: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for f in sorted(d.glob("*.xml")):
            p = read_xml(f).program
            lo, hi = p.min_bytes or 0, p.max_bytes or float("inf")
            for place, on in (("inplace", p.inplace), ("outofplace", p.outofplace)):
                if on:
                    windows = seen.setdefault((p.coll, place), [])
                    assert all(hi < a or b < lo for a, b in windows), f"{f.name} overlaps in {d.name}"
                    windows.append((lo, hi))
