"""The prebuilt schedules/ are current and each passes `collc check` in its dialect."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collc.backends.msccl_xml import read_xml
from collc.limits import Dialect
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
        if d.is_dir():    # MSCCL++ plan libraries: plans only (the v0.8 shim reads every file of its dir)
            suffix = ".json" if d.name.endswith("-mscclpp") else ".xml"
            assert all(f.suffix == suffix for f in d.iterdir()), d


def test_schedules_are_current() -> None:
    """Every prebuilt file but the 32-rank plan libraries (and the manifest they feed) is what the
    script builds today, and no stale file lies in a library directory."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_schedules.py"), "--check", "--quick"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not checked: MANIFEST.md and a100-4x8-mscclpp, mi250-2x16-mscclpp" in proc.stdout


@pytest.mark.slow
def test_every_schedule_and_the_manifest_are_current() -> None:
    """The whole library, the 32-rank plan libraries included (about 4 CPU minutes)."""
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


# --------------------------------------------------------------------------- MSCCL++ plan libraries
PLAN_DIRS = sorted(d for d in (REPO / "schedules").iterdir() if d.is_dir() and d.name.endswith("-mscclpp"))
#: each plan library's fabric, as scripts/build_schedules.py builds it (PLAN_LIBRARIES)
PLAN_FABRIC = {"dgx-a100-mscclpp": "switch:8:bw=300", "a100-2x8-mscclpp": "a100:2x8", "a100-4x8-mscclpp": "a100:4x8",
               "mi250-2x8-mscclpp": "mi250:8+8", "mi250-2x16-mscclpp": "mi250:2"}


def test_there_are_plan_libraries() -> None:
    assert {d.name for d in PLAN_DIRS} == set(PLAN_FABRIC)


@pytest.mark.parametrize("d", PLAN_DIRS, ids=lambda d: d.name)
def test_plan_library_passes_collc_check_on_every_release(d: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the real command, on the fabric's hosts: placement (memory channels within a box) and every release
    from collc.cli import main

    plans = sorted(d.glob("*.json"))
    assert plans and all(f.suffix == ".json" for f in d.iterdir())    # the v0.8 shim reads every file
    code = main(["check", "--topology", PLAN_FABRIC[d.name], "--mscclpp-version", "all", *map(str, plans)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{len(plans)} passed, 0 failed" in out


@pytest.mark.parametrize("d", PLAN_DIRS, ids=lambda d: d.name)
def test_plan_windows_tile_the_sizes(d: Path) -> None:
    # per collective the windows [min, max] start at 0, meet without gap or overlap, and end open
    from collc.backends.mscclpp import read_plan

    windows: dict[str, list[tuple[int, int]]] = {}
    for f in sorted(d.glob("*.json")):
        p = read_plan(f)
        windows.setdefault(p.collective, []).append((p.min_message_size, p.max_message_size))
    assert set(windows) == {"allreduce", "allgather", "reducescatter"}
    for coll, ws in windows.items():
        ws.sort()
        assert ws[0][0] == 0, coll
        assert all(a[1] + 1 == b[0] for a, b in zip(ws, ws[1:])), (coll, ws)
        assert ws[-1][1] >= 2 ** 30, (coll, ws)          # the largest tuned size, 1 GiB, is covered


@pytest.mark.parametrize("d", PLAN_DIRS, ids=lambda d: d.name)
def test_registration_module_lists_the_library(d: Path) -> None:
    import ast

    module = REPO / "schedules" / ("mscclpp_" + d.name.removesuffix("-mscclpp").replace("-", "_") + ".py")
    tree = ast.parse(module.read_text())
    plans = next(ast.literal_eval(n.value) for n in tree.body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "PLANS")
    assert sorted(p[0] for p in plans) == sorted(f.name for f in d.glob("*.json"))
    assert len({p[1] for p in plans}) == len(plans)      # registry ids are unique
    assert f"'{d.name}'" in module.read_text()           # PLAN_DIR points at the library
