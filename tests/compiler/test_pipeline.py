"""The pass pipeline: named passes, invariants between them, IR dumps, workers and rank ranges."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from collc.cli import main
from collc.compiler import pipeline
from collc.compiler.pipeline import PASS_NAMES, PASSES, LowerOptions, lower, run_pipeline
from collc.compiler.scratch import Kind, expand
from collc.compiler.transfers import TransferTable
from collc.driver import compile_xml
from collc.errors import LoweringError
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.topology import parse_spec

Capture = pytest.CaptureFixture[str]

#: A handful of families whose lowering exercises scratch, pairing, fusion and nops.
CASES = [
    ("ring", "ring:6", CollKind.ALLREDUCE, True),
    ("recursive-halving-doubling", "hypercube:3", CollKind.ALLREDUCE, True),
    ("swing", "torus:4x4", CollKind.ALLREDUCE, True),
    ("direct", "switch:5", CollKind.ALLTOALL, False),
    ("multitree", "torus:3x3", CollKind.ALLGATHER, False),
    ("binomial-tree", "hypercube:3", CollKind.BROADCAST, True),
]


def test_passes_are_named_frozen_objects_in_order() -> None:
    assert PASS_NAMES == ("pipelining", "scratch", "channels", "threadblocks", "fusion", "dependencies", "limits")
    with pytest.raises(AttributeError):
        PASSES[0].name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("alg, spec, kind, inplace", CASES, ids=[f"{a}-{s}" for a, s, _, _ in CASES])
def test_invariants_hold_between_every_pass(alg: str, spec: str, kind: CollKind, inplace: bool) -> None:
    s = build_schedule(alg, parse_spec(spec), kind, inplace, 0 if kind is CollKind.BROADCAST else None)
    for chunks in (1, 2):
        checked = lower(s, LowerOptions(chunks=chunks, verify_between=True))
        assert checked == lower(s, LowerOptions(chunks=chunks))


def test_a_broken_plan_is_caught_after_its_pass() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLGATHER, False)
    plan = expand(TransferTable.of(s))
    lost = next(k for k, op in enumerate(plan.table.ops()) if op.kind is Kind.RECV)
    broken = replace(plan, table=plan.table.take([k for k in range(len(plan.table)) if k != lost]))
    scratch = next(p for p in PASSES if p.name == "scratch")
    with pytest.raises(LoweringError, match="after pass scratch: 1 messages without both ends"):
        scratch.check(broken, LowerOptions())


def test_dumps_render_each_asked_pass_deterministically() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, True)
    opts = LowerOptions(dump=frozenset(PASS_NAMES))
    first, again = run_pipeline(s, opts), run_pipeline(s, opts)
    assert set(first.dumps) == set(PASS_NAMES) and first.dumps == again.dumps
    assert first.dumps["pipelining"][0].startswith("schedule allreduce ranks=4")
    assert first.dumps["channels"][0] == "channels rank 0"
    assert [ln for ln in first.dumps["threadblocks"] if ln.startswith("tbs rank")] == \
        [f"tbs rank {r}" for r in range(4)]
    assert first.dumps["limits"][0].startswith("program ring-allreduce-n4")


def test_build_dump_ir_writes_one_file_per_pass(tmp_path: Path, capsys: Capture) -> None:
    argv = ["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce",
            "--dump-ir", "scratch,fusion", "--dump-dir", str(tmp_path / "ir"), "-o", str(tmp_path / "r.xml")]
    assert main(argv) == 0
    assert sorted(p.name for p in (tmp_path / "ir").iterdir()) == ["2-scratch.txt", "5-fusion.txt"]
    assert (tmp_path / "ir" / "5-fusion.txt").read_text().startswith("fused rank 0\n  tb 0 send=1 recv=3")
    capsys.readouterr()
    for bad, msg in ((["--dump-ir", "nosuch", "--dump-dir", str(tmp_path)], "passes are pipelining,"),
                     (["--dump-ir", "scratch"], "--dump-ir needs --dump-dir")):
        assert main(argv[:7] + bad + ["-o", str(tmp_path / "x.xml")]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.xml").exists()


@pytest.mark.parametrize("shard", [False, True])
def test_output_is_the_same_for_any_number_of_workers(monkeypatch: pytest.MonkeyPatch, shard: bool) -> None:
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_RANKS", 1)     # workers even for 16 ranks
    topo = parse_spec("torus:4x4")
    made = [compile_xml(topo, "swing", CollKind.ALLREDUCE, shard=shard, jobs=jobs) for jobs in (1, 2, 3)]
    assert all(m.report.ok for m in made)
    assert made[0].text == made[1].text == made[2].text
    assert made[0].shards == made[1].shards == made[2].shards
    assert made[0].program == made[2].program


def test_errors_of_a_rank_are_the_same_from_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_RANKS", 1)
    s = build_schedule("ring", parse_spec("ring:8"), CollKind.ALLREDUCE, True)
    msgs = []
    for jobs in (1, 2):
        with pytest.raises(LoweringError) as err:
            lower(s, LowerOptions(chunks=2048, instances=8, jobs=jobs))
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("spec, alg, dialect", [("torus:4x4", "swing", "executor"), ("ring:8", "ring", "legacy"),
                                               ("hypercube:3", "recursive-halving-doubling", "rccl")])
def test_shards_built_by_rank_ranges_are_the_full_build(tmp_path: Path, capsys: Capture, spec: str,
                                                        alg: str, dialect: str) -> None:
    base = ["build", "--topology", spec, "--algorithm", alg, "--collective", "allreduce", "--shard-per-rank",
            "--dialect", dialect]
    n = parse_spec(spec).nranks
    assert main(base + ["-o", str(tmp_path / "full")]) == 0
    half = n // 2
    for part in (f"{half}-{n - 1}", "0", f"1-{half - 1}"):
        assert main(base + ["--ranks", part, "--jobs", "2", "-o", str(tmp_path / "parts")]) == 0
    out = capsys.readouterr().out
    assert "these ranks checked alone; run `collc check" in out
    assert _tree(tmp_path / "parts") == _tree(tmp_path / "full")
    assert main(["check", str(tmp_path / "parts"), "--dialect", dialect]) == 0


@pytest.mark.parametrize("extra, msg", [
    (["--shard-per-rank", "--ranks", "5-2"], "the first rank 5 is above the last 2"),
    (["--shard-per-rank", "--ranks", "0-8"], "the topology has ranks 0..7"),
    (["--shard-per-rank", "--ranks", "a-b"], "must be A-B or A"),
    (["--ranks", "0-3"], "--ranks needs --shard-per-rank"),
    (["--jobs", "0"], "--jobs"),
    (["--jobs", "two"], "must be a whole number"),
])
def test_bad_ranks_and_jobs_give_one_line_and_exit_2(tmp_path: Path, capsys: Capture, extra: list[str],
                                                     msg: str) -> None:
    code = main(["build", "--topology", "ring:8", "--algorithm", "ring", "--collective", "allreduce", *extra,
                 "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_timings_name_the_workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Capture) -> None:
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_RANKS", 1)
    argv = ["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce", "--timings",
            "-o", str(tmp_path / "r.xml")]
    assert main(argv + ["--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 worker processes ran the per-rank passes" in out
    rows = {line.split()[0] for line in out.splitlines()[1:]}
    assert set(PASS_NAMES) <= rows and {"frontend", "verify_schedule", "lower", "emit", "check"} <= rows
    assert main(argv + ["--jobs", "1"]) == 0
    assert "worker processes" not in capsys.readouterr().out
