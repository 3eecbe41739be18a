"""The runtime parser's node budget, exactly (docs: collc.limits.parser_nodes).

The parser stores one node for the ``<algo>``, one for every ``<gpu>`` of the file and
one for each ``<tb>`` and ``<step>`` of the loading rank, and fails when the count
reaches 4096: 4095 loads, 4096 does not.  Each case pads a real 2-rank program with
local-copy threadblocks to an exact node count, writes it as one file or as per-rank
shards, reads it back and checks it as ``collc check`` does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from collc.backends.msccl_xml import parse_xml, to_xml
from collc.backends.shards import assemble, shard_texts
from collc.limits import LIMITS, MAX_PARSER_NODES, Dialect, parser_nodes
from collc.compiler.pipeline import enforce_limits
from collc.compiler.msccl.program import Gpu, Program, Step, StepType, Threadblock
from collc.cli import main
from collc.check import Report, check_parsed
from collc.driver import compile_xml
from collc.errors import NodeBudgetError
from collc.frontends.multitree import build_trees, link_tbs_nodes
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.topology import parse_spec

STEPS_PER_TB = LIMITS[Dialect.EXECUTOR].max_steps_per_tb


def _pad(gpu: Gpu, extra: int) -> Gpu:
    """``gpu`` with local tbs adding exactly ``extra`` parser nodes (each tb: 1 + its steps),
    every step copying i[0] into a scratch slot of its own (no two writers share a slot)."""
    tbs = list(gpu.tbs)
    slot = gpu.s_chunks
    while extra > 0:
        nsteps = min(STEPS_PER_TB, extra - 1)
        steps = tuple(Step(k, StepType.COPY, "i", 0, "s", slot + k, 1) for k in range(nsteps))
        slot += nsteps
        tbs.append(Threadblock(len(tbs), -1, -1, 0, steps))
        extra -= 1 + nsteps
    return replace(gpu, tbs=tuple(tbs), s_chunks=slot)


def _nodes(gpu: Gpu, gpus_in_file: int) -> int:
    return parser_nodes(gpus_in_file, len(gpu.tbs), sum(len(t.steps) for t in gpu.tbs))


def _padded(nodes: int, gpus_in_file: int) -> Program:
    base = compile_xml(parse_spec("ring:2"), "ring", CollKind.ALLGATHER).program
    gpus = tuple(_pad(g, nodes - _nodes(g, gpus_in_file)) for g in base.gpus)
    assert all(_nodes(g, gpus_in_file) == nodes for g in gpus)
    return replace(base, gpus=gpus)


def _check(prog: Program, shard: bool) -> Report:
    if shard:
        parsed = assemble(parse_xml(t, f"<rank {r}>") for r, t in shard_texts(prog, Dialect.EXECUTOR).items())
    else:
        parsed = parse_xml(to_xml(prog, Dialect.EXECUTOR), "<padded>")
    return check_parsed(parsed, Dialect.EXECUTOR, sharded=shard)


def test_the_budget_is_the_most_that_loads() -> None:
    assert MAX_PARSER_NODES == 4095
    assert all(lim.max_nodes_per_rank == 4095 for lim in LIMITS.values())


@pytest.mark.parametrize("shard", [False, True], ids=["file", "shard"])
@pytest.mark.parametrize("nodes", [4094, 4095, 4096])
def test_check_at_the_node_boundary(nodes: int, shard: bool) -> None:
    prog = _padded(nodes, 1 if shard else 2)
    rep = _check(prog, shard)
    limits = [f.message for f in rep.errors() if f.code == "limit"]
    if nodes <= 4095:
        assert rep.ok, [f.message for f in rep.errors()][:3]
    else:
        assert len(limits) == 2, limits      # both ranks, and nothing else wrong
        assert [f.code for f in rep.errors()] == ["limit", "limit"]
        assert "gpu 0: 4096 parser nodes" in limits[0] and "loads at most 4095" in limits[0]


@pytest.mark.parametrize("shard", [False, True], ids=["file", "shard"])
@pytest.mark.parametrize("nodes", [4094, 4095, 4096])
def test_enforce_limits_at_the_node_boundary(nodes: int, shard: bool) -> None:
    prog = _padded(nodes, 1 if shard else 2)
    if nodes <= 4095:
        enforce_limits(prog, Dialect.EXECUTOR, shard=shard)
    else:
        with pytest.raises(NodeBudgetError, match=r"gpu 0: 4096 parser nodes .* loads at most 4095 per rank"):
            enforce_limits(prog, Dialect.EXECUTOR, shard=shard)


def test_a_shard_counts_one_gpu_a_file_counts_all() -> None:
    # the same program: 4095 nodes per rank as shards is 4096 in one file of two <gpu>
    prog = _padded(4095, 1)
    assert _check(prog, True).ok
    assert not _check(prog, False).ok
    with pytest.raises(NodeBudgetError, match="one file per rank \\(--shard-per-rank\\) would fit"):
        enforce_limits(prog, Dialect.EXECUTOR, shard=False)


def test_multitree_auto_counts_the_file_it_is_written_into() -> None:
    topo = parse_spec("torus:4x4")
    trees = build_trees(topo)
    shard = link_tbs_nodes(16, trees, trees, 1)
    assert link_tbs_nodes(16, trees, trees, 16) == shard + 15
    # a layout hint of as many <gpu> as leave the link layout 1 node short picks fused tbs
    fits = MAX_PARSER_NODES - shard + 1
    link = build_schedule("multitree", topo, CollKind.ALLREDUCE, True, gpus_per_file=fits)
    fused = build_schedule("multitree", topo, CollKind.ALLREDUCE, True, gpus_per_file=fits + 1)
    assert not link.tb_pairs and fused.tb_pairs
    assert dict(fused.provenance.params) == dict(link.provenance.params)   # the hint is not a parameter


@pytest.mark.slow
def test_multitree_29x29_auto_layout_follows_the_file() -> None:
    """841 ranks: one tb per link fits a per-rank shard but not one file, where every rank also
    counts the other 840 <gpu>; ``auto`` takes fused tbs for the file and links for shards,
    and the single file it builds loads."""
    topo = parse_spec("torus:29x29")
    trees = build_trees(topo)
    assert link_tbs_nodes(841, trees, trees, 1) <= MAX_PARSER_NODES < link_tbs_nodes(841, trees, trees, 841)
    assert not build_schedule("multitree", topo, CollKind.ALLREDUCE, True, gpus_per_file=1).tb_pairs
    result = compile_xml(topo, "multitree", CollKind.ALLREDUCE)
    assert result.report.ok and result.schedule.tb_pairs
    assert max(_nodes(g, 841) for g in result.program.gpus) <= MAX_PARSER_NODES


def test_dependency_targets_are_renumbered_below_the_int8_depid() -> None:
    """200 tbs, tb 199 a dependency target of tb 0: the target becomes tb 0, the rest follow."""
    from collc.compiler.msccl.dependencies import GpuTable, _targets_first

    def tb(i: int, steps: tuple[Step, ...] = ()) -> Threadblock:
        return Threadblock(i, -1, -1, 0, steps or (Step(0, StepType.COPY, "i", 0, "s", i, 1, -1, -1, 0),))

    tbs = [tb(i) for i in range(200)]
    tbs[0] = tb(0, (Step(0, StepType.COPY, "s", 199, "o", 0, 1, 199, 0, 0),))
    tbs[199] = tb(199, (Step(0, StepType.COPY, "i", 0, "s", 199, 1, -1, -1, 1),))
    out = _targets_first(GpuTable.from_gpu(Gpu(0, 1, 1, 200, tuple(tbs)))).to_gpu().tbs
    assert [t.id for t in out] == list(range(200))
    assert out[0].steps == tbs[199].steps                  # the old tb 199
    assert out[1].steps[0].depid == 0 and out[1].steps[0].srcoff == 199   # the old tb 0 names it
    assert [t.steps for t in out[2:]] == [t.steps for t in tbs[1:199]]


def test_collc_check_names_the_node_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok, bad = tmp_path / "n4095.xml", tmp_path / "n4096.xml"
    ok.write_text(to_xml(_padded(4095, 2), Dialect.EXECUTOR))
    bad.write_text(to_xml(_padded(4096, 2), Dialect.EXECUTOR))
    assert main(["check", str(ok)]) == 0
    capsys.readouterr()
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "limit" in out and "4096 parser nodes" in out and "loads at most 4095" in out
