"""collc.driver: the compiled program is the lowered one, whole or in shards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from collc import driver
from collc.check import Report, check_parsed
from collc.compiler.pipeline import LowerOptions, lower
from collc.driver import compile_xml
from collc.errors import NodeBudgetError
from collc.frontends.common import I, O, S, Builder
from collc.frontends.registry import REGISTRY, Algorithm, Options, Param, build_schedule, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology, parse_spec


@pytest.mark.parametrize("alg,spec,shard", [("ring", "ring:8", False), ("swing", "torus:4x4", True),
                                             ("multitree", "torus:4x4", False)])
def test_compiled_program_equals_the_lowered_program(alg: str, spec: str, shard: bool) -> None:
    built = compile_xml(parse_spec(spec), alg, CollKind.ALLREDUCE, shard=shard)
    assert built.report.ok
    pair = alg != "multitree"   # MultiTree lowers to one tb per directed link
    opts = LowerOptions(pair=pair, shard=shard)
    assert built.program == lower(build_schedule(alg, parse_spec(spec), CollKind.ALLREDUCE, True), opts)


def test_progress_reports_stages_and_ranks() -> None:
    stages: list[str] = []
    ranks: list[tuple[int, int]] = []
    compile_xml(parse_spec("torus:16x16"), "ring", CollKind.ALLGATHER, progress=stages.append,
                rank_progress=lambda done, total: ranks.append((done, total)))
    assert stages == ["frontend", "verify schedule", "lower", "emit", "check"]
    # one update per run of ranks lowered together (about BLOCK_OPS ops; on a ring every rank has
    # as many ops, so the runs are equal), from 0 and increasing, before each run
    assert ranks[0] == (0, 256) and {t for _, t in ranks} == {256}
    runs = {b - a for (a, _), (b, _) in zip(ranks, ranks[1:])}
    assert len(runs) == 1 and len(ranks) == -(-256 // runs.pop()) >= 2


@pytest.fixture
def padded_algorithm() -> Iterator[str]:
    """A registered algorithm whose default ``auto`` layout overflows the parser's node budget
    (a 2-rank allgather plus 4100 local copies on rank 0), like its ``heavy`` one, and whose
    ``lean`` layout does not:
    the driver's answer to an automatic layout whose prediction the lowered program refutes."""
    def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
        b = Builder(Collective(CollKind.ALLGATHER, 2, 1, request.inplace))
        for r in range(2):
            b.move(0, r, r, I, [0], O, [r])
            b.move(0, r, 1 - r, I, [0], O, [r])
        if opts["layout"] != "lean":
            b.scratch = 4100
            for k in range(4100):
                b.move(1 + k, 0, 0, I, [0], S, [k])
        return b.schedule("padded", opts, topology.name, "test fixture")

    name = "test-padded"
    register(Algorithm(name, frozenset({CollKind.ALLGATHER}), "2 ranks", "test", "test fixture", build,
                       params=(Param("layout", str, "auto", "auto or lean", ("auto", "lean", "heavy")),),
                       budget_fallback={"layout": "lean"}))
    try:
        yield name
    finally:
        del REGISTRY[name]


@pytest.mark.parametrize("params", [{}, {"layout": "auto"}])
def test_node_budget_fallback_rebuilds_with_the_registered_layout(padded_algorithm: str,
                                                                  params: dict[str, str]) -> None:
    built = compile_xml(parse_spec("switch:2"), padded_algorithm, CollKind.ALLGATHER, params=params)
    assert built.report.ok
    assert dict(built.schedule.provenance.params)["layout"] == "lean"


def test_node_budget_fallback_never_overrides_the_user(padded_algorithm: str) -> None:
    with pytest.raises(NodeBudgetError, match="gpu 0: .* parser nodes"):
        compile_xml(parse_spec("switch:2"), padded_algorithm, CollKind.ALLGATHER, params={"layout": "heavy"})


def test_a_released_schedule_builds_the_same_files() -> None:
    topo = parse_spec("torus:4x4")
    kept = compile_xml(topo, "swing", CollKind.ALLREDUCE)
    released = compile_xml(topo, "swing", CollKind.ALLREDUCE, keep_schedule=False)
    assert kept.schedule is not None and released.schedule is None
    assert released.text == kept.text and released.report.ok
    assert released.nsteps == kept.nsteps == kept.schedule.nsteps


@pytest.mark.parametrize("keep", [True, False])
def test_the_safety_net_lowers_a_released_schedule_again(keep: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # the paired layout's check fails (as it never does while the pairing rule holds): the
    # unpaired layout is lowered from the Schedule, built again where it was released
    built: list[Schedule] = []
    checks: list[bool] = []

    def frontend(*args: object, **kwargs: object) -> Schedule:
        built.append(build_schedule(*args, **kwargs))  # type: ignore[arg-type]
        return built[-1]

    def check(*args: object, **kwargs: object) -> Report:
        report = check_parsed(*args, **kwargs)  # type: ignore[arg-type]
        if not checks:
            report.add("structure", "made to fail by the test")
        checks.append(report.ok)
        return report

    monkeypatch.setattr(driver, "build_schedule", frontend)
    monkeypatch.setattr(driver, "check_parsed", check)
    out = compile_xml(parse_spec("ring:4"), "ring", CollKind.ALLREDUCE, keep_schedule=keep)
    assert checks == [False, True] and out.report.ok and out.lowerings == 2
    assert len(built) == (1 if keep else 2)
    assert (out.schedule is built[0]) if keep else out.schedule is None
    unpaired = LowerOptions(pair=False)
    assert out.program == lower(build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, True), unpaired)
