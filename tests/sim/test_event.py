"""Event simulation: step-model agreement, lower bounds, exact sharing/latency/reduce cases,
dependencies, FIFO capacity, deadlock, determinism and monotonicity."""

from __future__ import annotations

from functools import lru_cache

import pytest

from collc.compiler.msccl.program import Gpu, Program, Proto, Step, StepType, Threadblock
from collc.driver import Compiled, compile_xml
from collc.errors import CollcError, TopologyError, VerifyError
from collc.frontends.registry import algorithms
from collc.ir.collective import CollKind
from collc.sim.analysis import lower_bounds, step_time
from collc.sim.event import max_min_rates, simulate_program
from collc.sim.routing import Router
from collc.topology import parse_spec

MIB = 1 << 20
GIB = 1 << 30
ALPHA = 5.0


@lru_cache(maxsize=None)
def _compiled(spec: str, algorithm: str, kind: CollKind) -> Compiled:
    return compile_xml(parse_spec(spec), algorithm, kind, inplace=True)


def _one(spec: str, algorithm: str, kind: CollKind, size: int, *, alpha_us: float = 0.0,
         link_bw: float | None = None, hop_latency_us: float = 0.0, reduce_us_per_byte: float = 0.0) -> float:
    c = _compiled(spec, algorithm, kind)
    return simulate_program(c.program, parse_spec(spec), [size], alpha_us=alpha_us, link_bw=link_bw,
                            hop_latency_us=hop_latency_us, reduce_us_per_byte=reduce_us_per_byte)[0].time_us


# A hand-made step: (type, cnt, depid, deps, hasdep); a tb: (send, recv, steps).
HStep = tuple[str, int, int, int, int]
HTb = tuple[int, int, list[HStep]]


def _program(ngpus: int, nchunks: int, tbs: dict[int, list[HTb]], proto: Proto = Proto.SIMPLE) -> Program:
    gpus = []
    for gid in range(ngpus):
        out = []
        for tid, (send, recv, steps) in enumerate(tbs.get(gid, [])):
            out.append(Threadblock(tid, send, recv, 0, tuple(
                Step(pos, StepType(ty), "i", 0, "i", 0, cnt, depid, deps, hasdep)
                for pos, (ty, cnt, depid, deps, hasdep) in enumerate(steps))))
        gpus.append(Gpu(gid, nchunks, 0, 0, tuple(out)))
    return Program("hand", proto, 1, nchunks, ngpus, "alltoall", 1, 0, 0, 0, tuple(gpus))


def _send(cnt: int = 1, depid: int = -1, deps: int = -1, hasdep: int = 0) -> HStep:
    return ("s", cnt, depid, deps, hasdep)


def _recv(cnt: int = 1, depid: int = -1, deps: int = -1, hasdep: int = 0) -> HStep:
    return ("r", cnt, depid, deps, hasdep)


# --------------------------------------------------------------------------- 1. step model
@pytest.mark.parametrize("size", [256 * MIB, GIB])
def test_ring_allreduce_large_sizes_match_the_step_model(size: int) -> None:
    topo = parse_spec("ring:8")
    c = _compiled("ring:8", "ring", CollKind.ALLREDUCE)
    assert c.program.nchannels == 1
    n, rate = 8, 1.0 * 1e3          # ring:8 links are 1 GB/s = 1e3 bytes/us
    t = simulate_program(c.program, topo, [size], alpha_us=ALPHA)[0].time_us
    assert t == pytest.approx(2 * (n - 1) * (ALPHA + size / (n * rate)), rel=0.01)
    assert t == pytest.approx(step_time(c.schedule, topo, size, ALPHA), rel=0.01)


# --------------------------------------------------------------------------- 2. lower bounds
@pytest.mark.parametrize("spec", ["ring:8", "hypercube:3", "switch:8", "torus:4x4"])
def test_never_below_the_lower_bound(spec: str) -> None:
    topo = parse_spec(spec)
    sizes = [1024, MIB, 64 * MIB]
    ran = 0
    for alg in algorithms():
        for kind in sorted(alg.collectives, key=lambda k: k.value):
            try:
                c = _compiled(spec, alg.name, kind)
            except CollcError:
                continue
            for r in simulate_program(c.program, topo, sizes, alpha_us=ALPHA):
                bound = lower_bounds(kind, topo, r.size_bytes, ALPHA).total_us
                assert r.time_us >= bound * (1 - 1e-9), (alg.name, kind.value, r.size_bytes)
            ran += 1
    assert ran >= 3


# --------------------------------------------------------------------------- 3. exact cases
def test_max_min_rates_progressive_filling_with_fractions() -> None:
    assert max_min_rates([[(0, 1.0)], [(0, 1.0), (1, 1.0)], [(1, 1.0)]], {0: 10.0, 1: 30.0}) == \
        pytest.approx([5.0, 5.0, 25.0])
    # a flow half on link 0 and half on link 1 against a whole flow on link 0
    assert max_min_rates([[(0, 0.5), (1, 0.5)], [(0, 1.0)]], [1.0, 1.0]) == pytest.approx([2 / 3, 2 / 3])
    assert max_min_rates([[]], []) == [float("inf")]


def test_direct_allgather_on_a_switch_shares_each_uplink_three_ways() -> None:
    # 4000 bytes: 1000-byte chunks; each rank sends 3 at once through its 1 GB/s uplink
    assert _one("switch:4", "direct", CollKind.ALLGATHER, 4000, alpha_us=1.0) == pytest.approx(1.0 + 3.0)
    assert _one("switch:4", "direct", CollKind.ALLGATHER, 4000, alpha_us=1.0, link_bw=2.0) == \
        pytest.approx(1.0 + 1.5)


def test_two_messages_on_one_link_split_it_then_the_survivor_speeds_up() -> None:
    # gpu 0 sends 1 chunk to gpu 1 and 2 chunks to gpu 2 through its one switch uplink:
    # both at 500 B/us until the short one ends at 2 us, then 1000 B at 1000 B/us
    prog = _program(3, 4, {0: [(1, -1, [_send(1)]), (2, -1, [_send(2)])],
                           1: [(-1, 0, [_recv(1)])], 2: [(-1, 0, [_recv(2)])]})
    assert simulate_program(prog, parse_spec("switch:3"), [4000])[0].time_us == pytest.approx(3.0)
    # on a complete graph the two messages use different links
    assert simulate_program(prog, parse_spec("complete:3"), [4000])[0].time_us == pytest.approx(2.0)


def test_half_duplex_links_share_both_directions() -> None:
    # gpu 0 and gpu 1 send each other 1000 bytes at once: 1 us on full-duplex links,
    # 2 us when both directions share one 1000 B/us capacity (SimGrid's SHARED policy)
    prog = _program(2, 4, {0: [(1, 1, [_send(1), _recv(1)])], 1: [(0, 0, [_send(1), _recv(1)])]})
    topo = parse_spec("complete:2")
    assert simulate_program(prog, topo, [4000])[0].time_us == pytest.approx(1.0)
    assert simulate_program(prog, topo, [4000], half_duplex=True)[0].time_us == pytest.approx(2.0)
    # a one-way ring does not notice
    ring = _program(3, 3, {0: [(1, 2, [_send(1), _recv(1)])], 1: [(2, 0, [_send(1), _recv(1)])],
                           2: [(0, 1, [_send(1), _recv(1)])]})
    assert simulate_program(ring, parse_spec("complete:3"), [3000], half_duplex=True)[0].time_us == \
        pytest.approx(1.0)


def test_alpha_and_hop_latency_add_per_message() -> None:
    base = _one("ring:4", "ring", CollKind.ALLREDUCE, 4096)
    # 2(N-1) = 6 messages on the critical path, each one hop
    assert _one("ring:4", "ring", CollKind.ALLREDUCE, 4096, alpha_us=2.5) == pytest.approx(base + 6 * 2.5)
    assert _one("ring:4", "ring", CollKind.ALLREDUCE, 4096, hop_latency_us=0.5) == pytest.approx(base + 6 * 0.5)
    # through a switch a message crosses two links
    sw = _one("switch:4", "direct", CollKind.ALLGATHER, 4000)
    assert _one("switch:4", "direct", CollKind.ALLGATHER, 4000, hop_latency_us=0.5) == pytest.approx(sw + 1.0)


def test_wire_latency_is_pipelined_and_alpha_is_the_senders() -> None:
    # two 1000-byte messages back to back on one tb at 1000 B/us: the second starts when the
    # first's last byte is on the wire, so the hop latency is paid once, alpha once per message
    prog = _program(2, 4, {0: [(1, -1, [_send(1), _send(1)])], 1: [(-1, 0, [_recv(1), _recv(1)])]})
    topo = parse_spec("complete:2")
    assert simulate_program(prog, topo, [4000])[0].time_us == pytest.approx(2.0)
    assert simulate_program(prog, topo, [4000], hop_latency_us=0.5)[0].time_us == pytest.approx(2.5)
    assert simulate_program(prog, topo, [4000], alpha_us=0.25, hop_latency_us=0.5)[0].time_us == \
        pytest.approx(3.0)


def test_reduce_cost_slows_reductions() -> None:
    # ring:4 allreduce at 4000 bytes: 1000-byte chunks; rrs, rrs, rrcs on the critical path
    base = _one("ring:4", "ring", CollKind.ALLREDUCE, 4000)
    slow = _one("ring:4", "ring", CollKind.ALLREDUCE, 4000, reduce_us_per_byte=1e-3)
    assert slow == pytest.approx(base + 3 * 1.0)
    # a local re of 2 chunks costs 2 x chunk bytes; a cpy costs nothing
    prog = _program(1, 2, {0: [(-1, -1, [("re", 2, -1, -1, 0), ("cpy", 2, -1, -1, 0)])]})
    assert simulate_program(prog, parse_spec("ring:2"), [2000], reduce_us_per_byte=1e-3)[0].time_us == \
        pytest.approx(2.0)


def test_busbw_factors_match_nccl_tests() -> None:
    for spec, alg, kind, factor in [("ring:8", "ring", CollKind.ALLREDUCE, 2 * 7 / 8),
                                    ("ring:8", "ring", CollKind.ALLGATHER, 7 / 8),
                                    ("hypercube:3", "binomial-tree", CollKind.BROADCAST, 1.0)]:
        c = _compiled(spec, alg, kind)
        r = simulate_program(c.program, parse_spec(spec), [MIB], alpha_us=ALPHA)[0]
        assert r.algbw == pytest.approx(MIB / (r.time_us * 1e3))
        assert r.busbw == pytest.approx(r.algbw * factor)


# --------------------------------------------------------------------------- execution model
def test_dependencies_wait_for_published_flags() -> None:
    # complete:3, 1000-byte chunks, alpha 1: each message takes 2 us on its own link
    topo = parse_spec("complete:3")
    free = _program(3, 3, {0: [(1, -1, [_send()]), (2, -1, [_send()])], 1: [(-1, 0, [_recv()])],
                           2: [(-1, 0, [_recv()])]})
    dep = _program(3, 3, {0: [(1, -1, [_send(hasdep=1)]), (2, -1, [_send(depid=0, deps=0)])],
                          1: [(-1, 0, [_recv()])], 2: [(-1, 0, [_recv()])]})
    nop = _program(3, 3, {0: [(1, -1, [_send(hasdep=1)]), (2, -1, [("nop", 0, 0, 0, 0), _send()])],
                          1: [(-1, 0, [_recv()])], 2: [(-1, 0, [_recv()])]})
    assert simulate_program(free, topo, [3000], alpha_us=1.0)[0].time_us == pytest.approx(2.0)
    assert simulate_program(dep, topo, [3000], alpha_us=1.0)[0].time_us == pytest.approx(4.0)
    assert simulate_program(nop, topo, [3000], alpha_us=1.0)[0].time_us == pytest.approx(4.0)
    # without hasdep the flag is never published: a hang, reported with the size and a tb
    hang = _program(3, 3, {0: [(1, -1, [_send()]), (2, -1, [_send(depid=0, deps=0)])],
                           1: [(-1, 0, [_recv()])], 2: [(-1, 0, [_recv()])]})
    with pytest.raises(VerifyError, match=r"3000 bytes.*gpu 0 tb 1"):
        simulate_program(hang, topo, [3000])


def test_a_connection_holds_two_simple_pieces_at_large_sizes() -> None:
    # 2 MiB chunks (one run of the program: 2 MiB is the executor's Simple chunkSize): mac = 1
    # and a Simple piece takes 4 of 8 slots.  gpu 1's receiver waits 10000 us for a local
    # reduction, so gpu 0's third piece waits for space until then.  (These were 4 MiB chunks
    # before the model ran the program once per 2 MiB run.)
    tbs: dict[int, list[HTb]] = {0: [(1, -1, [_send(), _send(), _send()])],
                                 1: [(-1, 0, [_recv(depid=1, deps=0), _recv(), _recv()]),
                                     (-1, -1, [("re", 1, -1, -1, 1)])]}
    c = 2 * MIB
    xfer = c / 1e3                         # us per piece at 1 GB/s
    simple = simulate_program(_program(2, 4, tbs), parse_spec("complete:2"), [4 * c],
                              reduce_us_per_byte=10000.0 / c)[0]
    assert simple.time_us == pytest.approx(10000.0 + xfer)
    c = 32 * 1024                          # LL's chunkSize: one run again
    xfer = c / 1e3
    ll = simulate_program(_program(2, 4, tbs, Proto.LL), parse_spec("complete:2"), [4 * c],
                          reduce_us_per_byte=2 * xfer / c)[0]
    # LL: 8 one-slot pieces, never full here: the three go back to back whatever the
    # receiver does (a 2-piece reduction); Simple would wait for it before the third
    assert ll.time_us == pytest.approx(3 * xfer)
    simple = simulate_program(_program(2, 4, tbs), parse_spec("complete:2"), [4 * c],
                              reduce_us_per_byte=2 * xfer / c)[0]
    assert simple.time_us == pytest.approx(3 * xfer)  # 32 KiB Simple pieces take 2 slots: 4 fit


def test_deadlock_names_size_and_tb() -> None:
    prog = _program(2, 2, {0: [(-1, 1, [_recv()])], 1: [(-1, 0, [_recv()])]})
    with pytest.raises(VerifyError, match=r"2000 bytes.*gpu 0 tb 0"):
        simulate_program(prog, parse_spec("ring:2"), [2000])


def test_arguments_and_progress() -> None:
    c = _compiled("ring:4", "ring", CollKind.ALLREDUCE)
    topo = parse_spec("ring:4")
    calls: list[tuple[int, int]] = []
    res = simulate_program(c.program, topo, [1024, 2048, 4096], router=Router(topo),
                           progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert [r.size_bytes for r in res] == [1024, 2048, 4096]
    with pytest.raises(CollcError):
        simulate_program(c.program, topo, [0])
    with pytest.raises(CollcError):
        simulate_program(c.program, topo, [1024], alpha_us=-1.0)
    with pytest.raises(TopologyError):
        simulate_program(c.program, parse_spec("ring:2"), [1024])


# --------------------------------------------------------------------------- 4. determinism
CASES = [("switch:8", "binomial-tree", CollKind.BROADCAST), ("torus:4x4", "direct", CollKind.ALLTOALL),
         ("hypercube:3", "recursive-halving-doubling", CollKind.ALLREDUCE), ("ring:8", "ring", CollKind.ALLGATHER)]


@pytest.mark.parametrize("spec,alg,kind", CASES)
def test_deterministic_and_monotone_in_size(spec: str, alg: str, kind: CollKind) -> None:
    c = _compiled(spec, alg, kind)
    sizes = [1024 * 4 ** k for k in range(11)]          # 1 KiB .. 1 GiB
    a, b = (simulate_program(c.program, parse_spec(spec), sizes, alpha_us=ALPHA, hop_latency_us=0.3,
                             reduce_us_per_byte=1e-5) for _ in range(2))
    assert a == b
    times = [r.time_us for r in a]
    assert all(x <= y for x, y in zip(times, times[1:])), times
