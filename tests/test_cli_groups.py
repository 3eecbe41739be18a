"""``--group`` on the commands (issue 32 items 1 and 2; docs/groups.md): the 8 data-parallel and 4
tensor-parallel groups of a100:4x8 build with ring, ForestColl and direct for allreduce, allgather and
reduce-scatter and pass ``collc check``; the file has one ``<gpu>`` per member; ``simulate``, ``compare``
and ``list algorithms`` take the group; bad groups exit 2 with one line and no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree

from collc.cli import main
from tests.test_bad_input import run_refused

Capture = pytest.CaptureFixture[str]
GROUPS = tuple(f"stride:8:{o}" for o in range(8)) + tuple(f"host:{h}" for h in range(4))


@pytest.mark.parametrize("algorithm", ["ring", "forestcoll", "direct"])
@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_dp_and_tp_groups_build_and_check(tmp_path: Path, capsys: Capture, algorithm: str, collective: str) -> None:
    for group in GROUPS:
        out = tmp_path / f"{group.replace(':', '-')}.xml"
        assert main(["build", "--topology", "a100:4x8", "--group", group, "--algorithm", algorithm,
                     "--collective", collective, "-o", str(out)]) == 0, capsys.readouterr().err
        gpus = etree.parse(str(out)).getroot().findall("gpu")
        assert len(gpus) == (4 if group.startswith("stride") else 8)
        assert [int(g.get("id")) for g in gpus] == list(range(len(gpus)))
    capsys.readouterr()
    assert main(["check", str(tmp_path), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert len(results) == len(GROUPS) and all(r["ok"] for r in results)


def test_group_option_is_the_spec_suffix(tmp_path: Path, capsys: Capture) -> None:
    a, b = tmp_path / "a.xml", tmp_path / "b.xml"
    assert main(["build", "--topology", "dgx-a100:4", "--group", "stride:8:1", "--algorithm", "forestcoll",
                 "--collective", "allreduce", "-o", str(a)]) == 0
    assert main(["build", "--topology", "a100:4x8@stride:8:1", "--algorithm", "forestcoll",
                 "--collective", "allreduce", "-o", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    capsys.readouterr()
    assert main(["simulate", str(a), "--topology", "a100:4x8", "--group", "stride:8:1", "--sizes", "1GiB",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["topology"] == "a100:4x8@stride:8:1" and got["ngpus"] == 4
    # the group's only way out of a box is one 25 GB/s NIC: allreduce busbw near 25 GB/s, never above
    assert 20.0 < got["results"][0]["busbw_GBps"] <= 25.0


def test_list_algorithms_on_a_group(capsys: Capture) -> None:
    assert main(["list", "algorithms", "--topology", "a100:4x8", "--group", "stride:8", "--collective",
                 "allreduce"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line[:1].isalpha()}
    assert {"ring", "forestcoll", "direct"} <= listed and "swing" not in listed
    assert main(["list", "algorithms", "--topology", "torus:4x4", "--group", "0-3", "--why"]) == 0
    swing = [line for line in capsys.readouterr().out.splitlines() if line.startswith("swing ")]
    assert swing and "applies" not in swing[0]


def test_compare_on_a_group(capsys: Capture) -> None:
    assert main(["compare", "--topology", "a100:4x8", "--group", "stride:8", "--collective", "allgather",
                 "--algorithm", "ring", "--algorithm", "direct", "--sizes", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "allgather on a100:4x8@stride:8" in out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-groups")


BUILD = ["build", "--algorithm", "ring", "--collective", "allreduce"]


@pytest.mark.parametrize("group, needle", [
    ("0-32", "rank 32 is out of range for a100:4x8"),
    ("0,8,8", "rank 8 is given twice"),
    ("", "empty group"),
    ("host:4", "a100:4x8 has no host 4"),
    ("rail:9", "no local index 9"),
    ("0-", "'0-' is not a rank or a range"),
    ("node:1", "bad group 'node:1'"),
    ("7", "a group needs at least 2 ranks"),
    ("0,9", "cannot reach member 1 (rank 9)"),
    ("0-99999999999999999999", "is not a rank or a range"),
])
def test_bad_groups_are_refused(scratch: Path, capsys: Capture, group: str, needle: str) -> None:
    run_refused(scratch, capsys, [*BUILD, "--topology", "a100:4x8", "--group", group, "-o",
                                  str(scratch / "out.xml")], needle)


def test_group_twice_and_group_without_topology(scratch: Path, capsys: Capture) -> None:
    run_refused(scratch, capsys, [*BUILD, "--topology", "a100:4x8@0-7", "--group", "0-7", "-o",
                                  str(scratch / "out.xml")], "already names a group")
    run_refused(scratch, capsys, ["list", "algorithms", "--group", "0-7"], "--group needs --topology")
    run_refused(scratch, capsys, ["compare", "--topology", "a100:2x8@host:2", "--collective", "allreduce"],
                "no host 2")
    run_refused(scratch, capsys, ["tune", "--topology", "a100:2x8", "--group", "stride:8:16", "--collective",
                                  "allreduce", "-o", str(scratch / "tuned")], "start rank 16 is out of range")
