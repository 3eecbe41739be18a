"""The command line on the Kautz / 2dfc families (in-process through ``collc.cli.main``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collc.cli import main

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("topology, algorithm, collective", [
    ("kautz:2,2", "kautz-c", "alltoall"), ("kautz:3,2", "kautz-m", "reducescatter"),
    ("dfc:4x4", "dfc-md", "allreduce"), ("dragonfly:3,4", "dfc-do", "allgather"),
])
def test_build_then_check_rccl(tmp_path: Path, capsys: Capture, topology: str, algorithm: str,
                               collective: str) -> None:
    out = tmp_path / "a.xml"
    code, _, err = run(capsys, "build", "--topology", topology, "--algorithm", algorithm, "--collective",
                       collective, "--dialect", "rccl", "-o", str(out))
    assert code == 0, err
    code, stdout, _ = run(capsys, "check", str(out), "--dialect", "rccl")
    assert code == 0 and stdout.splitlines()[0].startswith("PASS")


@pytest.mark.parametrize("topology, algorithm, collective, message", [
    ("kautz:2,3", "kautz-c", "allgather", "diameter 2"),
    ("dfc:3x4", "dfc-multitree", "alltoall", "square"),
    ("kautz:2,2", "bruck", "alltoall", "no link or switch route"),
    ("kautz:2,2", "kautz-c", "gather", "unknown collective 'gather'"),
    ("kautz:1,2", "kautz-c", "allgather", "degree d >= 2"),
])
def test_refusals(tmp_path: Path, capsys: Capture, topology: str, algorithm: str, collective: str,
                  message: str) -> None:
    out = tmp_path / "a.xml"
    code, _, err = run(capsys, "build", "--topology", topology, "--algorithm", algorithm, "--collective",
                       collective, "-o", str(out))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_list_says_scatter_gather_not_emitted(capsys: Capture) -> None:
    code, out, _ = run(capsys, "list", "algorithms", "--long")   # summaries are in the long form
    assert code == 0
    for name in ("kautz-c", "kautz-m"):
        block = out[out.index(name + " "):]
        assert "scatter/gather: not emitted" in block.split("e.g.")[0]
    code, out, _ = run(capsys, "list", "topologies")
    assert all(f"{f} " in out for f in ("kautz", "dfc", "dragonfly"))


def test_compare_reaches_every_family(capsys: Capture) -> None:
    algs = ["dfc-do", "dfc-md", "dfc-multitree", "pairwise", "bruck", "ring"]
    argv = ["compare", "--topology", "dfc:4x4", "--collective", "alltoall", "--model", "step", "--alpha", "1",
            "--link-bw", "12.5", "--sizes", "64KiB,16MiB", "--no-plot", "--json"]
    for a in algs:
        argv += ["--algorithm", a]
    code, out, _ = run(capsys, *argv)
    data = json.loads(out)
    assert code == 0 and set(data["series"]) == set(algs) - {"ring"} and "ring" in data["failed"]
    argv = ["compare", "--topology", "kautz:3,2", "--collective", "allreduce", "--model", "step", "--no-plot",
            "--json", "--sizes", "1MiB", "--algorithm", "kautz-c", "--algorithm", "kautz-m", "--algorithm", "ring"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and set(json.loads(out)["series"]) == {"kautz-c", "kautz-m", "ring"}
