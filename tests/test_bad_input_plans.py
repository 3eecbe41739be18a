"""Bad MSCCL++ execution plans given to ``check`` and ``simulate``: exit 2, one line naming the value,
within 10 s, nothing left behind (the harness of tests/test_bad_input.py), and limits from collc/inputs.py.

A plan that is read fine but fails its check stays exit 1 for ``check``; for ``simulate`` it is bad
input (exit 2), for plans and MSCCL XML alike.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collc.cli import main
from collc.inputs import (MAX_PLAN_OPS, MAX_PLAN_OPS_PER_TB, MAX_PLAN_TBS, MAX_PLAN_THREADBLOCKS, MAX_PLAN_THREADS,
                          MAX_RANKS)
from tests.test_bad_input import BUILD, _readonly, run_refused

Capture = pytest.CaptureFixture[str]
PLAN = ["build", "--backend", "mscclpp", "--topology", "ring:4:hosts=1", "--algorithm", "ring", "--collective", "allreduce"]
TIME_LIMIT_S = 10.0


def _mutated(base: dict[str, Any], change: Any) -> dict[str, Any]:
    p = copy.deepcopy(base)
    change(p)
    return p


def _scratch(d: Path) -> None:
    assert main([*PLAN, "-o", str(d / "good.json")]) == 0
    assert main([*BUILD, "-o", str(d / "good.xml")]) == 0
    text = (d / "good.json").read_text()
    base = json.loads(text)
    nop = {"name": "nop"}
    gpu = {"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0, "threadblocks": [], "channels": [],
           "remote_buffers": []}

    def tb(i: int, ops: int = 0) -> dict[str, Any]:
        return {"id": i, "ops": [nop] * ops, "channels": []}

    def put(name: str, obj: dict[str, Any]) -> None:
        (d / name).write_text(json.dumps(obj))

    def header(key: str, value: Any) -> dict[str, Any]:
        return _mutated(base, lambda p: p.__setitem__(key, value))

    def gpu0(key: str, value: Any) -> dict[str, Any]:
        return _mutated(base, lambda p: [g.__setitem__(key, value) for g in p["gpus"]])

    def op0(key: str, value: Any) -> dict[str, Any]:
        return _mutated(base, lambda p: p["gpus"][0]["threadblocks"][0]["ops"][0].__setitem__(key, value))

    (d / "digits.json").write_text(text.replace('"buffer_alignment": 16', '"buffer_alignment": 1' + "0" * 5000))
    (d / "digits-dir").mkdir()
    (d / "digits-dir" / "a.json").write_text(text)
    (d / "digits-dir" / "b.json").write_text((d / "digits.json").read_text())
    put("tbs.json", _mutated(base, lambda p: p["gpus"][0].__setitem__("threadblocks", [tb(i) for i in range(100_000)])))
    put("tbs-total.json", _mutated(base, lambda p: [g.__setitem__("threadblocks", [tb(i) for i in range(1100)])
                                                    for g in p["gpus"]]))
    put("chunks.json", _mutated(base, lambda p: [g.update(input_chunks=1 << 40, output_chunks=1 << 40)
                                                 for g in p["gpus"]]))
    put("nops.json", _mutated(base, lambda p: p["gpus"][0]["threadblocks"][0].__setitem__("ops", [nop] * 1_000_000)))
    put("ops-total.json", _mutated(base, lambda p: p["gpus"][0].__setitem__("threadblocks", [
        tb(i, MAX_PLAN_OPS_PER_TB) for i in range(MAX_PLAN_OPS // MAX_PLAN_OPS_PER_TB + 1)])))
    pipe = _mutated(base, lambda p: p["gpus"][0]["threadblocks"][0]["ops"].insert(0, {
        "name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 1}, "ops": [nop] * 4000}))
    pipe["gpus"][0]["threadblocks"][0]["ops"][1:1] = [nop] * 200
    put("pipeline-ops.json", pipe)
    put("tbg.json", op0("tbg_info", {"tb_id": 0, "tbg_size": 1 << 40}))
    primes = [4093, 4091, 4079, 4073]
    put("tbg-lcm.json", _mutated(base, lambda p: [op.__setitem__("tbg_info", {"tb_id": 0, "tbg_size": q}) for q, op in
                                                  zip(primes, p["gpus"][0]["threadblocks"][0]["ops"])]))
    put("frob.json", header("collective", "frob"))
    put("empty-collective.json", header("collective", ""))
    (d / "dup-key.json").write_text(text.replace('"name":', '"name": "x", "name":', 1))
    (d / "inf.json").write_text(text.replace('"min_message_size": 0', '"min_message_size": Infinity'))
    (d / "nan.json").write_text(text.replace('"min_message_size": 0', '"min_message_size": 0, "extra": [NaN]'))
    (d / "neg-inf.json").write_text(text.replace('"min_message_size": 0', '"min_message_size": -Infinity'))
    put("threads-0.json", header("num_threads_per_block", 0))
    put("threads-huge.json", header("num_threads_per_block", 1 << 40))
    put("threads-float.json", header("num_threads_per_block", 512.0))
    put("uint64-over.json", header("max_message_size", 1 << 64))
    put("neg-chunks.json", gpu0("input_chunks", -1))
    put("float-chunks.json", gpu0("scratch_chunks", 1.5))
    put("str-chunks.json", gpu0("output_chunks", "4"))
    put("gpus-str.json", header("gpus", "0-3"))
    put("ops-obj.json", _mutated(base, lambda p: p["gpus"][0]["threadblocks"][0].__setitem__("ops", {"0": nop})))
    put("op-list-name.json", op0("name", ["put"]))
    put("channel-ids.json", op0("channel_ids", list(range(1000))))
    put("gpus-over.json", header("gpus", [dict(gpu, id=i) for i in range(MAX_RANKS + 1)]))
    put("actors.json", header("gpus", [dict(gpu, id=i) for i in range(3 * MAX_PLAN_THREADBLOCKS)]))
    put("proto.json", header("protocol", "LL128"))
    (d / "binary.json").write_bytes(b'{"name": "\xff"}')
    (d / "list.json").write_text("[1, 2]")
    (d / "deep.json").write_text("{" + '"a": {' * 100_000 + "}" * 100_001)
    failing = copy.deepcopy(base)
    for t in failing["gpus"][0]["threadblocks"]:
        t["ops"] = [op for op in t["ops"] if op["name"] != "wait"]
    put("fails.json", failing)
    (d / "fails.xml").write_text((d / "good.xml").read_text().replace('cnt="1"', 'cnt="2"', 1))


def _sim(path: str) -> list[str]:
    return ["simulate", path, "--topology", "ring:4", "--sizes", "1KiB"]


CASES: list[tuple[str, list[str], str]] = [
    # tracebacks
    ("check-digits", ["check", "{d}/digits.json"], "5001 digits"),
    ("sim-digits", _sim("{d}/digits.json"), "5001 digits"),
    ("check-dir-digits", ["check", "{d}/digits-dir"], "5001 digits"),
    # hangs: sizes over a limit
    ("check-100k-tbs", ["check", "{d}/tbs.json"], f"more than the {MAX_PLAN_TBS}"),
    ("sim-100k-tbs", _sim("{d}/tbs.json"), "100000 entries"),
    ("check-tbs-total", ["check", "{d}/tbs-total.json"], f"more than {MAX_PLAN_THREADBLOCKS} threadblocks"),
    ("check-2e40-chunks", ["check", "{d}/chunks.json"], "4398046511104 chunk slots"),
    ("sim-2e40-chunks", _sim("{d}/chunks.json"), "2^28"),
    ("check-1m-nops", ["check", "{d}/nops.json"], "1000000 entries"),
    ("check-ops-total", ["check", "{d}/ops-total.json"], f"more than {MAX_PLAN_OPS} ops"),
    ("check-pipeline-ops", ["check", "{d}/pipeline-ops.json"], "with the pipelines' inner ops"),
    ("check-tbg-2e40", ["check", "{d}/tbg.json"], "tbg_size is 1099511627776"),
    ("sim-tbg-2e40", _sim("{d}/tbg.json"), "tbg_size is 1099511627776"),
    ("check-tbg-lcm", ["check", "{d}/tbg-lcm.json"], "tbg_size values"),
    ("check-gpus-over", ["check", "{d}/gpus-over.json"], f"more than the {MAX_RANKS}"),
    ("check-actors", ["check", "{d}/actors.json"], "actors"),
    ("check-channel-ids", ["check", "{d}/channel-ids.json"], "channel_ids has 1000 entries"),
    # a build whose plan the checker could not follow: refused from its connection ends, before the
    # ops are built, printed and read back (it took minutes to reach the read-back's refusal)
    ("build-actors", ["build", "--backend", "mscclpp", "--topology", "torus:8x16", "--algorithm", "swing",
                      "--collective", "allreduce", "-o", "{d}/actors-out.json"], "at least 8576 actors"),
    # accepted nonsense
    ("check-frob", ["check", "{d}/frob.json"], 'unknown collective "frob"'),
    ("sim-frob", _sim("{d}/frob.json"), 'unknown collective "frob"'),
    ("check-empty-collective", ["check", "{d}/empty-collective.json"], 'unknown collective ""'),
    ("check-dup-key", ["check", "{d}/dup-key.json"], 'duplicate key "name"'),
    ("sim-dup-key", _sim("{d}/dup-key.json"), 'duplicate key "name"'),
    ("check-inf", ["check", "{d}/inf.json"], "Infinity"),
    ("check-neg-inf", ["check", "{d}/neg-inf.json"], "-Infinity"),
    ("check-nan-anywhere", ["check", "{d}/nan.json"], "NaN"),
    ("sim-nan", _sim("{d}/nan.json"), "NaN"),
    ("check-threads-0", ["check", "{d}/threads-0.json"], "num_threads_per_block: expected at least 1, got 0"),
    ("check-threads-huge", ["check", "{d}/threads-huge.json"], f"1099511627776, above the limit of {MAX_PLAN_THREADS}"),
    ("check-threads-float", ["check", "{d}/threads-float.json"], "512.0"),
    ("check-uint64-over", ["check", "{d}/uint64-over.json"], "18446744073709551616"),
    # wrong kinds of value
    ("check-neg-chunks", ["check", "{d}/neg-chunks.json"], "input_chunks: expected a non-negative integer, got -1"),
    ("check-float-chunks", ["check", "{d}/float-chunks.json"], "got 1.5"),
    ("check-str-chunks", ["check", "{d}/str-chunks.json"], 'got "4"'),
    ("check-gpus-str", ["check", "{d}/gpus-str.json"], "plan.gpus: expected a list"),
    ("check-ops-obj", ["check", "{d}/ops-obj.json"], "ops: expected a list"),
    ("check-op-list-name", ["check", "{d}/op-list-name.json"], 'unknown value ["put"]'),
    ("check-proto", ["check", "{d}/proto.json"], '"LL128"'),
    ("check-binary", ["check", "{d}/binary.json"], "not UTF-8"),
    ("check-list", ["check", "{d}/list.json"], "expected a JSON object"),
    ("check-deep", ["check", "{d}/deep.json"], "nesting too deep"),
    # simulate of a file that fails its check: bad input there, naming the first error finding
    ("sim-failing-plan", _sim("{d}/fails.json"), "fails its check ([uninitialised-read]"),
    ("sim-failing-xml", ["simulate", "{d}/fails.xml", "--topology", "ring:4", "--sizes", "1KiB"], "fails its check (["),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-plans")
    _scratch(d)
    return d


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_plan_exits_2_with_one_line(scratch: Path, capsys: Capture, argv: list[str], needle: str) -> None:
    ro = _readonly(scratch)
    args = [a.replace("{d}", str(scratch)) for a in argv]
    run_refused(scratch, capsys, args, needle, TIME_LIMIT_S)
    assert not os.path.exists(os.path.join(ro, "collc-test.xml"))


def test_a_plan_failing_its_check_stays_exit_1_for_check(scratch: Path, capsys: Capture) -> None:
    assert main(["check", str(scratch / "fails.json")]) == 1
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("FAIL") and "[uninitialised-read]" in out


def test_real_collectives_and_defaults_still_read(scratch: Path, capsys: Capture) -> None:
    """The refusals above leave real plans alone: the good plan and its other collectives check."""
    assert main(["check", str(scratch / "good.json")]) == 0
    assert main(_sim(str(scratch / "good.json"))) == 0
    capsys.readouterr()


# ---------------------------------------------------------------- random mutations of a real plan
_VALUES = st.one_of(st.integers(-3, 70), st.sampled_from([1 << 32, 1 << 40, 1 << 63, (1 << 64) - 1, 1 << 64]),
                    st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
                    st.sampled_from(["", "frob", "put", "memory", "i", "allreduce", "LL"]),
                    st.lists(st.integers(-1, 8), max_size=4), st.just({}))


def _paths(v: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, at + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, at + (i,))
    return out


@pytest.fixture(scope="module")
def real_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("plan")
    assert main([*PLAN, "-o", str(d / "p.json")]) == 0
    data: dict[str, Any] = json.loads((d / "p.json").read_text())
    return data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_plans_check_or_exit_2(real_plan: dict[str, Any], tmp_path: Path, capsys: Capture,
                                       data: st.DataObject) -> None:
    """Any change to one value of a real plan gives a verdict (0 or 1) or one line with exit 2, fast."""
    plan = copy.deepcopy(real_plan)
    paths = _paths(plan)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.sampled_from(paths))
        target = plan
        try:
            for k in at[:-1]:
                target = target[k]
            target[at[-1]] = data.draw(_VALUES)
        except (KeyError, IndexError, TypeError):
            pass          # an earlier change removed the path
    f = tmp_path / "m.json"
    f.write_text(json.dumps(plan))
    capsys.readouterr()
    start = time.monotonic()
    code = main(["check", str(f)])
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and took < TIME_LIMIT_S
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("collc: "), err
    else:
        assert err == "", err
