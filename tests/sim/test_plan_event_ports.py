"""Port channels in the plan timing model (collc/sim/plan_event.py; issue 28 item 4): the NIC's
bandwidth and latency from the topology, the proxy's cost per request served in order, and flush.

The hand-computed case: the ring allgather on two ranks in two hosts (``ring:2:bw=B,lat=L:hosts=2``).
Each rank's tb 0 runs ``pws; flush; wait`` and its tb 1 ``wait; copy; signal``.  With chunk C bytes
(half the gathered size), alpha a and proxy cost p:

* ``pws`` is served by the proxy at p, flows from p + a for C / B, lands L later with its signal;
* ``flush`` is the second request (served at 2p) and ends when the put has left (p + a + C/B);
* the peer's tb 1 wakes at p + a + C/B + L and signals back: one more request (p) and L;
* so the time is 2p + a + C/B + 2L.
"""

from __future__ import annotations

import pytest

from collc.compiler.mscclpp.plan import OpName, Plan
from collc.driver import compile_plan
from collc.errors import CollcError
from collc.ir.collective import CollKind
from collc.sim.plan_event import time_plan, trace_plan
from collc.topology import Topology, parse_spec


def _two_hosts(bw: float, lat: float) -> tuple[Topology, Plan]:
    topo = parse_spec(f"ring:2:bw={bw:g},lat={lat:g}:hosts=2")
    return topo, compile_plan(topo, "ring", CollKind.ALLGATHER, inplace=False).plan


@pytest.mark.parametrize("bw,lat,alpha,proxy,size", [
    (10.0, 2.0, 5.0, 1.0, 200_000),
    (25.0, 0.0, 5.0, 0.0, 1 << 20),
    (25.0, 3.5, 0.0, 2.5, 1 << 24),
])
def test_two_hosts_by_hand(bw: float, lat: float, alpha: float, proxy: float, size: int) -> None:
    topo, plan = _two_hosts(bw, lat)
    ops = [[op.name for op in tb.flat_ops() if op.name is not OpName.NOP] for tb in plan.gpus[0].threadblocks]
    assert ops[:2] == [[OpName.PUT_WITH_SIGNAL, OpName.FLUSH, OpName.WAIT], [OpName.WAIT, OpName.COPY, OpName.SIGNAL]]
    chunk = size / 2
    expect = 2 * proxy + alpha + chunk / (bw * 1e3) + 2 * lat
    got = time_plan(plan, topo, [size], alpha_us=alpha, proxy_us=proxy)[0]
    assert got == pytest.approx(expect, rel=1e-9)


def test_proxy_serves_requests_one_after_another() -> None:
    """Four ranks per host pair, one NIC each: more requests per proxy cost more than one proxy cost, and
    the proxy cost adds to the time where it lies on the critical path (monotone in p)."""
    topo = parse_spec("ring:4:hosts=2")
    plan = compile_plan(topo, "ring", CollKind.ALLGATHER).plan
    times = [time_plan(plan, topo, [1 << 16], alpha_us=1.0, proxy_us=p)[0] for p in (0.0, 1.0, 4.0)]
    assert times[0] < times[1] < times[2]


def test_topology_latency_counts_and_memory_channels_too() -> None:
    """A link's ``lat=`` is paid by every message that crosses it, memory channels included (one host)."""
    flat = parse_spec("ring:4:hosts=1")
    slow = parse_spec("ring:4:lat=3:hosts=1")
    plan = compile_plan(flat, "ring", CollKind.ALLGATHER).plan
    t0 = time_plan(plan, flat, [4096], alpha_us=1.0)[0]
    t1 = time_plan(plan, slow, [4096], alpha_us=1.0)[0]
    assert t1 > t0 + 3.0


def test_flush_waits_for_the_proxy() -> None:
    """The tb that flushes is blocked until its put left and the proxy served the flush: its trace shows
    a wait span on tb 0 of at least the proxy cost when the put is instantaneous (tiny size)."""
    topo, plan = _two_hosts(1000.0, 0.0)
    _, names, spans = trace_plan(plan, topo, 32, alpha_us=0.0, proxy_us=3.0)
    tb0 = names.index((0, 0))
    waits = [s for s in spans if s[0] == tb0 and s[1] == "wait"]
    assert waits and waits[0][2] == pytest.approx(0.0) and waits[0][3] >= 6.0 - 1e-9


def test_negative_proxy_cost_is_refused() -> None:
    topo, plan = _two_hosts(10.0, 0.0)
    with pytest.raises(CollcError, match="proxy cost"):
        time_plan(plan, topo, [1024], proxy_us=-1.0)
