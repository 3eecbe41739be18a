"""2dfc DO / MD / parity-MultiTree schedules (thesis chapter 4; docs/kautz-dfc.md).

Costs are measured on the emitted Program: ``program_rounds`` recovers its lockstep
rounds and ``program_step_times`` prices them with the thesis's alpha = 1 us and
beta = 8e-11 s/B (12.5 GB/s links).
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from collc.limits import Dialect
from collc.driver import Compiled, compile_xml
from collc.errors import CollcError
from collc.frontends.dfc import eq44_steps, parity_trees
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.sim.lockstep import program_rounds, program_step_times
from collc.topology import parse_spec

ALPHA, BW = 1.0, 12.5          # us; GB/s = 1 / (8e-11 s/B)
KIB = 1024


@lru_cache(maxsize=None)
def built(spec: str, alg: str, kind: CollKind, inplace: bool = False,
          dialect: Dialect = Dialect.EXECUTOR) -> Compiled:
    return compile_xml(parse_spec(spec), alg, kind, inplace=inplace, dialect=dialect)


def rounds(c: Compiled) -> list[list[tuple[int, int, int]]]:
    return [r for r in program_rounds(c.program) if r]


def time_us(c: Compiled, spec: str, size: float) -> float:
    return program_step_times(c.program, parse_spec(spec), [size], ALPHA, bandwidth=BW)[0]


def chunk_blocks(c: Compiled, cnt: int) -> float:
    """A message's size in blocks (one rank's share) from its chunk count."""
    return cnt * c.program.ngpus / c.program.nchunksperloop


# ---------------------------------------------------------------------- every build passes the check
CASES = [(alg, kind) for alg in ("dfc-do", "dfc-md")
         for kind in (CollKind.ALLTOALL, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE)]
CASES.append(("dfc-multitree", CollKind.ALLTOALL))


@pytest.mark.parametrize("spec", ["dfc:4x4", "dfc:3x4", "dragonfly:3,4"])
@pytest.mark.parametrize("alg, kind", CASES, ids=[f"{a}-{k.value}" for a, k in CASES])
@pytest.mark.parametrize("dialect", [Dialect.EXECUTOR, Dialect.RCCL])
@pytest.mark.parametrize("inplace", [False, True])
def test_builds_and_checks(spec: str, alg: str, kind: CollKind, dialect: Dialect, inplace: bool) -> None:
    if alg == "dfc-multitree" and spec != "dfc:4x4":
        with pytest.raises(CollcError, match="square"):
            build_schedule(alg, parse_spec(spec), kind)
        return
    c = built(spec, alg, kind, inplace, dialect)
    assert c.report.ok, [f.message for f in c.report.errors()][:3]
    for r in rounds(c):   # contention-free: one message per directed link per round
        assert len({(a, b) for a, b, _ in r}) == len(r)


@pytest.mark.parametrize("alg", ["dfc-do", "dfc-md", "dfc-multitree"])
@pytest.mark.parametrize("dialect", [Dialect.EXECUTOR, Dialect.RCCL])
def test_alltoall_8x8_checks(alg: str, dialect: Dialect) -> None:
    c = built("dfc:8x8", alg, CollKind.ALLTOALL, False, dialect)
    assert c.report.ok, [f.message for f in c.report.errors()][:3]


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["dfc-do", "dfc-md", "dfc-multitree"])
@pytest.mark.parametrize("dialect", [Dialect.EXECUTOR, Dialect.RCCL])
def test_alltoall_16x16_checks(alg: str, dialect: Dialect) -> None:
    c = built("dfc:16x16", alg, CollKind.ALLTOALL, False, dialect)
    assert c.report.ok
    assert len(rounds(c)) == (2 if alg != "dfc-multitree" else 9)


def test_not_a_dfc() -> None:
    with pytest.raises(CollcError, match="fully connected network"):
        build_schedule("dfc-do", parse_spec("torus:4x4"), CollKind.ALLTOALL)
    with pytest.raises(CollcError, match="square two-dimensional"):
        build_schedule("dfc-multitree", parse_spec("dfc:3x3x3"), CollKind.ALLTOALL)
    with pytest.raises(CollcError, match="equal sizes"):
        build_schedule("dfc-md", parse_spec("dfc:2x3x4"), CollKind.ALLTOALL)


# ---------------------------------------------------------------------- n dimensions (section 4.5)
ND = [("dfc:3x3x3", "dfc-do"), ("dfc:3x3x3", "dfc-md"), ("dfc:2x3x4", "dfc-do"), ("dfc:2x2x2x2", "dfc-md")]


@pytest.mark.parametrize("spec, alg", ND)
@pytest.mark.parametrize("kind", [CollKind.ALLTOALL, CollKind.ALLGATHER, CollKind.REDUCESCATTER,
                                  CollKind.ALLREDUCE], ids=lambda k: k.value)
def test_nd_builds_and_checks(spec: str, alg: str, kind: CollKind) -> None:
    ndim = spec.count("x") + 1
    for inplace, dialect in ((False, Dialect.EXECUTOR), (True, Dialect.RCCL)):
        c = built(spec, alg, kind, inplace, dialect)
        assert c.report.ok, [f.message for f in c.report.errors()][:3]
        rs = rounds(c)
        assert len(rs) == (2 * ndim if kind is CollKind.ALLREDUCE else ndim)
        topo = parse_spec(spec)
        for r in rs:
            assert len({(a, b) for a, b, _ in r}) == len(r) and all(topo.has_link(a, b) for a, b, _ in r)


def test_nd_alltoall_costs() -> None:
    """3x3x3: DO sends N/M = 9 blocks per link in each of 3 steps; MD's three rotated orders keep
    every link busy with a third of that: 3 alpha + 9 b beta against 3 alpha + 27 b beta."""
    b = 64 * KIB
    beta_b = b / (BW * 1e3)
    assert time_us(built("dfc:3x3x3", "dfc-do", CollKind.ALLTOALL), "dfc:3x3x3", 27 * b) == pytest.approx(3 + 27 * beta_b)
    assert time_us(built("dfc:3x3x3", "dfc-md", CollKind.ALLTOALL), "dfc:3x3x3", 27 * b) == pytest.approx(3 + 9 * beta_b)


# ---------------------------------------------------------------------- eq. 4.4 step counts
@pytest.mark.parametrize("m, steps", [(4, 3), (6, 4), (8, 5), (16, 9)])
def test_eq44_parity_build_steps(m: int, steps: int) -> None:
    assert eq44_steps(m, m) == steps
    trees = parity_trees(m, parse_spec(f"dfc:{m}x{m}"))   # validated: spanning, each link once per step
    assert trees.steps == steps
    # every directed link is busy in every step but the last (which is half full for even m)
    assert all(used == 2 * m * m * (m - 1) for used in trees.links_used[:-1])


@pytest.mark.parametrize("m", [4, 6, 8])
def test_parity_multitree_program_rounds(m: int) -> None:
    c = built(f"dfc:{m}x{m}", "dfc-multitree", CollKind.ALLTOALL)
    rs = rounds(c)
    assert len(rs) == eq44_steps(m, m)
    # step 1 carries the neighbour's chunk and its children's: ceil(m/2) + 1; later steps 1
    assert [max(cnt for *_, cnt in r) for r in rs] == [-(-m // 2) + 1] + [1] * (len(rs) - 1)


# ---------------------------------------------------------------------- Table 4.2 / Fig. 4.8 (notes 4.5)
FIG48 = [  # m, b, DO, MT (Table 4.2 formula), MD in us
    (4, 32 * KIB, 22.97, 12.49, 12.49),
    (8, 1 * KIB, 3.31, 4.66, 2.66),
    (8, 32 * KIB, 43.94, 24.97, 22.97),
]
FIG48_SLOW = [(16, 1 * KIB, 4.62, 9.31, 3.31), (16, 32 * KIB, 85.89, 49.94, 43.94),
              (16, 1024 * KIB, 2686, 1350, 1344)]


def _printed(value: float) -> float:
    """Half a unit of the last printed digit: 2 decimals below 1000 us, integers above."""
    return 0.5 if value >= 1000 else 0.005 + 1e-9


def _fig48(m: int, b: int, do: float, mt_table: float, md: float) -> None:
    spec, n = f"dfc:{m}x{m}", m * m
    beta_b = b / (BW * 1e3)
    assert time_us(built(spec, "dfc-do", CollKind.ALLTOALL), spec, n * b) == pytest.approx(do, abs=_printed(do))
    assert time_us(built(spec, "dfc-md", CollKind.ALLTOALL), spec, n * b) == pytest.approx(md, abs=_printed(md))
    # Table 4.2 prints t_MT = (m/2) alpha + m b beta; the construction it describes needs one
    # more step and one more chunk (notes 4.2): (m/2 + 1) alpha + (m + 1) b beta
    assert (m / 2) * ALPHA + m * beta_b == pytest.approx(mt_table, abs=_printed(mt_table))
    mt = time_us(built(spec, "dfc-multitree", CollKind.ALLTOALL), spec, n * b)
    assert mt == pytest.approx((m / 2 + 1) * ALPHA + (m + 1) * beta_b)
    assert mt - mt_table == pytest.approx(ALPHA + beta_b, abs=_printed(mt_table) + 0.01)


@pytest.mark.parametrize("m, b, do, mt_table, md", FIG48)
def test_fig48_alltoall_times(m: int, b: int, do: float, mt_table: float, md: float) -> None:
    _fig48(m, b, do, mt_table, md)


@pytest.mark.slow
@pytest.mark.parametrize("m, b, do, mt_table, md", FIG48_SLOW)
def test_fig48_alltoall_times_16x16(m: int, b: int, do: float, mt_table: float, md: float) -> None:
    _fig48(m, b, do, mt_table, md)


@pytest.mark.parametrize("spec, m2, m1", [("dfc:4x4", 4, 4), ("dfc:4x3", 4, 3), ("dfc:3x4", 3, 4)])
def test_table42_do_md_costs(spec: str, m2: int, m1: int) -> None:
    """t_DO = 2 alpha + (m1 + m2) b beta (eq. 4.5); t_MD = 2 alpha + max(m1, m2) b beta (eq. 4.6)."""
    n, b = m2 * m1, 64 * KIB
    beta_b = b / (BW * 1e3)
    assert time_us(built(spec, "dfc-do", CollKind.ALLTOALL), spec, n * b) == pytest.approx(2 + (m1 + m2) * beta_b)
    assert time_us(built(spec, "dfc-md", CollKind.ALLTOALL), spec, n * b) == pytest.approx(2 + max(m1, m2) * beta_b)


@pytest.mark.parametrize("m", [3, 4, 8])
def test_allgather_reducescatter_allreduce_costs(m: int) -> None:
    """Notes 4.4: DO allgather 2 alpha + (1 + m) b beta, MD allgather 2 alpha + (m+1)/2 b beta,
    DO reduce-scatter 2 alpha + (m + 1) b beta; allreduce DO RS + MD AG in 4 steps."""
    spec, n, b = f"dfc:{m}x{m}", m * m, 64 * KIB
    beta_b = b / (BW * 1e3)
    ag_do = time_us(built(spec, "dfc-do", CollKind.ALLGATHER), spec, n * b)
    ag_md = time_us(built(spec, "dfc-md", CollKind.ALLGATHER), spec, n * b)
    rs_do = time_us(built(spec, "dfc-do", CollKind.REDUCESCATTER), spec, n * b)
    assert ag_do == pytest.approx(2 + (1 + m) * beta_b)
    assert ag_md == pytest.approx(2 + (m + 1) / 2 * beta_b)
    assert rs_do == pytest.approx(2 + (m + 1) * beta_b)
    ar = built(spec, "dfc-md", CollKind.ALLREDUCE, True)
    assert len(rounds(ar)) == 4
    assert time_us(ar, spec, n * b) == pytest.approx(rs_do + ag_md)


# ---------------------------------------------------------------------- 3x3 worked example (notes 4.6)
def _from0(alg: str, step: int) -> dict[int, tuple[str, tuple[int, ...], str, tuple[int, ...]]]:
    s = build_schedule(alg, parse_spec("dfc:3x3"), CollKind.ALLTOALL)
    return {t.dst: (t.src_buf.value, tuple(t.src_idx), t.dst_buf.value, tuple(t.dst_idx))
            for t in s.step(step) if t.src == 0 and not t.is_local}


def test_3x3_do() -> None:
    # ranks: (a2 a1) -> 3 a2 + a1; S1 00->01 carries D[00,01], D[00,11], D[00,21]
    s1 = _from0("dfc-do", 0)
    assert sorted(s1) == [1, 2]
    assert s1[1][:2] == ("i", (1, 4, 7)) and s1[2][:2] == ("i", (2, 5, 8))
    # S2 00->10 carries D[00,10], D[01,10], D[02,10]: into rank 3's output slots of 00, 01, 02
    s2 = _from0("dfc-do", 1)
    assert sorted(s2) == [3, 6]
    assert s2[3][2:] == ("o", (0, 1, 2)) and s2[6][2:] == ("o", (0, 1, 2))
    c = built("dfc:3x3", "dfc-do", CollKind.ALLTOALL)
    assert [sorted({chunk_blocks(c, cnt) for *_, cnt in r}) for r in rounds(c)] == [[3.0], [3.0]]
    assert time_us(c, "dfc:3x3", 9 * 100_000) == pytest.approx(2 + 6 * 100_000 / 12_500)


def test_3x3_md() -> None:
    # x = 1/2: chunk 2q is the X-first half of block q, chunk 2q+1 the Y-first half
    s1 = _from0("dfc-md", 0)
    assert s1[1][:2] == ("i", (2, 8, 14))       # 1/2 of D[00,01], D[00,11], D[00,21]
    assert s1[3][:2] == ("i", (7, 9, 11))       # 1/2 of D[00,10], D[00,11], D[00,12]
    s2 = _from0("dfc-md", 1)
    assert s2[3][2:] == ("o", (0, 2, 4))        # 1/2 of D[00,10], D[01,10], D[02,10]
    assert s2[1][2:] == ("o", (1, 7, 13))       # 1/2 of D[00,01], D[10,01], D[20,01]
    c = built("dfc:3x3", "dfc-md", CollKind.ALLTOALL)
    assert time_us(c, "dfc:3x3", 9 * 100_000) == pytest.approx(2 + 3 * 100_000 / 12_500)


def test_3x3_multitree() -> None:
    tree0 = parity_trees(3).edges[0]
    assert sorted((p, ch) for p, ch, t in tree0 if t == 1) == [(0, 1), (0, 2), (0, 3), (0, 6)]
    # 10 -> 11, 20 -> 22, 01 -> 21, 02 -> 12
    assert sorted((p, ch) for p, ch, t in tree0 if t == 2) == [(1, 7), (2, 5), (3, 4), (6, 8)]
    c = built("dfc:3x3", "dfc-multitree", CollKind.ALLTOALL)
    assert time_us(c, "dfc:3x3", 9 * 100_000) == pytest.approx(2 + 3 * 100_000 / 12_500)


def test_6x6_parity_example() -> None:
    """Notes 4.2: 10 -> 11, 13, 15; 20 -> 22, 24; 01 -> 21, 41; 02 -> 12, 32, 52 (root 00)."""
    kids: dict[int, list[int]] = {}
    for p, ch, _ in parity_trees(6).edges[0]:
        kids.setdefault(p, []).append(ch)
    assert sorted(kids[6]) == [7, 9, 11] and sorted(kids[12]) == [14, 16]
    assert sorted(kids[1]) == [13, 25] and sorted(kids[2]) == [8, 20, 32]


@pytest.mark.parametrize("alg, kind", CASES, ids=[f"{a}-{k.value}" for a, k in CASES])
def test_pipelined_and_instanced(alg: str, kind: CollKind) -> None:
    c = compile_xml(parse_spec("dfc:3x3"), alg, kind, chunks=3, instances=2)
    assert c.report.ok, [f.message for f in c.report.errors()][:3]
