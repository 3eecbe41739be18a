"""Paper-scale builds, opt in with ``python -m pytest -m slow`` (minutes, GBs)."""

from __future__ import annotations

import pytest

from collc.limits import MAX_PARSER_NODES, parser_nodes
from collc.driver import compile_xml
from collc.ir.collective import CollKind
from collc.topology import parse_spec

pytestmark = pytest.mark.slow


def test_recursive_halving_doubling_on_1024_ranks() -> None:
    result = compile_xml(parse_spec("hypercube:10"), "recursive-halving-doubling", CollKind.ALLREDUCE)
    assert result.report.ok


def test_ring_allreduce_on_256_ranks() -> None:
    assert compile_xml(parse_spec("ring:256"), "ring", CollKind.ALLREDUCE).report.ok


def test_multitree_on_a_16x16_torus() -> None:
    assert compile_xml(parse_spec("torus:16x16"), "multitree", CollKind.ALLREDUCE).report.ok


def test_multitree_on_a_32x32_torus_fits_the_parser_with_fused_tbs() -> None:
    # one tb per link would need ~4270 XML nodes per rank (measured: the lowering refuses it);
    # auto picks fused tbs, whose rrs/rcs forwards bring it under the parser's 4095 per rank
    result = compile_xml(parse_spec("torus:32x32"), "multitree", CollKind.ALLREDUCE, shard=True)
    assert result.report.ok and result.schedule.tb_pairs
    assert max(parser_nodes(1, len(g.tbs), sum(len(t.steps) for t in g.tbs)) for g in result.program.gpus) \
        <= MAX_PARSER_NODES


def test_sharded_2048_ranks() -> None:
    result = compile_xml(parse_spec("hypercube:11"), "recursive-halving-doubling", CollKind.ALLREDUCE, shard=True)
    assert result.report.ok and result.shards is not None and len(result.shards) == 2048
