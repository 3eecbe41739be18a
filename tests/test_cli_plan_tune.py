"""``collc compare --backend mscclpp`` and ``collc tune --backend mscclpp`` (issue 28 item 4): the
candidate families lowered to MSCCL++ plans, timed with port channels (collc/sim/plan_event.py), one
pick per size among the plans the executor would run there; tune writes one checked plan per window,
the registration module beside them and a manifest (docs/simulation.md, docs/mscclpp.md)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from collc.backends.mscclpp import read_plan
from collc.check.plan.check import check_plan
from collc.cli import main

Capture = pytest.CaptureFixture[str]


def test_compare_plans_across_two_a100_boxes(capsys: Capture) -> None:
    """The brief's command: one row per candidate family, a pick per size; ForestColl's 48-chunk plan
    serves no power-of-two size and is never picked."""
    assert main(["compare", "--backend", "mscclpp", "--topology", "a100:2x8", "--collective", "allgather",
                 "--sizes", "1MiB,64MiB,1GiB"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] for line in out.splitlines()[2:] if line and not line.startswith(" ")}
    assert {"forestcoll", "multitree", "recursive-doubling", "ring"} <= rows
    assert "port channels" not in out.splitlines()[0] and "proxy 1 us per request" in out.splitlines()[0]
    picks = out[out.index("pick per size:"):].splitlines()[1:4]
    assert [p.split()[0] for p in picks] == ["1MiB", "64MiB", "1GiB"]
    assert all(p.split()[1] in rows - {"forestcoll"} for p in picks)
    assert "runs no size given (MSCCL++ needs 16 B per input chunk): forestcoll" in out


def test_compare_json_winners_are_runnable_plans(capsys: Capture) -> None:
    assert main(["compare", "--backend", "mscclpp", "--topology", "a100:2x4", "--collective", "allreduce",
                 "--algorithm", "ring", "--algorithm", "recursive-doubling", "--sizes", "1KiB,1MiB,256MiB",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["series"]) == {"ring", "recursive-doubling"}
    for i, win in enumerate(data["winners"]):
        assert data["series"][win][i]["selected"]
    # the proxy cost moves the small sizes: more proxy cost, slower
    assert main(["compare", "--backend", "mscclpp", "--topology", "a100:2x4", "--collective", "allreduce",
                 "--algorithm", "ring", "--sizes", "1KiB", "--json", "--proxy-cost", "10"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["series"]["ring"][0]["time_us"] > data["series"]["ring"][0]["time_us"]


def test_tune_writes_one_checked_plan_per_window(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "tuned"
    assert main(["tune", "--backend", "mscclpp", "--topology", "a100:2x4", "--collective", "allreduce",
                 "--algorithm", "ring", "--algorithm", "recursive-doubling", "--algorithm", "multitree",
                 "--protocols", "Simple,LL",
                 "--sizes", "1KiB:256MiB", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "MSCCLPP_EXECUTION_PLAN_DIR" in text
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["backend"] == "mscclpp"
    # LL across hosts lowers (packets staged, then rppkt on the port channel): compared, none left out
    assert not any("LL" in k for k in manifest["not_compared"])
    windows = manifest["windows"]
    assert windows[0]["min_message_size"] == 0
    for a, b in zip(windows, windows[1:]):
        assert a["max_message_size"] + 1 == b["min_message_size"]
    files = sorted(p.name for p in (out / "mscclpp-plans").iterdir())
    assert files == sorted(Path(w["file"]).name for w in windows)
    for w in windows:
        plan = read_plan(out / w["file"])
        assert check_plan(plan).ok
        assert (plan.min_message_size, plan.max_message_size) == (w["min_message_size"], w["max_message_size"])
    module = ast.parse((out / "collc_plans.py").read_text())
    listed = [n.value for n in ast.walk(module) if isinstance(n, ast.Constant) and str(n.value).endswith(".json")]
    assert sorted(listed) == files
