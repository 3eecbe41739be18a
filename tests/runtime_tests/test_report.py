"""The bench report on real logs: which path ran per size, from the log's verdict and
the executor's selection rule applied to the XML set."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from collc.cli import main
from collc.runtime_tests.parse import parse_file
from collc.runtime_tests.report import Selection, build_report, _programs
from tests.runtime_tests._shared import shared

LOGS = shared("corpora", "nccl-tests-logs")


def _log(prefix: str) -> Path:
    hits = sorted(LOGS.glob(prefix + "*")) if LOGS.is_dir() else []
    if not hits:
        pytest.skip(f"{prefix}* not found in {LOGS}")
    return hits[0]


def test_selection_rule() -> None:
    s = Selection("a.xml", "allgather", 4, 8, False, True, 4096, 1 << 20)
    assert s.matches("allgather", 4, 1 << 20, 4, "out-of-place")
    assert not s.matches("allgather", 4, 1 << 20, 4, "in-place")        # placement
    assert not s.matches("allgather", 4, 2 << 20, 4, "out-of-place")    # above maxBytes
    assert not s.matches("allgather", 8, 1 << 20, 4, "out-of-place")    # ngpus
    assert not s.matches("allgather", 4, 4100, 4, "out-of-place")       # 1025 elements: 8 does not divide


def test_report_follows_the_verdict(tmp_path: Path) -> None:
    """The executor log proves MSCCL never launched: every size is NCCL although the XML matches."""
    log = _log("yccl_4x-rtxa6000")
    algos = tmp_path / "algos"
    algos.mkdir()
    assert main(["build", "--topology", "switch:4", "--algorithm", "ring", "--collective", "allgather",
                 "-o", str(algos / "ag.xml")]) == 0
    rows = build_report(parse_file(log), None, _programs([str(algos)]))
    assert {r.xml for r in rows if r.placement == "out-of-place"} == {str(algos / "ag.xml")}
    assert {r.xml for r in rows if r.placement == "in-place"} == {None}      # built out-of-place only
    assert {r.path for r in rows} == {"NCCL"}


def test_report_files_and_unproven_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No INFO lines: inside the XML's window the path is 'MSCCL?' (selected, not proven)."""
    log = _log("gcp-a3mega_2node")
    algos = tmp_path / "algos"
    algos.mkdir()
    assert main(["build", "--topology", "switch:16", "--algorithm", "ring", "--collective", "allreduce",
                 "--min-bytes", "1MiB", "--max-bytes", "64MiB", "-o", str(algos / "ar.xml")]) == 0
    out = tmp_path / "report"
    assert main(["bench", "report", str(log), "--xml", str(algos), "--topology", "switch:16", "-o", str(out)]) == 0
    assert "MSCCL verdict: unknown" in capsys.readouterr().out
    rows = list(csv.DictReader((out / "report.csv").read_text().splitlines()))
    assert len(rows) == 62
    inside = [r for r in rows if r["placement"] == "in-place" and (1 << 20) <= int(r["size"]) <= (64 << 20)]
    assert len(inside) == 7 and {r["path"] for r in inside} == {"MSCCL?"}
    assert all(r["predicted_busbw_GBps"] for r in inside)
    assert {r["path"] for r in rows if r not in inside} == {"NCCL"}
    doc = json.loads((out / "report.json").read_text())
    assert doc["verdict"]["status"] == "unknown" and doc["collective"] == "allreduce"
    assert (out / "busbw.png").stat().st_size > 10_000
