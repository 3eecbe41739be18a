"""Kautz-C / Kautz-M on K(d,2) (thesis chapter 3; docs/kautz-dfc.md).

Costs, rounds and per-link chunk counts are measured on the emitted Program
(``program_rounds`` / ``program_step_times``, alpha = 1 us, beta = 8e-11 s/B);
the worked K(2,2) schedules are compared with the Schedule's transfers, written
with the thesis's word labels.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from collc.limits import Dialect
from collc.driver import Compiled, compile_xml
from collc.errors import CollcError
from collc.frontends.kautz import children, in_tree, multipath, out_tree
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.ir.schedule import Schedule
from collc.sim.lockstep import program_rounds, program_step_times
from collc.topology import parse_spec
from collc.topology.kautz_dfc import kautz_label, kautz_rank

ALPHA, BW = 1.0, 12.5
KINDS = [CollKind.BROADCAST, CollKind.REDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE,
         CollKind.ALLTOALL]


@lru_cache(maxsize=None)
def built(d: int, alg: str, kind: CollKind, inplace: bool = False, dialect: Dialect = Dialect.EXECUTOR,
          root: int | None = None) -> Compiled:
    return compile_xml(parse_spec(f"kautz:{d},2"), alg, kind, inplace=inplace, dialect=dialect, root=root)


def rounds(c: Compiled) -> list[list[tuple[int, int, int]]]:
    return [r for r in program_rounds(c.program) if r]


def r2(word: str) -> int:
    return kautz_rank(word, 2, 2)


# ---------------------------------------------------------------------- topology (notes 1.1)
def test_kautz_topology() -> None:
    t = parse_spec("kautz:2,2")
    assert [kautz_label(r, 2, 2) for r in range(6)] == ["01", "02", "10", "12", "20", "21"]
    out = {kautz_label(r, 2, 2): sorted(kautz_label(v, 2, 2) for v in t.out_neighbors(r)) for r in range(6)}
    assert out == {"01": ["10", "12"], "02": ["20", "21"], "10": ["01", "02"], "12": ["20", "21"],
                   "20": ["01", "02"], "21": ["10", "12"]}
    for d, n, links in ((2, 6, 12), (3, 12, 36), (4, 20, 80), (8, 72, 576), (16, 272, 4352)):
        t = parse_spec(f"kautz:{d},2")
        assert (t.nranks, len(t.links)) == (n, links)
        assert all(d * a + b - (b > a) == kautz_rank((a, b), d, 2) for a in range(d + 1) for b in range(d + 1)
                   if a != b)
    assert parse_spec("kautz:3,2").diameter() == 2 and not parse_spec("kautz:3,2").is_bidirectional()


@pytest.mark.parametrize("spec", ["kautz:1,2", "kautz:2", "kautz:2,2:uni"])
def test_bad_kautz_specs(spec: str) -> None:
    with pytest.raises(CollcError):
        parse_spec(spec)


def test_not_kautz_d2() -> None:
    with pytest.raises(CollcError, match="diameter 2"):
        build_schedule("kautz-c", parse_spec("kautz:2,3"), CollKind.ALLGATHER)
    with pytest.raises(CollcError, match="kautz"):
        build_schedule("kautz-m", parse_spec("dfc:4x4"), CollKind.ALLGATHER)


# ---------------------------------------------------------------------- every collective builds and checks
@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("alg", ["kautz-c", "kautz-m"])
@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
@pytest.mark.parametrize("dialect", [Dialect.EXECUTOR, Dialect.RCCL])
def test_builds_checks_contention_free(d: int, alg: str, kind: CollKind, dialect: Dialect) -> None:
    for inplace in (False, True):
        c = built(d, alg, kind, inplace, dialect)
        assert c.report.ok, [f.message for f in c.report.errors()][:3]
        rs = rounds(c)
        steps = 2 if alg == "kautz-c" or kind in (CollKind.BROADCAST, CollKind.REDUCE) else d + 1
        assert len(rs) == (2 * steps if kind is CollKind.ALLREDUCE else steps)
        topo = parse_spec(f"kautz:{d},2")
        for r in rs:
            assert len({(a, b) for a, b, _ in r}) == len(r), "a directed link used twice in one step"
            assert all(topo.has_link(a, b) for a, b, _ in r)


def test_broadcast_reduce_other_root() -> None:
    for kind in (CollKind.BROADCAST, CollKind.REDUCE):
        c = built(3, "kautz-c", kind, False, Dialect.EXECUTOR, 7)
        assert c.report.ok and len(rounds(c)) == 2


# ---------------------------------------------------------------------- Table 3.2 through the step model
def _table32(alg: str, kind: CollKind, d: int, m: float) -> float:
    a, b = ALPHA, 1 / (BW * 1e3)
    n = d * (d + 1)
    combined = alg == "kautz-c"
    if kind in (CollKind.BROADCAST, CollKind.REDUCE):
        return 2 * (a + m * b)
    if kind in (CollKind.ALLGATHER, CollKind.REDUCESCATTER):
        return 2 * a + (d + 1) * m * b if combined else (d + 1) * (a + m * b)
    if kind is CollKind.ALLREDUCE:
        return (4 * a if combined else 2 * (d + 1) * a) + 2 * m / d * b
    return (2 * a if combined else (d + 1) * a) + (2 * d + 1) * m / n * b


@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("alg", ["kautz-c", "kautz-m"])
@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
def test_table32_costs(d: int, alg: str, kind: CollKind) -> None:
    """M is the per-node block for broadcast/reduce/allgather/reduce-scatter and the whole
    per-node buffer for allreduce and alltoall (Table 3.2's meaning of M by row)."""
    n = d * (d + 1)
    m = n * 1000.0
    size = n * m if kind in (CollKind.ALLGATHER, CollKind.REDUCESCATTER) else m
    c = built(d, alg, kind)
    got = program_step_times(c.program, parse_spec(f"kautz:{d},2"), [size], ALPHA, bandwidth=BW)[0]
    assert got == pytest.approx(_table32(alg, kind, d, m))


# ---------------------------------------------------------------------- worked K(2,2) schedules (notes 3.11)
def _parse(text: str) -> dict[tuple[int, int], list[str]]:
    out: dict[tuple[int, int], list[str]] = {}
    for item in text.replace("|", " ").split("] "):
        item = item.strip().rstrip("]")
        if not item:
            continue
        link, _, payload = item.partition(":[")
        u, v = link.split("->")
        out[(r2(u), r2(v))] = payload.split()
    return out


def _remote(s: Schedule, step: int) -> dict[tuple[int, int], list[int]]:
    got: dict[tuple[int, int], list[int]] = {}
    for t in s.step(step):
        if not t.is_local:
            assert (t.src, t.dst) not in got, "one combined message per link"
            got[(t.src, t.dst)] = list(t.dst_idx) if t.dst_buf.value == "o" else list(t.src_idx)
    return got


AG_STEP2 = ("01->10:[20] 01->12:[10 20] | 02->20:[10] 02->21:[10 20] | 10->01:[21] 10->02:[01 21] | "
            "12->20:[01 21] 12->21:[01] | 20->01:[02 12] 20->02:[12] | 21->10:[02 12] 21->12:[02]")
A2A_STEP1 = ("01->10:[10 02] 01->12:[12 20 21] | 02->20:[20 01] 02->21:[21 10 12] | 10->01:[01 12] "
             "10->02:[02 20 21] | 12->20:[20 01 02] 12->21:[21 10] | 20->01:[01 10 12] 20->02:[02 21] | "
             "21->10:[10 01 02] 21->12:[12 20]")
A2A_STEP2 = ("01->10:[20>10] 01->12:[10>12 20>12] | 02->20:[10>20] 02->21:[10>21 20>21] | 10->01:[21>01] "
             "10->02:[01>02 21>02] | 12->20:[01>20 21>20] 12->21:[01>21] | 20->01:[02>01 12>01] "
             "20->02:[12>02] | 21->10:[02>10 12>10] 21->12:[02>12]")
RS_STEP1 = ("01->10:[02] 01->12:[20 21] | 02->20:[01] 02->21:[10 12] | 10->01:[12] 10->02:[20 21] | "
            "12->20:[01 02] 12->21:[10] | 20->01:[10 12] 20->02:[21] | 21->10:[01 02] 21->12:[20]")


def test_k22_allgather_step2() -> None:
    s = build_schedule("kautz-c", parse_spec("kautz:2,2"), CollKind.ALLGATHER, inplace=True)
    want = {k: sorted(r2(w) for w in v) for k, v in _parse(AG_STEP2).items()}
    assert {k: sorted(v) for k, v in _remote(s, 1).items()} == want
    # on the program: the second round's message sizes are those block counts (d or d-1)
    got = {(a, b): cnt for a, b, cnt in rounds(built(2, "kautz-c", CollKind.ALLGATHER, True))[1]}
    assert got == {k: len(v) for k, v in want.items()}


def test_k22_alltoall_steps() -> None:
    s = build_schedule("kautz-c", parse_spec("kautz:2,2"), CollKind.ALLTOALL)
    step1 = {k: sorted(r2(w) for w in v) for k, v in _parse(A2A_STEP1).items()}
    assert {k: sorted(v) for k, v in _remote(s, 0).items()} == step1      # chunks by destination
    step2 = {k: sorted(r2(w.split(">")[0]) for w in v) for k, v in _parse(A2A_STEP2).items()}
    assert {k: sorted(v) for k, v in _remote(s, 1).items()} == step2      # output slot = source rank
    # the destinations of step 2 are the receivers: every chunk has arrived
    for (u, v), items in _parse(A2A_STEP2).items():
        assert all(r2(w.split(">")[1]) == v for w in items)
    rs = rounds(built(2, "kautz-c", CollKind.ALLTOALL))
    assert [{(a, b): cnt for a, b, cnt in r} for r in rs] == [{k: len(v) for k, v in step1.items()},
                                                              {k: len(v) for k, v in step2.items()}]


def test_k22_reducescatter_steps() -> None:
    s = build_schedule("kautz-c", parse_spec("kautz:2,2"), CollKind.REDUCESCATTER)
    want = {k: sorted(r2(w) for w in v) for k, v in _parse(RS_STEP1).items()}
    assert {k: sorted(v) for k, v in _remote(s, 1).items()} == want
    # step 2 sends the single partial block v on each link u -> v
    assert _remote(s, 2) == {(u, v): [v] for u in range(6) for v in parse_spec("kautz:2,2").out_neighbors(u)}


OUT_TREE_K22 = {
    1: "10->02:01, 20->01:02, 01->12:10, 21->10:12, 02->21:20, 12->20:21",
    2: "12->21:01, 12->20:01, 21->12:02, 21->10:02, 02->20:10, 02->21:10, 20->02:12, 20->01:12, 01->10:20, "
       "01->12:20, 10->01:21, 10->02:21",
}


def test_k22_kautz_m_out_tree() -> None:
    """Notes 3.8: the closed-form out-tree schedule, on Kautz-M allgather's transfers."""
    s = build_schedule("kautz-m", parse_spec("kautz:2,2"), CollKind.ALLGATHER, inplace=True)
    step0 = {(t.src, t.dst, t.dst_idx[0]) for t in s.step(0) if not t.is_local}
    assert step0 == {(u, v, u) for u in range(6) for v in parse_spec("kautz:2,2").out_neighbors(u)}
    for step, text in OUT_TREE_K22.items():
        want = set()
        for item in text.split(", "):
            link, root = item.split(":")
            u, v = link.split("->")
            want.add((r2(u), r2(v), r2(root)))
        assert {(t.src, t.dst, t.dst_idx[0]) for t in s.step(step) if not t.is_local} == want
    assert [len([t for t in s.step(k) if not t.is_local]) for k in range(3)] == [12, 6, 12]
    # the program sends each message as soon as its data is in (a relay of step 2 may go in
    # round 1), still in 3 rounds of one message per link
    prog = rounds(built(2, "kautz-m", CollKind.ALLGATHER, True))
    assert len(prog) == 3 and sum(len(r) for r in prog) == 30
    assert [kautz_label(c, 2, 2) for c in children(r2("01"), 2)] == ["10", "12"]


# ---------------------------------------------------------------------- per-link chunk counts (notes 3.4, 3.7, 3.8)
@pytest.mark.parametrize("d", [2, 3, 4])
def test_per_link_chunk_counts(d: int) -> None:
    n = d * (d + 1)
    ag = rounds(built(d, "kautz-c", CollKind.ALLGATHER))
    assert {cnt for *_, cnt in ag[0]} == {1} and {cnt for *_, cnt in ag[1]} == {d - 1, d}
    a2a = rounds(built(d, "kautz-c", CollKind.ALLTOALL))
    assert {cnt for *_, cnt in a2a[0]} == {d, d + 1} and {cnt for *_, cnt in a2a[1]} == {d - 1, d}
    # Kautz-M: step 0 uses all d n links, step 1 (d-1) n, steps 2..d every link once, one block each
    sm = build_schedule("kautz-m", parse_spec(f"kautz:{d},2"), CollKind.ALLGATHER, inplace=True)
    assert [len(step) for step in sm.steps] == [d * n, (d - 1) * n] + [d * n] * (d - 1)
    assert all(t.count == 1 for t in sm.transfers)
    agm = rounds(built(d, "kautz-m", CollKind.ALLGATHER))
    assert len(agm) == d + 1 and all(cnt == 1 for r in agm for *_, cnt in r)
    # every node receives exactly n - 1 blocks
    for rs in (ag, agm):
        got = [0] * n
        for r in rs:
            for _, b, cnt in r:
                got[b] += cnt
        assert got == [n - 1] * n


@pytest.mark.parametrize("d", [2, 3, 4, 5, 8])
def test_trees_cover_and_mirror(d: int) -> None:
    n = d * (d + 1)
    topo = parse_spec(f"kautz:{d},2")
    for variant, steps in (("c", 2), ("m", d + 1)):
        use: dict[tuple[int, int, int], int] = {}
        for r in range(n):
            edges = out_tree(r, d, variant)
            assert sorted(c for _, c, _ in edges) == sorted(set(range(n)) - {r})
            assert all(topo.has_link(p, c) and 1 <= t <= steps for p, c, t in edges)
            ins = in_tree(r, d, variant)
            assert sorted(u for u, _, _ in ins) == sorted(set(range(n)) - {r})
            assert all(topo.has_link(u, v) for u, v, _ in ins)
            for p, c, t in edges:
                use[(p, c, t)] = use.get((p, c, t), 0) + 1
        if variant == "m":   # Kautz-M: contention-free by construction
            assert max(use.values()) == 1


# ---------------------------------------------------------------------- point-to-point multipath (notes 3.10)
def test_multipath_worked_paths() -> None:
    def paths(a: str, b: str, d: int) -> list[str]:
        return ["-".join(kautz_label(r, d, 2) for r in p)
                for p in multipath(kautz_rank(a, d, 2), kautz_rank(b, d, 2), d)]
    assert paths("01", "02", 3) == ["01-10-02", "01-12-20-02", "01-13-30-02"]
    assert paths("01", "10", 3) == ["01-10", "01-12-21-10", "01-13-31-10"]
    assert paths("01", "12", 3) == ["01-12", "01-13-31-12"]
    assert paths("01", "02", 2) == ["01-10-02", "01-12-20-02"]
    assert paths("01", "12", 2) == ["01-12"]          # type 3 on K(2,2): single path (Fig 3.8)


@pytest.mark.parametrize("d, speedup", [(3, 1.58), (4, 2.27), (8, 4.96), (16, 10.31)])
def test_multipath_disjoint_and_eq39(d: int, speedup: float) -> None:
    topo = parse_spec(f"kautz:{d},2")
    n = d * (d + 1)
    hops = 0
    for dst in range(1, n):
        ps = multipath(0, dst, d)
        links = [(a, b) for p in ps for a, b in zip(p, p[1:])]
        assert all(topo.has_link(a, b) for a, b in links) and len(set(links)) == len(links)
        assert max(len(p) for p in ps) - 1 <= 3 and all(p[0] == 0 and p[-1] == dst for p in ps)
        assert len(ps) == (d - 1 if len(ps[0]) == 2 and dst != _rev(0, d) else d)
        hops += len(ps[0]) - 1
    assert hops == 2 * d * d + d - 2                   # eq. 3.7's numerator: shortest-path hops per source
    # eq. 3.9: single-path average hops over multipath's 3 hops of M/d
    assert round((hops / n) / (3 / d), 2) == speedup


def _rev(rank: int, d: int) -> int:
    a, b = (int(x) for x in kautz_label(rank, d, 2).split(".")) if d > 9 else (int(c) for c in kautz_label(rank, d, 2))
    return kautz_rank((b, a), d, 2)


@pytest.mark.parametrize("d", [4, 6])
def test_table32_dragonfly_alltoall_column(d: int) -> None:
    """Table 3.2's Dragonfly alltoall 2 alpha + 2M/(d_i+1) beta, d_i = ceil(d/2): DO on an m x m
    2dfc with m = d_i + 1 (M = per-node buffer)."""
    di = -(-d // 2)
    spec = f"dfc:{di + 1}x{di + 1}"
    m = 1e6
    c = compile_xml(parse_spec(spec), "dfc-do", CollKind.ALLTOALL)
    got = program_step_times(c.program, parse_spec(spec), [m], ALPHA, bandwidth=BW)[0]
    assert got == pytest.approx(2 * ALPHA + 2 * m / (di + 1) / (BW * 1e3))


@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
def test_pipelined_and_instanced(kind: CollKind) -> None:
    for alg in ("kautz-c", "kautz-m"):
        c = compile_xml(parse_spec("kautz:3,2"), alg, kind, chunks=2, instances=2)
        assert c.report.ok, [f.message for f in c.report.errors()][:3]


@pytest.mark.parametrize("d", [2, 3, 4, 8])
def test_table32_scatter_gather_from_the_trees(d: int) -> None:
    """Scatter/gather are not emitted (no runtime collective), but their Table 3.2 cost
    2 alpha + (d+2) M/(d(d+1)) beta follows from the same trees: the root sends each child the
    chunks of its subtree (d+1 at most), the children one chunk each."""
    n = d * (d + 1)
    for root in (0, n - 1):
        edges = out_tree(root, d, "c")
        below = {c: sum(1 for p, _, _ in edges if p == c) for _, c, t in edges if t == 1}
        step1 = max(1 + k for k in below.values())
        assert step1 == d + 1 and sorted(set(1 + k for k in below.values())) == [d, d + 1]
        assert step1 + 1 == d + 2
        # gather mirrors it on the in-tree: d+1 chunks at most into the root
        ins = in_tree(root, d, "c")
        into_root = {u: 1 + sum(1 for _, v, _ in ins if v == u) for u, v, _ in ins if v == root}
        assert max(into_root.values()) == d + 1
