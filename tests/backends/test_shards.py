"""Per-rank shards: build writes rank-<K>/ directories plus a launcher; check assembles them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from collc.backends.shards import WRAPPER, is_shard_dir, read_shards
from collc.cli import main
from collc.limits import Dialect
from collc.check import check_parsed


def _build(out: Path, *extra: str) -> int:
    return main(["build", "--topology", "ring:8", "--algorithm", "ring", "--collective", "allreduce",
                 "--shard-per-rank", "-o", str(out), *extra])


def test_shard_directory_layout_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sh"
    assert _build(out) == 0
    assert "mpirun -np 8" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [f"rank-{k}" for k in range(8)] + [WRAPPER]
    for k in range(8):
        files = list((out / f"rank-{k}").iterdir())
        assert len(files) == 1  # MSCCL_ALGO_DIR must hold only the XML
        text = files[0].read_text()
        assert 'ngpus="8"' in text and text.count("<gpu ") == 1 and f'<gpu id="{k}"' in text
    assert is_shard_dir(out)
    assert main(["check", str(out)]) == 0
    assert check_parsed(read_shards(out), Dialect.EXECUTOR, sharded=True).ok


@pytest.mark.parametrize("var", ["OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "RANK"])
def test_wrapper_points_each_rank_at_its_directory(tmp_path: Path, var: str) -> None:
    out = tmp_path / "sh"
    assert _build(out) == 0
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "RANK")}
    env[var] = "5"
    proc = subprocess.run([str(out / WRAPPER), "sh", "-c", 'echo "$MSCCL_ALGO_DIR"'], env=env,
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == str((out / "rank-5").resolve())


def test_wrapper_without_rank_fails_clearly(tmp_path: Path) -> None:
    out = tmp_path / "sh"
    assert _build(out) == 0
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "RANK")}
    proc = subprocess.run([str(out / WRAPPER), "true"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "no rank variable" in proc.stderr


def test_legacy_wrapper_sets_xml_files(tmp_path: Path) -> None:
    out = tmp_path / "sh"
    assert _build(out, "--dialect", "legacy") == 0
    script = (out / WRAPPER).read_text()
    assert "MSCCL_XML_FILES" in script and "NCCL_ALGO" in script
    assert main(["check", str(out), "--dialect", "legacy"]) == 0


def test_missing_or_mismatched_shards_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sh"
    assert _build(out) == 0
    victim = next((out / "rank-2").iterdir())
    victim.unlink()
    assert main(["check", str(out)]) == 1
    assert "ranks without a <gpu> element: [2]" in capsys.readouterr().out
    assert _build(out) == 0  # rebuilding over an earlier shard directory replaces it
    shard = next((out / "rank-4").iterdir())
    shard.write_text(shard.read_text().replace('name="', 'name="x', 1))
    assert main(["check", str(out)]) == 1
    assert "header differs" in capsys.readouterr().out


def test_refuses_unrelated_directory_and_big_single_files(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert _build(busy) == 2
    assert (busy / "notes.txt").read_text() == "mine"
    capsys.readouterr()
    rc = main(["build", "--topology", "ring:1025", "--algorithm", "ring", "--collective", "allgather",
               "-o", str(tmp_path / "big.xml")])
    err = capsys.readouterr().err
    assert rc == 2 and "--shard-per-rank" in err and not (tmp_path / "big.xml").exists()
