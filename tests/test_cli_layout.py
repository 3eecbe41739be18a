"""Many process groups of one job (issue 32 items 3-5; docs/groups.md): layouts, groups at once in
the event and step models, one file for isomorphic groups, and MSCCL++ plans of groups that span
hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collc.cli import main
from collc.topology import parse_spec
from collc.topology.layout import isomorphic, parse_group_list, parse_layout

Capture = pytest.CaptureFixture[str]
#: On a100:4x8 each DP group's member b is in box b; "cross" puts member b at local index j + b, so
#: consecutive members sit on different IB rails (even and odd GPUs) and reach each other only
#: through another GPU of the box and its NIC.
CROSS = ";".join(",".join(str((j + b) % 8 + 8 * b) for b in range(4)) for j in range(8))


def test_layout_groups() -> None:
    t = parse_spec("a100:4x8")
    lay = parse_layout("dp=4,tp=8", t)
    tp, dp = lay.set_named("tp"), lay.set_named("dp")
    assert tp.groups == tuple(tuple(range(8 * h, 8 * h + 8)) for h in range(4))
    assert dp.groups == tuple(tuple(range(o, 32, 8)) for o in range(8))
    pp = parse_layout("tp=2,dp=4,pp=4", t)
    assert pp.set_named("dp").groups[:2] == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert pp.set_named("pp").groups[0] == (0, 8, 16, 24)
    assert [s.name for s in parse_layout("tp=32", t).sets] == ["tp"]
    assert parse_group_list("0-3; stride:8:4", t).sets[0].groups == ((0, 1, 2, 3), (4, 12, 20, 28))


def test_isomorphism_keeps_member_order() -> None:
    t = parse_spec("a100:4x8")
    dp = parse_layout("tp=8,dp=4", t).set_named("dp").groups
    assert all(isomorphic(t, dp[0], g) for g in dp)           # both rails: switches are unlabelled
    assert isomorphic(t, (0, 8, 16, 24), (0, 10, 20, 30))     # one rail, other local indices
    assert not isomorphic(t, (0, 8, 16, 24), (0, 1, 8, 9))    # two members share a box's NVSwitch
    # same members, other order: member 1 shares member 0's box in one, not in the other
    assert not isomorphic(t, (0, 1, 8, 9), (0, 8, 1, 9))
    assert isomorphic(t, (0, 1, 8, 9), (2, 3, 10, 11))


def _sim(capsys: Capture, args: list[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(["simulate", *args, "--topology", "a100:4x8", "--sizes", "1GiB", "--json"]) == 0
    got: dict[str, object] = json.loads(capsys.readouterr().out)
    return got


def _rows(report: dict[str, object], name: str) -> list[dict[str, float]]:
    sets = report["sets"]
    assert isinstance(sets, list)
    rows: list[dict[str, float]] = next(s["rows"] for s in sets if s["set"] == name)
    return rows


@pytest.mark.parametrize("model", ["event", "step"])
def test_crossing_rails_costs_bandwidth(tmp_path: Path, capsys: Capture, model: str) -> None:
    """Rail-aligned DP groups (stride:8) share no link: each runs as fast as alone, 25 GB/s (its
    NIC).  The same file on DP groups that cross rails: a member reaches the next one through a
    GPU of its box on the other rail; the model's route (the lowest-numbered such GPU) sends the
    4 cross-rail messages of a box's groups through one 25 GB/s NIC: 4x slower, 6.25 GB/s."""
    dp = tmp_path / "dp.xml"
    assert main(["build", "--topology", "a100:4x8", "--layout", "tp=8,dp=4", "--group", "dp", "--algorithm",
                 "ring", "--collective", "allreduce", "-o", str(dp)]) == 0
    assert "isomorphic: all 8 dp groups" in capsys.readouterr().out
    aligned = _sim(capsys, [str(dp), "--layout", "tp=8,dp=4", "--model", model])
    rows = _rows(aligned, "dp")
    # the event model pays each of the executor's 2 MiB runs its alpha: 23.6 GB/s at 1 GiB, the step model 25
    assert len(rows) == 8 and all(r["slowdown"] == 1.0 and 23.5 < r["busbw_together_GBps"] <= 25.0 for r in rows)
    assert aligned["sets"][0]["shared_links"] == []        # type: ignore[index]
    cross = _sim(capsys, [str(dp), "--groups", CROSS, "--model", model])
    rows = _rows(cross, "g")
    assert all(23.5 < r["busbw_alone_GBps"] <= 25.0 for r in rows)
    # step model: exactly 4x and 6.25; the event model's per-run alpha is hidden under the shared NIC: 3.83x, 6.16
    assert all(3.8 < r["slowdown"] <= 4.0 + 1e-3 for r in rows)
    assert all(r["busbw_together_GBps"] == pytest.approx(6.25, rel=2e-2) for r in rows)
    top = cross["sets"][0]["shared_links"][0]                  # type: ignore[index]
    assert top["kind"] == "net" and top["bandwidth_GBps"] == 25.0 and len(top["groups"]) == 4


def test_layout_builds_each_groups_own_file(capsys: Capture) -> None:
    got = _sim(capsys, ["--layout", "tp=8,dp=4", "--group", "dp", "--algorithm", "forestcoll", "--collective",
                        "allgather"])
    # ForestColl's DP optimum (docs/groups.md): 25 x 4 / 3 = 33.3 GB/s algbw, busbw x 3/4 = 25 GB/s; the 8
    # groups are isomorphic, so dp0's build serves all, and they share no link
    dp = _rows(got, "dp")
    assert len(dp) == 8 and all(r["file"] == "dp0" and r["slowdown"] == 1.0 and 24.0 < r["busbw_together_GBps"] <= 25.0
                                for r in dp)
    got = _sim(capsys, ["--layout", "tp=8,dp=4", "--algorithm", "ring", "--collective", "allreduce"])
    tp = _rows(got, "tp")
    assert len(tp) == 4 and len(_rows(got, "dp")) == 8 and all(r["slowdown"] == 1.0 for r in tp)


def test_one_file_for_groups_that_are_not_isomorphic(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "g.xml"
    assert main(["build", "--topology", "a100:4x8", "--groups", "2,10,18,26;0,1,8,9;4,12,21,29", "--algorithm",
                 "forestcoll", "--collective", "allgather", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not isomorphic: the file is right for g0 (2,10,18,26)" in text
    # g1's own ForestColl file uses its two NVSwitch pairs; the file of g0 (one GPU per box) does not
    loss = next(line for line in text.splitlines() if line.startswith("  g1 (0-1,8-9): its fabric differs"))
    with_file, own = (float(x.split(" GB/s")[0].split()[-1]) for x in loss.split(" with this file"))
    assert with_file < 25.1 and own > 2 * with_file
    assert "g2 (4,12,21,29): no fabric of its own" in text
    assert main(["check", str(out)]) == 0


def test_tune_layout_times_all_groups_at_once(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "tuned"
    assert main(["tune", "--topology", "a100:4x8", "--layout", "tp=8,dp=4", "--group", "dp", "--collective",
                 "allreduce", "--algorithm", "ring", "--algorithm", "direct", "--sizes", "1MiB,1GiB", "-o",
                 str(out)]) == 0
    assert "timed on all 8 dp groups at once" in capsys.readouterr().out
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["topology"] == "a100:4x8@0,8,16,24" and manifest["windows"]
    files = list((out / "msccl-algorithms").iterdir())
    assert main(["check", *map(str, files)]) == 0


def test_dp_plan_uses_port_channels_across_hosts(tmp_path: Path, capsys: Capture) -> None:
    """A DP group spans the 4 boxes: every peer is on another host, so its MSCCL++ plan has port
    channels only and passes `check --topology`; a one-host plan of 4 ranks (memory channels)
    fails that check on the DP group's fabric."""
    dp, local = tmp_path / "dp.json", tmp_path / "local.json"
    for group, path in (("stride:8", dp), ("0-3", local)):
        assert main(["build", "--topology", "a100:4x8", "--group", group, "--algorithm", "ring", "--collective",
                     "allreduce", "--backend", "mscclpp", "-o", str(path)]) == 0
    kinds = {c["channel_type"] for g in json.loads(dp.read_text())["gpus"] for c in g["channels"]}
    assert kinds == {"port"}
    kinds = {c["channel_type"] for g in json.loads(local.read_text())["gpus"] for c in g["channels"]}
    assert kinds == {"memory"}
    assert main(["check", str(dp), "--topology", "a100:4x8@stride:8"]) == 0
    assert main(["check", str(local), "--topology", "a100:4x8@stride:8"]) == 1
