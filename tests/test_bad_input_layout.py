"""Bad ``--layout`` / ``--groups`` input (docs/groups.md): exit 2, one line naming the value, no file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_bad_input import run_refused

Capture = pytest.CaptureFixture[str]
SIM = ["simulate", "--topology", "a100:4x8", "--algorithm", "ring", "--collective", "allreduce", "--sizes", "1MiB"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-layout")


@pytest.mark.parametrize("extra, needle", [
    (["--layout", "tp=8,dp=8"], "tp x dp x pp = 8 x 8 x 1 = 64, but a100:4x8 has 32 ranks"),
    (["--layout", "tp=8,ep=4"], "unknown dimension 'ep'"),
    (["--layout", "tp=8,tp=4"], "tp is given twice"),
    (["--layout", "tp=eight"], "'tp=eight' is not NAME=SIZE"),
    (["--layout", "tp=0,dp=4"], "tp must be at least 1"),
    (["--layout", "tp=8,dp=4", "--group", "ep"], "unknown group 'ep' of layout 'tp=8,dp=4' (its groups: tp, dp)"),
    (["--groups", "0-3;3-6"], "rank 3 is in group 0 ('0-3') and group 1 ('3-6')"),
    (["--groups", "0-3;4,99"], "rank 99 is out of range"),
    (["--groups", "0-3", "--group", "dp"], "--group picks a dimension of --layout"),
    (["--groups", "0-3", "--layout", "tp=32"], "give --layout or --groups, not both"),
    (["--groups", ";".join(["0-1"] * 17)], "has room for at most 16 groups"),
    (["--groups", "0," * 3000], "at most 4096"),
])
def test_bad_layouts(scratch: Path, capsys: Capture, extra: list[str], needle: str) -> None:
    run_refused(scratch, capsys, [*SIM, *extra], needle)


def test_bad_layout_use(scratch: Path, capsys: Capture) -> None:
    run_refused(scratch, capsys, ["simulate", "--topology", "a100:4x8", "--layout", "tp=8,dp=4"], "needs FILE")
    run_refused(scratch, capsys, ["simulate", "--topology", "a100:4x8", "--algorithm", "ring"],
                "go with --layout or --groups")
    run_refused(scratch, capsys, ["simulate", "--topology", "a100:4x8@host:0", "--layout", "tp=8", "--algorithm", "ring",
                 "--collective", "allreduce"], "names one group")
    out = scratch / "f.xml"
    run_refused(scratch, capsys, ["build", "--topology", "a100:4x8", "--layout", "tp=8,dp=4", "--algorithm", "ring",
                                  "--collective", "allreduce", "-o", str(out)], "--group tp|dp")
    run_refused(scratch, capsys, ["build", "--topology", "a100:4x8", "--groups", "0-3;4-6", "--algorithm", "ring",
                                  "--collective", "allreduce", "-o", str(out)], "the groups have 3, 4 ranks")
    run_refused(scratch, capsys, ["tune", "--topology", "a100:4x8", "--layout", "tp=8,dp=5", "--collective",
                                  "allreduce", "-o", str(scratch / "tuned")], "has 32 ranks")
    cross = ";".join(",".join(str((j + b) % 8 + 8 * b) for b in range(4)) for j in range(8))
    run_refused(scratch, capsys, [*SIM, "--groups", cross], "no group of 4 ranks on a100:4x8 has a fabric of its own")
