"""Hostile input to ``collc bench`` (issue 27 A): exit 2, one line, nothing left, within 10 s.

Uses the harness of ``tests/test_bad_input.py`` (scratch directory, snapshot, one-line check);
the files here are made by :func:`_hostile` next to the harness's own.  The report interrupt
test runs real ``collc bench report`` processes, as ``tests/test_interrupts.py`` does for build.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collc.cli import main
from tests.test_bad_input import _readonly, _scratch, run_refused
from tests.test_interrupts import _until_started

Capture = pytest.CaptureFixture[str]
REPO = Path(__file__).resolve().parents[1]
#: A log the repository ships (a DGX A100 run where MSCCL ran): these tests need no corpus.
LOG = REPO / "tests" / "fixtures" / "bench" / "dgx-a100-schedule.log"


def _hostile(d: Path) -> None:
    (d / "deep-json.log").write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    (d / "deep-line.log").write_text("# nThread 1 nGpus 1\n" + "{" * 100_000 + "\n")
    (d / "long-line.log").write_text("a" * 10_000_000 + "\n")
    (d / "long-colons.log").write_text(("ab:" * 3_000_000) + " NCCL INFO x\n")
    (d / "long-digits.log").write_text("#  size count type redop root time algbw busbw #wrong\n" + "1" * 10_000_000 + "x\n")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-bench")
    _scratch(d)
    _hostile(d)
    return d


RUN = ["bench", "run", "--xml", "{d}/good.xml", "--dry-run"]
CASES = [
    ("parse-deep-json", ["bench", "parse", "{d}/deep-json.log", "--json"], "nested 100001 levels deep, more than 32"),
    ("parse-deep-json-text", ["bench", "parse", "{d}/deep-json.log"], "nested"),
    ("parse-deep-line", ["bench", "parse", "{d}/deep-line.log", "--json"], "no nccl-tests/rccl-tests result rows"),
    ("parse-10mb-line", ["bench", "parse", "{d}/long-line.log"], "no nccl-tests/rccl-tests result rows"),
    ("parse-10mb-colons", ["bench", "parse", "{d}/long-colons.log"], "no nccl-tests/rccl-tests result rows"),
    ("parse-10mb-digits", ["bench", "parse", "{d}/long-digits.log"], "no nccl-tests/rccl-tests result rows"),
    ("run-launcher-args-quote", [*RUN, "--launcher-args", "'"], "--launcher-args \"'\": no closing quotation"),
    ("run-launcher-args-escape", [*RUN, "--launcher-args", "a\\"], "no escaped character"),
    ("run-program-quote", [*RUN, "--program", 'train.py "x'], "--program"),
    ("report-onto-foreign-dir", ["bench", "report", str(LOG),
                                 "-o", "{d}/notmine"], "not a report file"),
    ("report-onto-file", ["bench", "report", str(LOG),
                          "-o", "{d}/afile"], "not a directory"),
]


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_bench_input_exits_2_with_one_line(scratch: Path, capsys: Capture, argv: list[str], needle: str) -> None:
    ro = _readonly(scratch)
    args = [a.replace("{d}", str(scratch)).replace("{ro}", ro) for a in argv]
    run_refused(scratch, capsys, args, needle)


def _report(d: Path) -> subprocess.Popen[str]:
    log = LOG
    return subprocess.Popen([sys.executable, "-m", "collc.cli", "bench", "report", str(log), "-o", "rep"], cwd=d,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
@pytest.mark.parametrize("moment", ["writing", 0.8])
def test_interrupted_report_leaves_nothing(tmp_path: Path, sig: signal.Signals, moment: float | str) -> None:
    """Signalled while it parses or while its hidden output directory exists: nothing left (or, when
    it finished first, the whole report)."""
    proc = _report(tmp_path)
    if moment == "writing":
        while proc.poll() is None and not any(n.startswith(".") for n in os.listdir(tmp_path)):
            time.sleep(0.0005)
    else:
        assert isinstance(moment, float)
        _until_started(proc)     # before collc's first line the interpreter itself is starting
        time.sleep(moment)
    if proc.poll() is None:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    left = sorted(os.listdir(tmp_path))
    if proc.returncode == 0 or left == ["rep"]:
        assert left == ["rep"] and sorted(os.listdir(tmp_path / "rep")) == ["busbw.png", "report.csv", "report.json"]
        return
    assert left == [], left
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert err.count("\n") == 1 and err.startswith("collc: interrupted"), err


def test_report_replaces_an_earlier_report_whole(tmp_path: Path, capsys: Capture) -> None:
    log = str(LOG)
    out = tmp_path / "rep"
    assert main(["bench", "report", log, "-o", str(out)]) == 0
    first = (out / "report.json").read_text()
    assert main(["bench", "report", log, "-o", str(out)]) == 0
    assert (out / "report.json").read_text() == first
    assert sorted(os.listdir(tmp_path)) == ["rep"] and sorted(os.listdir(out)) == ["busbw.png", "report.csv",
                                                                                  "report.json"]
    capsys.readouterr()
