"""Every registered algorithm x collective x topology x placement through the whole pipeline.

build_schedule -> verify_schedule(s, topology) -> lower -> to_xml -> parse_xml -> check_parsed
for every case the algorithm's registration says applies; every other case must be
refused with exactly the registration's reason, and the unguarded frontend must
fail on it too (so ``applies`` is neither too lenient nor too strict).  No case skips.
"""

from __future__ import annotations

import math

import pytest

from collc.limits import Dialect
from collc.driver import lower_checked
from collc.compiler.pipeline import LowerOptions
from collc.check import Report
from collc.errors import CollcError, ScheduleError
from collc.frontends.registry import algorithms, build_schedule, get
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule
from collc.topology import parse_spec

TOPOLOGIES = ["ring:8", "torus:4x4", "hypercube:3", "switch:8", "ring:5", "switch:6", "complete:4", "bigraph:2x4",
              "kautz:2,2", "dfc:3x3", "dfc:2x3", "circulant:12:1,5", "genkautz:2,9",
              "tests/frontends/forestcoll/example_b.yaml"]
MAIN = ["ring:8", "torus:4x4", "hypercube:3", "switch:8"]


def _kinds(alg_collectives: frozenset[CollKind]) -> list[CollKind]:
    return sorted(alg_collectives, key=lambda k: k.value)


MATRIX = [(a.name, k, spec, inplace) for a in algorithms() for k in _kinds(a.collectives)
          for spec in TOPOLOGIES for inplace in (False, True)]


def _id(name: str, kind: CollKind, spec: str, inplace: bool, root: int | None = None) -> str:
    r = "" if root is None else f"-root{root}"
    return f"{name}-{kind.value}-{spec}-{'inplace' if inplace else 'outofplace'}{r}"


def full_pipeline(s: Schedule, opts: LowerOptions = LowerOptions()) -> Report:
    return lower_checked(s, opts)[2]   # pairing is decided where compile_xml decides it


def _explain(rep: Report) -> list[str]:
    return [f"[{f.code}] {f.message[:300]}" for f in rep.errors()][:5]


@pytest.mark.parametrize("name, kind, spec, inplace", MATRIX, ids=[_id(*c) for c in MATRIX])
def test_every_algorithm_on_every_topology(name: str, kind: CollKind, spec: str, inplace: bool) -> None:
    topo = parse_spec(spec)
    alg = get(name)
    request = Collective(kind, topo.nranks, 1, inplace, 0 if kind.rooted else None)
    reason = alg.refusal(topo, request)
    if reason is not None:
        with pytest.raises(ScheduleError) as info:
            build_schedule(name, topo, kind, inplace)
        assert str(info.value) == reason
        with pytest.raises(CollcError):   # and it really cannot run there
            verify_schedule(alg.build(topo, request, {p.name: p.default for p in alg.params}), topo)
        return
    s = build_schedule(name, topo, kind, inplace)
    verify_schedule(s, topo)
    assert s.collective.kind is kind and s.collective.inplace is inplace
    assert s.collective.nranks == topo.nranks
    rep = full_pipeline(s)
    assert rep.ok, _explain(rep)


# ---------------------------------------------------------------------- cases that must apply
MUST_APPLY: list[tuple[str, CollKind, str, bool, int | None]] = []
for _spec in MAIN:
    for _kind in (CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER):
        MUST_APPLY += [("ring", _kind, _spec, ip, None) for ip in (False, True)]
for _spec in ("hypercube:3", "switch:8"):
    MUST_APPLY += [("recursive-doubling", k, _spec, ip, None)
                   for k in (CollKind.ALLREDUCE, CollKind.ALLGATHER) for ip in (False, True)]
    MUST_APPLY += [("recursive-halving-doubling", k, _spec, ip, None)
                   for k in (CollKind.ALLREDUCE, CollKind.REDUCESCATTER) for ip in (False, True)]
MUST_APPLY += [("direct", k, "switch:8", ip, None)
               for k in (CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL)
               for ip in (False, True)]
MUST_APPLY_PARAMS = [pytest.param(*c, id=_id(*c)) for c in MUST_APPLY]
for _spec in ("switch:8", "hypercube:3"):
    for _kind in (CollKind.BROADCAST, CollKind.REDUCE):
        for _root in (0, 3):
            for _ip in (False, True):
                MUST_APPLY_PARAMS.append(pytest.param("binomial-tree", _kind, _spec, _ip, _root,
                                                      id=_id("binomial-tree", _kind, _spec, _ip, _root)))


@pytest.mark.parametrize("name, kind, spec, inplace, root", MUST_APPLY_PARAMS)
def test_must_apply(name: str, kind: CollKind, spec: str, inplace: bool, root: int | None) -> None:
    topo = parse_spec(spec)
    s = build_schedule(name, topo, kind, inplace, root)
    verify_schedule(s, topo)
    assert s.collective.root == root
    rep = full_pipeline(s)
    assert rep.ok, _explain(rep)


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("params", [{"bidirectional": "true"}, {"cycle": "0,2,3,1"}])
def test_ring_parameters_through_the_pipeline(params: dict[str, str], dialect: Dialect) -> None:
    topo = parse_spec("complete:4")
    s = build_schedule("ring", topo, CollKind.ALLREDUCE, False, None, params)
    verify_schedule(s, topo)
    rep = full_pipeline(s, LowerOptions(dialect=dialect))
    assert rep.ok, _explain(rep)
    if "bidirectional" in params:
        assert s.lanes == 2


# ---------------------------------------------------------------------- step counts
def _nsteps(name: str, spec: str, kind: CollKind, inplace: bool = True, root: int | None = None) -> int:
    topo = parse_spec(spec)
    s = build_schedule(name, topo, kind, inplace, root)
    verify_schedule(s, topo)
    return s.nsteps


@pytest.mark.parametrize("spec", ["ring:2", "ring:5", "ring:8", "torus:4x4", "switch:6"])
def test_ring_allreduce_steps(spec: str) -> None:
    n = parse_spec(spec).nranks
    assert _nsteps("ring", spec, CollKind.ALLREDUCE) == 2 * (n - 1)


@pytest.mark.parametrize("spec", ["ring:5", "torus:4x4"])
@pytest.mark.parametrize("kind", [CollKind.ALLGATHER, CollKind.REDUCESCATTER])
def test_ring_half_steps(spec: str, kind: CollKind) -> None:
    assert _nsteps("ring", spec, kind) == parse_spec(spec).nranks - 1


@pytest.mark.parametrize("spec", ["hypercube:1", "hypercube:3", "switch:8", "switch:16"])
def test_recursive_doubling_steps(spec: str) -> None:
    logn = int(math.log2(parse_spec(spec).nranks))
    assert _nsteps("recursive-doubling", spec, CollKind.ALLREDUCE) == logn
    assert _nsteps("recursive-doubling", spec, CollKind.ALLGATHER) == logn


@pytest.mark.parametrize("spec", ["hypercube:2", "hypercube:3", "switch:8", "switch:16"])
def test_recursive_halving_doubling_steps(spec: str) -> None:
    logn = int(math.log2(parse_spec(spec).nranks))
    assert _nsteps("recursive-halving-doubling", spec, CollKind.ALLREDUCE) == 2 * logn
    assert _nsteps("recursive-halving-doubling", spec, CollKind.REDUCESCATTER) == logn


@pytest.mark.parametrize("spec", ["switch:3", "switch:8", "complete:4"])
def test_direct_steps(spec: str) -> None:
    assert _nsteps("direct", spec, CollKind.ALLREDUCE) == 2
    for kind in (CollKind.ALLGATHER, CollKind.ALLTOALL, CollKind.REDUCESCATTER):
        assert _nsteps("direct", spec, kind) == 1


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 16])
@pytest.mark.parametrize("inplace", [False, True])
def test_binomial_broadcast_steps(n: int, inplace: bool) -> None:
    for root in {0, n - 1}:
        assert _nsteps("binomial-tree", f"switch:{n}", CollKind.BROADCAST, inplace, root) == math.ceil(math.log2(n))


@pytest.mark.parametrize("n", [2, 3, 5, 8, 9])
@pytest.mark.parametrize("inplace", [False, True])
def test_binomial_reduce_communication_steps(n: int, inplace: bool) -> None:
    """ceil(log2 N) steps that communicate (a local step may copy partials into scratch first)."""
    topo = parse_spec(f"switch:{n}")
    s = build_schedule("binomial-tree", topo, CollKind.REDUCE, inplace, 1)
    verify_schedule(s, topo)
    remote = [step for step in s.steps if any(not t.is_local for t in step)]
    assert len(remote) == math.ceil(math.log2(n))
    assert s.nsteps - len(remote) <= 1


def test_the_matrix_runs_every_registered_algorithm() -> None:
    """No family escapes the matrix: each one applies to at least one of its cases (a new family
    whose topologies are not among TOPOLOGIES adds one there)."""
    ran = set()
    for name, kind, spec, inplace in MATRIX:
        topo = parse_spec(spec)
        if get(name).refusal_of_kind(topo, kind, inplace) is None:
            ran.add(name)
    assert ran == {a.name for a in algorithms()}
