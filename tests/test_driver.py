"""collc.driver: the compiled program is the lowered one, whole or in shards."""

from __future__ import annotations

import pytest

from collc.compiler.pipeline import LowerOptions, lower
from collc.driver import compile_xml
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.topology import parse_spec


@pytest.mark.parametrize("alg,spec,shard", [("ring", "ring:8", False), ("swing", "torus:4x4", True),
                                             ("multitree", "torus:4x4", False)])
def test_compiled_program_equals_the_lowered_program(alg: str, spec: str, shard: bool) -> None:
    built = compile_xml(parse_spec(spec), alg, CollKind.ALLREDUCE, shard=shard)
    assert built.report.ok
    pair = alg != "multitree"   # MultiTree lowers to one tb per directed link
    opts = LowerOptions(pair=pair, check_pairing=False, shard=shard)
    assert built.program == lower(build_schedule(alg, parse_spec(spec), CollKind.ALLREDUCE, True), opts)


def test_progress_reports_stages_and_ranks() -> None:
    stages: list[str] = []
    ranks: list[tuple[int, int]] = []
    compile_xml(parse_spec("torus:16x16"), "ring", CollKind.ALLGATHER, progress=stages.append,
                rank_progress=lambda done, total: ranks.append((done, total)))
    assert stages == ["frontend", "verify schedule", "lower", "emit", "check"]
    # every 2 ranks of 256 (about 100 updates), from 0 and increasing, per lowering attempt
    assert ranks[0] == (0, 256) and {t for _, t in ranks} == {256}
    assert 100 <= len(ranks) <= 2 * 128 and ranks[:128] == [(2 * k, 256) for k in range(128)]
