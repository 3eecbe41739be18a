"""Bad input to ``collc build --ranks auto``: exit 2, one line naming the variable, nothing written
(the harness of tests/test_bad_input.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.backends.shards import TASK_VARIABLES
from tests.test_bad_input import Capture, run_refused

BUILD = ["build", "--topology", "torus:4x4", "--algorithm", "swing", "--collective", "allreduce"]


@pytest.mark.parametrize("env, extra, needle", [
    ({}, ["--shard-per-rank"], "no task id in the environment"),
    ({"SLURM_PROCID": "x", "SLURM_NTASKS": "4"}, ["--shard-per-rank"], "SLURM_PROCID='x' is not a whole number"),
    ({"SLURM_PROCID": "0"}, ["--shard-per-rank"], "SLURM_NTASKS='' is not a whole number"),
    ({"SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, ["--shard-per-rank"], "is not below SLURM_NTASKS=4"),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "0"}, ["--shard-per-rank"],
     "is not below OMPI_COMM_WORLD_SIZE=0"),
    ({"PMI_RANK": "0", "PMI_SIZE": "17"}, ["--shard-per-rank"], "PMI_SIZE=17 tasks for 16 ranks"),
    ({"SLURM_PROCID": "1" * 40, "SLURM_NTASKS": "4"}, ["--shard-per-rank"], "is not a whole number"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, [], "--ranks needs --shard-per-rank"),
])
def test_bad_auto_ranks_exit_2_with_one_line(tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch,
                                             env: dict[str, str], extra: list[str], needle: str) -> None:
    for var in {v for pair in TASK_VARIABLES for v in pair}:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    run_refused(tmp_path, capsys, [*BUILD, *extra, "--ranks", "auto", "-o", str(tmp_path / "out")], needle)
