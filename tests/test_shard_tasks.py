"""One job's tasks each build their own ranks (``--shard-per-rank --ranks A-B|auto``): the union of
their directories is one full build's, byte for byte, and a task of a symmetric schedule (RHD on
2^k ranks, Swing on power-of-two tori) makes and lowers only its own ranks and the algorithm's
representatives (docs/building.md, "Each node builds its own shards")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collc.backends.shards import TASK_VARIABLES, task_ranks
from collc.cli import main
from collc.driver import compile_xml, local_ranks
from collc.errors import UsageError
from collc.frontends.registry import build_schedule, orbit_ranks
from collc.ir.collective import CollKind
from collc.topology import parse_spec

ROOT = Path(__file__).resolve().parent.parent
Capture = pytest.CaptureFixture[str]


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _tasks(monkeypatch: pytest.MonkeyPatch, argv: list[str], ntasks: int, launcher: int = 0) -> None:
    """Run ``collc ARGV --ranks auto`` once per task with the launcher's variables set, as srun would."""
    id_var, count_var = TASK_VARIABLES[launcher]
    for var in {v for pair in TASK_VARIABLES for v in pair}:
        monkeypatch.delenv(var, raising=False)
    for task in range(ntasks):
        monkeypatch.setenv(id_var, str(task))
        monkeypatch.setenv(count_var, str(ntasks))
        assert main([*argv, "--ranks", "auto"]) == 0


def _union_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture, args: list[str],
                   ntasks: int, launcher: int = 0) -> None:
    base = ["build", *args, "--collective", "allreduce", "--shard-per-rank", "--jobs", "1"]
    assert main([*base, "-o", str(tmp_path / "full")]) == 0
    _tasks(monkeypatch, [*base, "-o", str(tmp_path / "parts")], ntasks, launcher)
    assert "these ranks checked alone" in capsys.readouterr().out
    full, parts = _tree(tmp_path / "full"), _tree(tmp_path / "parts")
    assert len(full) == parse_spec(args[1]).nranks + 1          # every rank's file and the wrapper
    assert parts == full


@pytest.mark.parametrize("args, ntasks, launcher", [
    (["--topology", "hypercube:6", "--algorithm", "recursive-halving-doubling"], 4, 0),
    (["--topology", "hypercube:7", "--algorithm", "recursive-halving-doubling", "--outofplace",
      "--dialect", "legacy"], 3, 1),
    (["--topology", "torus:8x8", "--algorithm", "swing"], 5, 0),
    (["--topology", "torus:8x16", "--algorithm", "swing", "--param", "ports=single"], 3, 2),
    (["--topology", "torus:4x4x4", "--algorithm", "swing", "--param", "variant=latency"], 2, 0),
    (["--topology", "complete:12", "--algorithm", "recursive-halving-doubling"], 3, 0),   # no symmetry
])
def test_union_of_tasks_is_the_full_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture,
                                          args: list[str], ntasks: int, launcher: int) -> None:
    _union_is_full(tmp_path, monkeypatch, capsys, args, ntasks, launcher)


def test_union_passes_collc_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["build", "--topology", "torus:8x8", "--algorithm", "swing", "--collective", "allreduce",
            "--shard-per-rank", "-o", str(tmp_path / "sw")]
    _tasks(monkeypatch, base, 4)
    assert main(["check", str(tmp_path / "sw")]) == 0


@pytest.mark.parametrize("spec, alg, reps", [
    ("hypercube:8", "recursive-halving-doubling", 4),
    ("torus:16x16", "swing", 16),
])
def test_a_task_makes_and_lowers_only_its_share(spec: str, alg: str, reps: int) -> None:
    topo = parse_spec(spec)
    mine = range(32, 48)
    local = local_ranks(alg, topo, CollKind.ALLREDUCE, None, mine)
    assert local is not None and set(mine) <= set(local) and len(local) <= len(mine) + reps
    whole = build_schedule(alg, topo, CollKind.ALLREDUCE, True)
    part = build_schedule(alg, topo, CollKind.ALLREDUCE, True, keep=frozenset(local))
    touching = [t for t in whole.transfers if t.src in local or t.dst in local]
    assert part.transfers == tuple(touching) and len(part.transfers) < len(whole.transfers) // 4
    lowered: list[int] = []
    built = compile_xml(topo, alg, CollKind.ALLREDUCE, shard=True, ranks=mine,
                        rank_progress=lambda done, of: lowered.append(of))
    assert built.report.ok and sorted(built.shards or {}) == list(mine)
    assert set(lowered) == {len(local)}                  # the lowering ran over these ranks only


@pytest.mark.parametrize("spec, alg", [("ring:8", "ring"), ("complete:12", "recursive-halving-doubling"),
                                       ("torus:6x6", "swing"), ("ring:16", "swing")])
def test_no_symmetry_claimed_where_none_holds(spec: str, alg: str) -> None:
    assert orbit_ranks(alg, parse_spec(spec), CollKind.ALLREDUCE) is None


@pytest.mark.parametrize("nranks", [1, 7, 64, 16384])
@pytest.mark.parametrize("ntasks", [1, 3, 7, 64])
def test_auto_ranks_cover_every_rank_once(nranks: int, ntasks: int) -> None:
    if ntasks > nranks:
        with pytest.raises(UsageError, match="tasks for"):
            task_ranks(nranks, {"SLURM_PROCID": "0", "SLURM_NTASKS": str(ntasks)})
        return
    shares = [task_ranks(nranks, {"OMPI_COMM_WORLD_RANK": str(i), "OMPI_COMM_WORLD_SIZE": str(ntasks)})
              for i in range(ntasks)]
    assert [r for s in shares for r in s] == list(range(nranks))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_launch_script_runs_the_tasks_as_srun_would(tmp_path: Path) -> None:
    base = ["build", "--topology", "torus:4x4", "--algorithm", "swing", "--collective", "allreduce",
            "--shard-per-rank"]
    assert main([*base, "-o", str(tmp_path / "full")]) == 0
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "launch_shards.py"), "--tasks", "3", "--",
                          *base, "--ranks", "auto", "-o", str(tmp_path / "parts")],
                         capture_output=True, text=True, env={**os.environ, "SLURM_PROCID": "9"})
    assert run.returncode == 0, run.stderr
    assert "of 3 tasks" in run.stdout
    assert _tree(tmp_path / "parts") == _tree(tmp_path / "full")


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["--topology", "hypercube:11", "--algorithm", "recursive-halving-doubling"],
    ["--topology", "torus:32x64", "--algorithm", "swing"],
])
def test_union_of_tasks_is_the_full_build_at_2048_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: Capture, args: list[str]) -> None:
    _union_is_full(tmp_path, monkeypatch, capsys, args, 8)
