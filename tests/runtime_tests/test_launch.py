"""The launcher: exact commands per runtime and launcher (``--dry-run``), and a real
``mpirun -np 4`` over a small Python program that prints each rank's environment,
proving the per-rank variables and the shard selection reach every process.  The GPU
binaries themselves are only checked as command lines here."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from collc.cli import main
from collc.runtime_tests.launch import LaunchError, Options, plan_runs

ENV_PROGRAM = """import os
keys = sorted(k for k in os.environ if k.startswith(("MSCCL_", "NCCL_", "RCCL_", "LD_PRELOAD")))
print("RANKENV rank=" + os.environ.get("OMPI_COMM_WORLD_RANK", "?") + " "
      + " ".join(k + "=" + os.environ[k] for k in keys), flush=True)
"""


@pytest.fixture(scope="module")
def schedules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bench")
    (root / "algos").mkdir()
    (root / "legacy").mkdir()
    (root / "a2a").mkdir()
    builds = [
        ["--topology", "switch:4", "--algorithm", "ring", "--collective", "allreduce", "-o",
         str(root / "algos" / "ar.xml")],
        ["--topology", "switch:4", "--algorithm", "ring", "--collective", "allreduce", "--dialect", "legacy",
         "-o", str(root / "legacy" / "ar.xml")],
        ["--topology", "switch:4", "--algorithm", "ring", "--collective", "allreduce", "--shard-per-rank",
         "-o", str(root / "shards")],
        ["--topology", "switch:4", "--algorithm", "ring", "--collective", "allreduce", "--shard-per-rank",
         "--dialect", "legacy", "-o", str(root / "legacy-shards")],
        ["--topology", "switch:8", "--algorithm", "direct", "--collective", "alltoall", "-o",
         str(root / "a2a" / "a2a.xml")],
    ]
    for b in builds:
        assert main(["build", *b]) == 0
    return {"dir": root / "algos", "legacy": root / "legacy", "shards": root / "shards",
            "legacy-shards": root / "legacy-shards", "a2a": root / "a2a", "root": root}


def _env(argv: tuple[str, ...]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-x")


def test_executor_commands(schedules: dict[str, Path]) -> None:
    lib = "/opt/msccl-executor/lib/libnccl.so.2"
    run, base = plan_runs(Options((str(schedules["dir"]),), "executor", msccl_lib=lib, tests_dir="/nt/build",
                                  sizes=(1024, 1 << 20), baseline_algo="Ring", baseline_proto="Simple"))
    assert run.argv[:4] == ("mpirun", "-np", "4", "--bind-to")
    assert run.argv[run.argv.index("/nt/build/all_reduce_perf"):] == (
        "/nt/build/all_reduce_perf", "-b", "1024", "-e", "1048576", "-f", "2", "-g", "1", "-c", "1", "-n", "20",
        "-w", "5", "-d", "float")
    env = _env(run.argv)
    assert env["MSCCL_ALGO_DIR"] == str(schedules["dir"].resolve())
    assert env["LD_PRELOAD"] == lib and env["NCCL_MSCCL_ENABLE"] == "1"
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,ENV,COLL"
    benv = _env(base.argv)
    assert "MSCCL_ALGO_DIR" not in benv and benv["NCCL_MSCCL_ENABLE"] == "0" and benv["LD_PRELOAD"] == lib
    assert (benv["NCCL_ALGO"], benv["NCCL_PROTO"]) == ("Ring", "Simple")


def test_rccl_legacy_and_shard_commands(schedules: dict[str, Path]) -> None:
    run, base = plan_runs(Options((str(schedules["dir"]),), "rccl"))
    env = _env(run.argv)
    assert (env["RCCL_MSCCL_ENABLE"], env["RCCL_MSCCL_FORCE_ENABLE"]) == ("1", "1")
    assert _env(base.argv)["RCCL_MSCCL_ENABLE"] == "0"
    xml = schedules["legacy"] / "ar.xml"
    run, base = plan_runs(Options((str(xml),), "legacy", msccl_lib="/opt/msccl/build/lib"))
    env = _env(run.argv)
    assert env["MSCCL_XML_FILES"] == str(xml.resolve()) and env["NCCL_ALGO"] == "MSCCL,RING,TREE"
    assert env["LD_LIBRARY_PATH"].startswith("/opt/msccl/build/lib")
    assert "MSCCL_XML_FILES" not in _env(base.argv) and _env(base.argv)["NCCL_ALGO"] == "RING,TREE"
    run, base = plan_runs(Options((str(schedules["shards"]),), "executor", launcher="srun"))
    wrapper = str(schedules["shards"].resolve() / "run-with-msccl.sh")
    assert run.argv[0] == "env" and "NCCL_DEBUG_SUBSYS=INIT,ENV,COLL" in run.argv
    srun = run.argv.index("srun")
    assert run.argv[srun:srun + 5] == ("srun", "-n", "4", "--gpus-per-task=1", "--export=ALL")
    assert run.argv[srun + 5] == wrapper and wrapper not in base.argv


def test_alltoall_and_tuner_csv(schedules: dict[str, Path], tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "tuner.csv"
    csv.write_text("# pin NCCL per size\nallreduce,0,65536,tree,ll,-1,-1,-1,-1,-1\n"
                   "allreduce,65537,-1,ring,simple,-1,-1,-1\n")
    assert main(["bench", "run", "--xml", str(schedules["dir"]), "--tuner-csv", str(csv), "--tuner-plugin",
                 "/opt/tuner/libnccl-tuner-example.so", "--dry-run"]) == 0
    out = capsys.readouterr().out
    base = out.split("# --- baseline run")[1]
    assert f"NCCL_TUNER_CONFIG_FILE={csv.resolve()}" in base and "NCCL_TUNER_PLUGIN=" in base
    assert "NCCL_TUNER_CONFIG_FILE" not in out.split("# --- baseline run")[0]
    assert main(["bench", "run", "--xml", str(schedules["a2a"]), "--dry-run", "--no-baseline"]) == 0
    out = capsys.readouterr().out
    assert "alltoall_perf" in out and "msccl-tests-nccl" in out and "baseline" not in out.split("\n", 2)[2]


@pytest.mark.parametrize("args, message", [
    (["--np", "8"], "ngpus=4"),
    (["--tuner-csv", "BADCSV"], "fields"),
    (["--sizes", "1KiB"], "LO:HI"),
])
def test_bad_input(schedules: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                   args: list[str], message: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("allreduce,0,100,ring\n")
    args = [str(bad) if a == "BADCSV" else a for a in args]
    assert main(["bench", "run", "--xml", str(schedules["dir"]), *args, "--dry-run"]) == 2
    assert message in capsys.readouterr().err


def test_directory_rules(schedules: dict[str, Path], tmp_path: Path) -> None:
    d = tmp_path / "algos"
    d.mkdir()
    shutil.copy(schedules["dir"] / "ar.xml", d / "ar.xml")
    (d / "README").write_text("notes\n")
    with pytest.raises(LaunchError, match="parses every file"):
        plan_runs(Options((str(d),)))
    legacy = tmp_path / "five"
    legacy.mkdir()
    for i in range(5):
        shutil.copy(schedules["legacy"] / "ar.xml", legacy / f"ar{i}.xml")
    with pytest.raises(LaunchError, match="at most 4"):
        plan_runs(Options((str(legacy),), "legacy"))


def _mpirun_args() -> str:
    extra = "--oversubscribe"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        extra += " --allow-run-as-root"
    return extra


@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="mpirun not installed (.ci/run installs openmpi-bin when it is missing)")
@pytest.mark.parametrize("kind", ["shards", "legacy-shards", "dir"])
def test_mpirun_delivers_per_rank_environment(schedules: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str], kind: str) -> None:
    prog = tmp_path / "envdump.py"
    prog.write_text(ENV_PROGRAM)
    runtime = "legacy" if kind.startswith("legacy") else "executor"
    rc = main(["bench", "run", "--xml", str(schedules[kind]), "--runtime", runtime, "--program",
               f"{sys.executable} {prog}", "--launcher-args", _mpirun_args(), "--out", str(tmp_path / "logs")])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = re.findall(r"RANKENV rank=(\d+) ([^\n]*?)(?=RANKENV|\n|$)", out)
    sched, base = (tmp_path / "logs" / "schedule.log").read_text(), (tmp_path / "logs" / "baseline.log").read_text()
    ranks = {int(r): dict(kv.split("=", 1) for kv in rest.split()) for r, rest in
             re.findall(r"RANKENV rank=(\d+) ([^\n]*?)(?=RANKENV|\n|$)", sched)}
    assert sorted(ranks) == [0, 1, 2, 3] and len(lines) == 8
    for rank, env in ranks.items():
        assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,ENV,COLL"
        if kind == "shards":
            assert env["MSCCL_ALGO_DIR"] == str(schedules["shards"].resolve() / f"rank-{rank}")
            assert env["NCCL_MSCCL_ENABLE"] == "1"
        elif kind == "legacy-shards":
            files = list((schedules["legacy-shards"] / f"rank-{rank}").glob("*.xml"))
            assert env["MSCCL_XML_FILES"] == str(files[0].resolve()) and env["NCCL_ALGO"] == "MSCCL,RING,TREE"
        else:
            assert env["MSCCL_ALGO_DIR"] == str(schedules["dir"].resolve())
    base_ranks = re.findall(r"RANKENV rank=(\d+) ([^\n]*?)(?=RANKENV|\n|$)", base)
    assert sorted(int(r) for r, _ in base_ranks) == [0, 1, 2, 3]
    assert all("MSCCL_ALGO_DIR" not in rest and "MSCCL_XML_FILES" not in rest for _, rest in base_ranks)


def test_build_from_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["bench", "run", "--topology", "switch:4", "--algorithm", "ring", "--collective", "allreduce",
                 "--runtime", "rccl", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    built = out / "msccl-algorithms" / "ring-allreduce.xml"
    assert built.is_file() and f"MSCCL_ALGO_DIR={(out / 'msccl-algorithms').resolve()}" in text
    assert 'minBytes="0"' in built.read_text()          # the rccl dialect's header
    assert main(["bench", "run", "--topology", "switch:4", "--algorithm", "ring", "--dry-run"]) == 2
    assert "--algorithm and --collective" in capsys.readouterr().err
