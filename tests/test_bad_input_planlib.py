"""Bad input to ``compare``/``tune --backend mscclpp`` and ``--proxy-cost`` (issue 28 item 4): exit 2,
one line naming the value, within 10 s, nothing left behind (the harness of tests/test_bad_input.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.cli import main
from tests.test_bad_input import run_refused

Capture = pytest.CaptureFixture[str]
CMP = ["compare", "--backend", "mscclpp", "--topology", "ring:4:hosts=1", "--collective", "allgather",
       "--algorithm", "ring", "--sizes", "1KiB,1MiB"]
TUNE = ["tune", *CMP[1:]]

CASES: list[tuple[str, list[str], str]] = [
    ("compare-plan-step-model", [*CMP, "--model", "step"], "--model step"),
    ("compare-negative-proxy-cost", [*CMP, "--proxy-cost", "-1"], "--proxy-cost"),
    ("simulate-nan-proxy-cost", ["simulate", "{d}/x.json", "--topology", "ring:4:hosts=1", "--proxy-cost", "nan"],
     "--proxy-cost"),
    ("compare-plan-on-own-topology", [*CMP[:-4], "--algorithm", "ring@ring:4", "--sizes", "1KiB"], "@SPEC"),
    ("tune-plan-ll128", [*TUNE, "--protocols", "LL128", "-o", "{d}/t"], "LL128"),
    ("tune-plan-foreign-files", [*TUNE, "-o", "{d}/tuned"], "other than JSON"),
    ("tune-backend-typo", [*TUNE[:2], "msccl++", *TUNE[3:], "-o", "{d}/t"], "msccl++"),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-input-planlib")
    assert main(["build", "--backend", "mscclpp", "--topology", "ring:4:hosts=1", "--algorithm", "ring",
                 "--collective", "allgather", "-o", str(d / "x.json")]) == 0
    (d / "tuned" / "mscclpp-plans").mkdir(parents=True)
    (d / "tuned" / "mscclpp-plans" / "notes.txt").write_text("mine\n")
    return d


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(scratch: Path, capsys: Capture, argv: list[str], needle: str) -> None:
    run_refused(scratch, capsys, [a.replace("{d}", str(scratch)) for a in argv], needle)
