"""The plan event model's clock always moves: on links so fast that a flow's last bytes last less than one
ulp of the simulated time (``--link-bw 1e9``, the largest accepted), or late in a very long run (``--alpha
1e9``), a flow whose end is the current event is done.  Before, the next event was the current time again
and ``collc simulate PLAN`` never returned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collc.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("extra", [["--link-bw", "1e9"], ["--link-bw", "1e-9", "--alpha", "1e9"],
                                   ["--alpha", "1e6", "--link-bw", "1e6"]], ids=["fastest", "slowest", "mixed"])
def test_simulate_a_plan_at_the_extremes_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 extra: list[str]) -> None:
    plan = tmp_path / "p.json"
    assert main(["build", "--backend", "mscclpp", "--topology", "switch:4", "--algorithm", "ring", "--collective",
                 "allreduce", "-o", str(plan)]) == 0
    capsys.readouterr()
    # a subprocess, so that a regression fails after the timeout instead of hanging the suite
    proc = subprocess.run([sys.executable, "-m", "collc.cli", "simulate", str(plan), "--topology", "switch:4",
                           "--sizes", "1KiB,1MiB,1GiB", *extra], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip().endswith(("yes", "no"))]
    assert [r[0] for r in rows] == ["1KiB", "1MiB", "1GiB"]
    times = [float(r[1]) for r in rows]
    assert all(t > 0 for t in times) and times == sorted(times)
