"""The MultiTree paper's baselines: ring-2d (2D-RING), double-binary-tree (DBTREE), hdrm (HDRM).

Reference: /work/shared/reference/multitree.md sections 3 and 4.4.  The frontends are
imported here so that they register themselves before ``build_schedule`` runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pytest

import collc.frontends.hdrm as hdrm
import collc.frontends.ring2d as ring2d
import collc.frontends.trees as trees
from collc.driver import compile_xml
from collc.errors import ScheduleError
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule
from collc.sim.analysis import link_loads, step_loads
from collc.sim.routing import Router
from collc.topology import Topology, parse_spec
from collc.topology.generators import coords
from collc.topology.spec import FAMILIES

AR = CollKind.ALLREDUCE
MB = 1 << 20


def bigraph(m: int, s: int, drop: tuple[int, int] | None = None, extra: tuple[int, int] | None = None) -> Topology:
    """BiGraph m x s as the ``bigraph`` family lays it out: rank r on switch nranks + r // m,
    switches 0..s/2-1 upper, s/2..s-1 lower (indices relative to nranks).  ``drop`` removes
    an upper-lower switch link, ``extra`` adds a switch-switch link (relative indices)."""
    n = m * s
    links: list[dict[str, Any]] = [{"src": r, "dst": n + r // m, "bidirectional": True} for r in range(n)]
    links += [{"src": n + u, "dst": n + w, "bidirectional": True}
              for u in range(s // 2) for w in range(s // 2, s) if (u, w) != drop]
    if extra is not None:
        links.append({"src": n + extra[0], "dst": n + extra[1], "bidirectional": True})
    return Topology.from_dict({"name": f"bigraph:{m}x{s}", "nranks": n, "nswitches": s, "links": links})


def remote(s: Schedule) -> list[Any]:
    return [t for t in s.transfers if not t.is_local]


def sent_chunks(s: Schedule) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for t in remote(s):
        out[t.src] += t.count
    return out


def compiled_ok(topo: Topology, name: str, inplace: bool, **kw: Any) -> None:
    c = compile_xml(topo, name, AR, inplace=inplace, **kw)
    assert c.report.ok, [f"[{f.code}] {f.message[:200]}" for f in c.report.errors()][:5]


# ====================================================================== ring-2d
@pytest.mark.parametrize("spec, d", [("torus:4x4", 4), ("torus:8x8", 8), ("mesh:4x4", 4), ("mesh:8x8", 8)])
def test_ring2d_steps_and_chunks(spec: str, d: int) -> None:
    # reference: d-1 steps per phase (RS, AG) of each of the two dimension allreduces -> 4(d-1)
    topo = parse_spec(spec)
    s = build_schedule("ring-2d", topo, AR, inplace=True)
    assert s.nsteps == 4 * (d - 1)
    assert s.collective.chunk_factor == 4 * d and s.lanes == 4
    out = build_schedule("ring-2d", topo, AR, inplace=False)
    assert out.nsteps == 4 * (d - 1) + 1  # one local copy step in front
    for sched in (s, out):
        verify_schedule(sched, topo)


def test_ring2d_rectangular() -> None:
    topo = parse_spec("torus:3x5")
    s = build_schedule("ring-2d", topo, AR, inplace=True)
    verify_schedule(s, topo)
    assert s.nsteps == 4 * (5 - 1) and s.collective.chunk_factor == 4 * 15
    loads = link_loads(s, Router(topo), 1.0)
    assert max(m for step in loads for _, m in step.values()) == 1.0   # phase 2 waits: never two messages


@pytest.mark.parametrize("d", [4, 8])
def test_ring2d_torus_neighbours_and_loads(d: int) -> None:
    topo = parse_spec(f"torus:{d}x{d}")
    s = build_schedule("ring-2d", topo, AR, inplace=True)
    assert all(topo.has_link(t.src, t.dst) for t in remote(s))
    n = d * d
    for load in step_loads(s, Router(topo), MB):
        # 4 flows per node (E, W, S, N): every directed link busy with exactly one message
        # of weight d/4 chunk units (a chunk unit is M/N), multitree.md section 3
        assert load.utilization == 1.0 and load.max_messages == 1.0
        assert load.max_bytes == pytest.approx(MB / n * d / 4)
    # bandwidth-bound cost: about d(d-1) chunk units (12 on 4x4, 56 on 8x8), multitree.md 4.4
    cost = sum(x.max_bytes for x in step_loads(s, Router(topo), MB)) / (MB / n)
    assert cost == pytest.approx(d * (d - 1))
    assert cost == {4: 12, 8: 56}[d]


@pytest.mark.parametrize("d", [4, 8])
def test_ring2d_moves_twice_the_data_of_ring(d: int) -> None:
    # paper section II-C: on a d x d torus 2D-RING moves 2d(d-1) units where a flat ring moves d^2-1
    topo = parse_spec(f"torus:{d}x{d}")
    s2 = build_schedule("ring-2d", topo, AR, inplace=True)
    s1 = build_schedule("ring", topo, AR, inplace=True)
    per_rank_2d = {r: c / s2.collective.chunk_factor for r, c in sent_chunks(s2).items()}
    per_rank_1 = {r: c / s1.collective.chunk_factor for r, c in sent_chunks(s1).items()}
    for r in range(d * d):
        assert per_rank_2d[r] / per_rank_1[r] == pytest.approx(2 * d * (d - 1) / (d * d - 1))


@pytest.mark.parametrize("d", [4, 8])
def test_ring2d_mesh_closing_pair(d: int) -> None:
    # on a mesh the ring of a line closes between its two ends (d-1 hops): the paper's "slowest pair"
    topo = parse_spec(f"mesh:{d}x{d}")
    dims = (d, d)
    s = build_schedule("ring-2d", topo, AR, inplace=True)
    far = [t for t in remote(s) if not topo.has_link(t.src, t.dst)]
    assert far
    for t in far:
        a, b = coords(t.src, dims), coords(t.dst, dims)
        same = [i for i in range(2) if a[i] == b[i]]
        assert len(same) == 1 and {a[1 - same[0]], b[1 - same[0]]} == {0, d - 1}
    router = Router(topo)
    loads = step_loads(s, router, MB)
    assert {x.max_messages for x in loads} == {2.0}   # each flow also crosses the opposite flow's links
    folded = build_schedule("ring-2d", topo, AR, inplace=True, params={"mesh_ring": "folded"})
    verify_schedule(folded, topo)
    assert max(router.hops(t.src, t.dst) for t in remote(folded)) == 2
    assert {x.max_messages for x in step_loads(folded, router, MB)} == {2.0}


def test_ring2d_folded_order() -> None:
    assert ring2d.line_ring(8, False, "folded") == [0, 2, 4, 6, 7, 5, 3, 1]
    assert ring2d.line_ring(5, False, "folded") == [0, 2, 4, 3, 1]
    assert ring2d.line_ring(5, True, "folded") == [0, 1, 2, 3, 4]   # a torus line is a ring


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:8x8", "mesh:4x4", "mesh:8x8"])
@pytest.mark.parametrize("inplace", [True, False])
def test_ring2d_compiles(spec: str, inplace: bool) -> None:
    compiled_ok(parse_spec(spec), "ring-2d", inplace)


@pytest.mark.parametrize("spec", ["torus:4x4x4", "torus:8", "mesh:2x2x2", "ring:8", "switch:8", "hypercube:4"])
def test_ring2d_refuses(spec: str) -> None:
    with pytest.raises(ScheduleError, match=r"ring-2d needs a 2D torus or mesh"):
        build_schedule("ring-2d", parse_spec(spec), AR)


def test_ring2d_bad_param() -> None:
    with pytest.raises(ScheduleError, match=r"mesh_ring='spiral'.*wrap, folded"):
        build_schedule("ring-2d", parse_spec("mesh:4x4"), AR, params={"mesh_ring": "spiral"})


# ====================================================================== double-binary-tree
def test_dbtree_nccl_example() -> None:
    # NCCL's 14-rank example: 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3; ...
    want = {8: 0, 4: 8, 12: 8, 2: 4, 6: 4, 10: 12, 13: 12, 1: 2, 3: 2, 5: 6, 7: 6, 9: 10, 11: 10}
    t0, t1 = trees.double_binary_tree(14)
    assert t0 == [None] + [want[r] for r in range(1, 14)]
    assert t1 == [None if p is None else 13 - p for p in reversed(t0)]   # mirror


@pytest.mark.parametrize("n", list(range(2, 40)) + [64, 100])
def test_dbtree_trees(n: int) -> None:
    t0, t1 = trees.double_binary_tree(n)
    for t in (t0, t1):
        kids = trees.children_of(t)
        assert t.count(None) == 1 and all(len(k) <= 2 for k in kids)
        assert max(trees.subtree_heights(t)) == math.ceil(math.log2(n))
    k0, k1 = trees.children_of(t0), trees.children_of(t1)
    if n % 2 == 0:   # leaves of one tree are the internal nodes of the other
        assert all(bool(k0[r]) != bool(k1[r]) for r in range(n))
    else:            # shift by one
        shifted: list[int | None] = [None] * n
        for r, p in enumerate(t0):
            shifted[(r + 1) % n] = None if p is None else (p + 1) % n
        assert t1 == shifted


@pytest.mark.parametrize("spec, n", [("switch:8", 8), ("switch:16", 16), ("torus:4x4", 16), ("complete:5", 5)])
def test_dbtree_steps(spec: str, n: int) -> None:
    # derived: the reduction reaches the root after H = ceil(log2 N) steps, the broadcast takes H more
    topo = parse_spec(spec)
    h = math.ceil(math.log2(n))
    s = build_schedule("double-binary-tree", topo, AR, inplace=True)
    assert s.nsteps == 2 * h and s.collective.chunk_factor == 2 and s.lanes == 2
    assert build_schedule("double-binary-tree", topo, AR, inplace=False).nsteps == 2 * h + 1
    alt = build_schedule("double-binary-tree", topo, AR, inplace=True, params={"alternate": "true"})
    assert alt.nsteps == 4 * h
    for sched in (s, alt):
        verify_schedule(sched, topo)
        # every tree edge carries half the vector once up and once down
        assert len(remote(sched)) == 2 * 2 * (n - 1)


@pytest.mark.parametrize("n", [8, 12, 16, 24, 33])
def test_dbtree_alternate_colouring(n: int) -> None:
    # the paper's black/red colouring: a node never sends or receives in both trees in one step
    s = build_schedule("double-binary-tree", parse_spec(f"complete:{n}"), AR, inplace=True,
                       params={"alternate": "true"})
    for step in s.steps:
        assert len({t.lane for t in step}) <= 1
        for end in ("src", "dst"):
            lanes: dict[int, set[int]] = defaultdict(set)
            for t in step:
                lanes[getattr(t, end)].add(t.lane)
            assert all(len(v) == 1 for v in lanes.values())


def test_dbtree_contention_on_torus() -> None:
    # topology-oblivious: tree edges cross several torus hops and share links (paper VI-A, Fig. 4b)
    topo = parse_spec("torus:8x8")
    s = build_schedule("double-binary-tree", topo, AR, inplace=True)
    router = Router(topo)
    assert max(router.hops(t.src, t.dst) for t in remote(s)) == 5   # a logical edge of 5 physical hops
    assert max(x.max_messages for x in step_loads(s, router, MB)) == 2
    full = parse_spec("complete:16")
    assert all(Router(full).hops(t.src, t.dst) == 1 for t in remote(build_schedule(
        "double-binary-tree", full, AR, inplace=True)))


@pytest.mark.parametrize("spec", ["switch:8", "switch:16", "torus:4x4"])
@pytest.mark.parametrize("inplace", [True, False])
def test_dbtree_compiles(spec: str, inplace: bool) -> None:
    compiled_ok(parse_spec(spec), "double-binary-tree", inplace)


def test_dbtree_compiles_pipelined() -> None:
    compiled_ok(parse_spec("switch:16"), "double-binary-tree", True, chunks=4)
    compiled_ok(parse_spec("switch:8"), "double-binary-tree", False, params={"alternate": "true"}, chunks=2)


@pytest.mark.parametrize("spec", ["ring:8", "hypercube:3", "ring:6:uni"])
def test_dbtree_refuses_unroutable(spec: str) -> None:
    with pytest.raises(ScheduleError, match=r"double-binary-tree sends between tree neighbours \(it is "
                                            r"topology-oblivious\), but .* has no link or switch route"):
        build_schedule("double-binary-tree", parse_spec(spec), AR)


# ====================================================================== hdrm
@pytest.mark.parametrize("m, s", [(4, 8), (4, 16), (2, 4), (1, 2)])
def test_hdrm_rank_map(m: int, s: int) -> None:
    topo = bigraph(m, s)
    phys = hdrm.rank_map(hdrm.read_bigraph(topo))
    n = m * s
    assert sorted(phys) == list(range(n))
    upper = {r for r in range(n) if r // m < s // 2}
    for k in range(n.bit_length() - 1):
        for v in range(n):
            # every pair joins an upper-switch rank with a lower-switch rank
            assert (phys[v] in upper) != (phys[v ^ (1 << k)] in upper)


@pytest.mark.parametrize("m, s", [(4, 8), (4, 16)])
def test_hdrm_steps_and_loads(m: int, s: int) -> None:
    topo = bigraph(m, s)
    n = m * s
    sched = build_schedule("hdrm", topo, AR, inplace=True)
    verify_schedule(sched, topo)
    logn = n.bit_length() - 1
    assert sched.nsteps == 2 * logn   # log2 N halving + log2 N doubling steps
    assert build_schedule("hdrm", topo, AR, inplace=False).nsteps == 2 * logn + 1
    router = Router(topo)
    # always 3 link traversals (rank -> upper switch -> lower switch -> rank), never same-switch
    assert {router.hops(t.src, t.dst) for t in remote(sched)} == {3.0}
    loads = step_loads(sched, router, MB)
    # contention-free: no directed link carries two messages in a step
    assert all(x.max_messages == 1.0 for x in loads)
    # halving/doubling sizes: N/2, N/4, ..., 1 chunks then 1, 2, ..., N/2
    sizes = [x.max_bytes / (MB / n) for x in loads]
    assert sizes == [n >> (k + 1) for k in range(logn)] + [1 << k for k in range(logn)]
    if m == s // 2:   # 4x8: every rank and every upper-lower link is busy in every step
        assert all(x.utilization == 1.0 for x in loads)


@pytest.mark.parametrize("inplace", [True, False])
def test_hdrm_compiles(inplace: bool) -> None:
    compiled_ok(bigraph(4, 8), "hdrm", inplace)


def test_hdrm_on_spec() -> None:
    assert "bigraph" in FAMILIES   # registered: a missing family must fail here, not skip
    topo = parse_spec("bigraph:4x8")
    sched = build_schedule("hdrm", topo, AR, inplace=True)
    verify_schedule(sched, topo)
    assert sched.nsteps == 10
    assert all(x.max_messages == 1.0 for x in step_loads(sched, Router(topo), MB))


@pytest.mark.parametrize("topo, match", [
    (parse_spec("switch:8"), r"needs a BiGraph.*switch:8 has 1 switch node"),
    (parse_spec("torus:4x4"), r"needs a BiGraph.*0 switch nodes"),
    (bigraph(4, 8, drop=(0, 5)), r"lacks the link between switches 32 and 37"),
    (bigraph(4, 8, extra=(0, 1)), r"links switches 3\d and 3\d of the same half"),
    (bigraph(8, 4), r"M <= S/2"),
    (bigraph(3, 4), r"power-of-two number of ranks per switch"),
    (bigraph(2, 6), r"power-of-two number of ranks per switch and of switches per half"),
], ids=["switch", "torus", "missing-link", "same-half-link", "too-many-per-switch", "m3", "s6"])
def test_hdrm_refuses(topo: Topology, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        build_schedule("hdrm", topo, AR)


# ---------------------------------------------------------------------- recursive doubling, N not 2^k
@pytest.mark.parametrize("name", ["recursive-doubling", "recursive-halving-doubling"])
@pytest.mark.parametrize("n", [3, 6, 7, 12])
def test_recursive_doubling_folds_ranks_above_a_power_of_two(name: str, n: int) -> None:
    """MPICH's fold, measured on the emitted XML: with p' = 2^floor(log2 n) and rem = n - p',
    each even rank 2i < 2 rem sends its whole vector once (to 2i + 1) and receives the result
    once; every other rank sends the whole vector log2 p' times (RD) or 2 (p'-1)/p' of it (RHD),
    plus one vector to its folded partner; the program runs in at most log2 p' + 2 (RD) or
    2 log2 p' + 2 (RHD) rounds and passes the check in both dialects."""
    from collc.limits import Dialect
    from collc.compiler.msccl.program import RECVS, SENDS
    from collc.sim.lockstep import program_rounds
    pp = 1 << (n.bit_length() - 1)
    rem, logp = n - pp, pp.bit_length() - 1
    for dialect in (Dialect.EXECUTOR, Dialect.RCCL):
        c = compile_xml(parse_spec(f"switch:{n}"), name, CollKind.ALLREDUCE, dialect=dialect)
        assert c.report.ok
    vec = c.program.nchunksperloop
    sent = [sum(st.cnt for t in g.tbs for st in t.steps if st.type in SENDS) for g in c.program.gpus]
    recv = [sum(st.cnt for t in g.tbs for st in t.steps if st.type in RECVS) for g in c.program.gpus]
    core = logp * vec if name == "recursive-doubling" else 2 * (pp - 1) * vec // pp
    for r in range(n):
        if r < 2 * rem and r % 2 == 0:
            assert (sent[r], recv[r]) == (vec, vec)
        else:
            extra = vec if r < 2 * rem else 0
            assert (sent[r], recv[r]) == (core + extra, core + extra)
    rounds = len(program_rounds(c.program))
    assert rounds <= (logp if name == "recursive-doubling" else 2 * logp) + (2 if rem else 0)


@pytest.mark.parametrize("name, kind", [("recursive-doubling", CollKind.ALLGATHER),
                                        ("recursive-halving-doubling", CollKind.REDUCESCATTER)])
@pytest.mark.parametrize("n", [3, 5, 6, 7, 12])
def test_recursive_doubling_folds_allgather_and_reducescatter(name: str, kind: CollKind, n: int,
                                                              tmp_path: Any) -> None:
    """MPICH's fold for allgather and reduce-scatter (Thakur, Rabenseifner & Gropp 2005): the
    schedule verifies in and out of place in log2 p' + 2 steps (+1 local copy out of place for
    reduce-scatter); in the emitted XML every allgather rank receives each other block once and
    a folded rank 2i sends its block once, while in reduce-scatter 2i sends its whole vector once
    and receives its reduced block; both dialects and ``collc check`` pass."""
    from collc.cli import main
    from collc.limits import Dialect
    from collc.compiler.msccl.program import RECVS, SENDS
    pp = 1 << (n.bit_length() - 1)
    rem, logp = n - pp, pp.bit_length() - 1
    for spec in (f"complete:{n}", f"switch:{n}"):
        topo = parse_spec(spec)
        for inplace in (False, True):
            s = build_schedule(name, topo, kind, inplace)
            verify_schedule(s, topo)
            extra = 1 if kind is CollKind.REDUCESCATTER and not inplace else 0
            assert s.nsteps == logp + 2 + extra
    for dialect in (Dialect.EXECUTOR, Dialect.RCCL):
        c = compile_xml(parse_spec(f"complete:{n}"), name, kind, dialect=dialect)
        assert c.report.ok
    sent = [sum(st.cnt for t in g.tbs for st in t.steps if st.type in SENDS) for g in c.program.gpus]
    recv = [sum(st.cnt for t in g.tbs for st in t.steps if st.type in RECVS) for g in c.program.gpus]
    for r in range(2 * rem):
        if r % 2 == 0:
            assert (sent[r], recv[r]) == ((1, n - 1) if kind is CollKind.ALLGATHER else (n, 1))
    if kind is CollKind.ALLGATHER:
        assert recv == [n - 1] * n
    out = tmp_path / "rd.xml"
    assert main(["build", "--topology", f"complete:{n}", "--algorithm", name, "--collective", kind.value,
                 "-o", str(out)]) == 0
    assert main(["check", str(out)]) == 0
