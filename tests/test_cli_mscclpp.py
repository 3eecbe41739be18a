"""``collc build --backend mscclpp``, the loading snippet, and ``collc simulate`` on plans (in-process)."""

from __future__ import annotations

import ast
import json
import runpy
from pathlib import Path

import pytest

from collc.backends.mscclpp import read_plan
from collc.backends.mscclpp_loader import runner_command
from collc.check.plan.check import check_plan
from collc.cli import main
from collc.compiler.mscclpp.lower import lower_plan
from collc.driver import compile_plan, compile_xml
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.sim.event import simulate_program
from collc.sim.plan_event import time_plan
from collc.topology import parse_spec


# One host: a ring of 4 GPUs of one box (memory channels need CUDA IPC; ring:4 alone is 4 hosts).
ONE_HOST_RING = "ring:4:hosts=1"


def _build(tmp: Path, *extra: str, name: str = "ar.json") -> int:
    return main(["build", "--backend", "mscclpp", "--topology", ONE_HOST_RING, "--algorithm", "ring", "--collective",
                 "allreduce", "-o", str(tmp / name), *extra])


def test_build_writes_a_checked_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _build(tmp_path, "--min-bytes", "1KiB", "--max-bytes", "1MiB", "--protocol", "LL") == 0
    out = capsys.readouterr().out
    plan = read_plan(tmp_path / "ar.json")
    assert check_plan(plan).ok
    assert (plan.collective, plan.protocol.value, plan.inplace) == ("allreduce", "LL", True)
    assert (plan.min_message_size, plan.max_message_size) == (1024, 1 << 20)
    assert "python/test/executor_test.py" in out and "-path" in out and "--in_place" in out
    assert f"MSCCLPP_EXECUTION_PLAN_DIR={tmp_path.resolve()}" in out


def test_build_timings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _build(tmp_path, "--timings") == 0
    out = capsys.readouterr().out
    assert "lower" in out and "check" in out and "peak memory" in out


def test_build_is_byte_identical_on_repeat(tmp_path: Path) -> None:
    assert _build(tmp_path, name="a.json") == 0 and _build(tmp_path, name="b.json") == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


@pytest.mark.parametrize("extra, message", [
    (["--protocol", "LL128"], "Simple or LL"),
    (["--shard-per-rank"], "one file"),
    (["--collective", "reduce"], "does not emit reduce"),
    (["--register", "x.txt"], "end in .py"),
])
def test_refusals_exit_2_without_output(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                                        message: str) -> None:
    args = ["build", "--backend", "mscclpp", "--topology", "switch:4", "--algorithm", "binomial-tree" if
            "reduce" in extra else "ring", "--collective", "allreduce", "-o", str(tmp_path / "p.json")]
    if "--register" in extra:
        extra = ["--register", str(tmp_path / "x.txt")]
    if "--collective" in extra:
        args[args.index("allreduce")] = "reduce"
        extra = []
    assert main(args + extra) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


def test_register_needs_the_mscclpp_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce",
                 "-o", str(tmp_path / "r.xml"), "--register", str(tmp_path / "r.py")]) == 2
    assert "--backend mscclpp" in capsys.readouterr().err


def test_register_snippet_names_the_plans(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    assert _build(plans, name="ar.json") == 0
    assert main(["build", "--backend", "mscclpp", "--topology", ONE_HOST_RING, "--algorithm", "ring", "--collective",
                 "allgather", "-o", str(plans / "ag.json"), "--register", str(tmp_path / "collc_plans.py")]) == 0
    text = (tmp_path / "collc_plans.py").read_text()
    ast.parse(text)
    mod = runpy.run_path(str(tmp_path / "collc_plans.py"))      # top level does not import mscclpp
    assert Path(mod["PLAN_DIR"]).resolve() == plans.resolve()
    assert mod["PLANS"] == [("ag.json", "ring-allgather-n4", "allgather", 4),
                            ("ar.json", "ring-allreduce-n4", "allreduce", 4)]
    for filename, name, _, _ in mod["PLANS"]:
        assert read_plan(plans / filename).name == name
    assert "ExecutionPlanRegistry" in text and "set_selector" in text and "ExecutionPlanHandle" in text


def test_runner_command_quotes_paths() -> None:
    cmd = runner_command("my plans/a.json", "ring-allgather-n4", 4, False)
    # no -n: the runner of v0.8 and later reads the name from the plan and refuses the flag
    assert cmd.startswith("mpirun -np 4 python3 python/test/executor_test.py -path ")
    assert " -n " not in cmd
    assert "'my plans/a.json'" in cmd and "--in_place" not in cmd


def test_simulate_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _build(tmp_path) == 0
    capsys.readouterr()
    assert main(["simulate", str(tmp_path / "ar.json"), "--topology", "ring:4", "--sizes", "1KiB,1MiB",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "event-plan" and [r["size"] for r in data["results"]] == [1024, 1 << 20]
    assert main(["simulate", str(tmp_path / "ar.json"), "--topology", "ring:8"]) == 2
    assert main(["simulate", str(tmp_path / "ar.json"), "--topology", "ring:4", "--model", "step"]) == 2


def test_simulate_refuses_a_failing_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _build(tmp_path) == 0
    data = json.loads((tmp_path / "ar.json").read_text())
    for tb in data["gpus"][0]["threadblocks"]:
        tb["ops"] = [op for op in tb["ops"] if op["name"] != "wait"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    assert main(["simulate", str(tmp_path / "bad.json"), "--topology", "ring:4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fails its check ([" in err


@pytest.mark.parametrize("spec, algorithm, kind", [("ring:8", "ring", CollKind.ALLREDUCE),
                                                   ("switch:8", "direct", CollKind.ALLGATHER),
                                                   ("torus:4x4", "swing", CollKind.ALLREDUCE)])
def test_plan_timing_agrees_with_the_xml_model(spec: str, algorithm: str, kind: CollKind) -> None:
    """Where the semantics agree (a put and its signal are one message) the two models time the
    same schedule alike; the plan's end-of-launch acknowledgement costs one hop latency only."""
    topo = parse_spec(spec)
    sizes = [1 << 10, 1 << 20]
    # the plan is timed, not checked (checking the 16-rank plan would be most of this test's time)
    plan = lower_plan(build_schedule(algorithm, topo, kind, kind is CollKind.ALLREDUCE))
    plan_t = time_plan(plan, topo, sizes, alpha_us=5.0)
    xml_t = [r.time_us for r in simulate_program(compile_xml(topo, algorithm, kind).program, topo, sizes,
                                                 alpha_us=5.0)]
    assert plan_t == pytest.approx(xml_t, rel=0.02)


def test_ll_moves_twice_the_bytes() -> None:
    from collc.compiler.mscclpp.plan import Protocol
    topo = parse_spec(ONE_HOST_RING)
    simple = time_plan(compile_plan(topo, "ring", CollKind.ALLGATHER).plan, topo, [1 << 24])[0]
    ll = time_plan(compile_plan(topo, "ring", CollKind.ALLGATHER, protocol=Protocol.LL).plan, topo, [1 << 24])[0]
    assert ll == pytest.approx(2 * simple, rel=0.01)
