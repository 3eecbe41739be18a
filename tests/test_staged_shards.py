"""``collc build --shard-per-rank`` of every rank: the workers write the files into the staged
output directory themselves (``collc.compiler.pipeline.ShardFiles``) and the check reads that
directory; the files, the report and the summary are those of the in-memory path."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from collc.backends.msccl_xml import gpu_text, join_xml
from collc.compiler import pipeline
from collc.compiler.pipeline import LowerOptions, ShardFiles, lower, prepare, rewrite_heads, used_channels
from collc.driver import compile_xml
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.limits import Dialect
from collc.outputs import discard, new_temp_dir, pending
from collc.topology import parse_spec

CASES = [("torus:4x4", "swing", {}), ("ring:8", "ring", {"dialect": Dialect.LEGACY, "chunks": 2}),
         ("hypercube:3", "recursive-halving-doubling", {"instances": 2}),
         ("torus:8x8", "swing", {"dialect": Dialect.RCCL})]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("spec, alg, kw", CASES, ids=[c[0] for c in CASES])
def test_staged_files_are_the_in_memory_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int,
                                               spec: str, alg: str, kw: dict[str, object]) -> None:
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_RANKS", 1)     # workers even for 8 ranks
    topo = parse_spec(spec)
    kind = CollKind.ALLREDUCE
    mem = compile_xml(topo, alg, kind, shard=True, jobs=jobs, **kw)  # type: ignore[arg-type]
    tmp = new_temp_dir(tmp_path / "out")
    try:
        staged = compile_xml(topo, alg, kind, shard=True, jobs=jobs, shard_dir=tmp, **kw)  # type: ignore[arg-type]
        assert mem.shards is not None and staged.shards is None and staged.text == ""
        name = f"{mem.program.name}.xml"
        written = {int(p.parent.name[5:]): p.read_text() for p in tmp.glob(f"rank-*/{name}")}
        assert written == mem.shards
        assert sorted(p.name for p in tmp.iterdir()) == sorted(f"rank-{r}" for r in mem.shards)
        assert mem.report.ok and staged.report.ok
        assert staged.report.path == mem.report.path
        assert [(f.code, f.severity, f.message) for f in staged.report.findings] == \
            [(f.code, f.severity, f.message) for f in mem.report.findings]
        gpus = mem.program.gpus
        assert staged.shape == (max(len(g.tbs) for g in gpus), max(len(t.steps) for g in gpus for t in g.tbs))
        assert staged.program.nchannels == mem.program.nchannels and staged.program.gpus == ()
    finally:
        discard(tmp)
    assert not pending()


@pytest.mark.parametrize("spec, alg, chunks, instances", [
    ("ring:8", "ring", 1, 1), ("ring:8", "ring", 4, 2), ("torus:4x4", "swing", 2, 1),
    ("hypercube:4", "recursive-halving-doubling", 1, 3), ("torus:8x8", "swing", 1, 1)])
def test_used_channels_is_the_lowered_channel_count(spec: str, alg: str, chunks: int, instances: int) -> None:
    """The header the workers write is the lowering's (the rewrite is a safety net)."""
    s = build_schedule(alg, parse_spec(spec), CollKind.ALLREDUCE, True, gpus_per_file=1)
    opts = LowerOptions(chunks=chunks, instances=instances, shard=True)
    pre = prepare(s, opts)
    assert used_channels(pre.plan.table, pre.groups, pre.spread, s.collective.nranks) == lower(s, opts).nchannels


def test_rewrite_heads_gives_the_files_the_right_header(tmp_path: Path) -> None:
    s = build_schedule("swing", parse_spec("torus:4x4"), CollKind.ALLREDUCE, True, gpus_per_file=1)
    prog = lower(s, LowerOptions(shard=True))
    assert prog.nchannels > 1
    files = ShardFiles(tmp_path, "x.xml", lambda head, body: join_xml(head, Dialect.EXECUTOR, [body]))
    right = {g.id: join_xml(prog, Dialect.EXECUTOR, [gpu_text(g)]) for g in prog.gpus}
    wrong = replace(prog, nchannels=1)
    for g in prog.gpus:
        files.path(g.id).parent.mkdir()
        files.path(g.id).write_text(join_xml(wrong, Dialect.EXECUTOR, [gpu_text(g)]))
    assert files.path(0).read_text() != right[0]
    rewrite_heads(files, [g.id for g in prog.gpus], prog)
    assert {g.id: files.path(g.id).read_text() for g in prog.gpus} == right
