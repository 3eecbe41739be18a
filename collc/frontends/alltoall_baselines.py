"""Alltoall baselines every cluster compares against: pairwise exchange and Bruck.

As described among the production algorithms of Pham, *Low-Latency Collective
Communication for HPC Networks* (PhD thesis, SOKENDAI 2026), section 4.3 (Table 4.3),
after Thakur, Rabenseifner and Gropp (2005) and Bruck et al. (1997); see
``docs/kautz-dfc.md``.  Topology: any on which every rank can reach every other (a
routed network such as ``dfc``, ``torus``, ``hyperx``; a complete graph; a switch).

* ``pairwise``: P-1 steps; at step k rank r sends its block for ``r XOR k`` to it
  (P a power of two) or for ``(r + k) mod P`` to that rank (else), receiving from
  ``(r - k) mod P``.  Cost ``(P-1)(alpha + M/P beta)``: bandwidth-lean, latency-heavy.
  MSCCL threadblocks run independently, so by default (``order=concurrent``) the
  exchanges all go at once: one alpha, but every exchange's traffic shares the links.
  ``order=sendrecv`` keeps them in order as ``MPI_Sendrecv`` does: exchange k lands in
  scratch slot k, from which exchange k+1 sends after local copies out and in.
* ``bruck``: a local rotation (slot j holds the block for ``r + j``), then
  ``ceil(log2 P)`` steps: at step k rank r sends the slots whose bit k is set to
  ``(r + 2^k) mod P``, which stores them in the same slots; finally slot j holds the
  block from ``r - j``.  Cost ``ceil(log2 P) alpha + ceil(log2 P) M/2 beta`` (about
  half the blocks each step): latency-lean, bandwidth-heavy.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> build_schedule("bruck", parse_spec("dfc:4x4"), CollKind.ALLTOALL).nsteps
6
>>> build_schedule("pairwise", parse_spec("dfc:4x4"), CollKind.ALLTOALL, params={"order": "sendrecv"}).nsteps
46
"""

from __future__ import annotations

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, is_pow2
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

__all__ = ["applies", "REFERENCE"]

REFERENCE = ("pairwise exchange and Bruck alltoall (Thakur et al. 2005; Bruck et al. 1997), the baselines of "
             "Pham, Low-Latency Collective Communication for HPC Networks (2026), section 4.3")


def applies(topology: Topology, kind: CollKind) -> str | None:
    """None when every rank can reach every other (routed, linked or through switches)."""
    if kind is not CollKind.ALLTOALL:
        return f"pairwise and bruck implement alltoall only, not {kind.value}"
    if topology.is_routed():
        return None
    n = topology.nranks
    for a in range(n):
        for b in range(n):
            if a != b and topology.route(a, b) is None:
                return (f"pairwise and bruck send between any two ranks; {topology.name} has no link or switch "
                        f"route {a}->{b} and is not a routed network")
    return None


def _check(topology: Topology, request: Collective) -> None:
    reason = applies(topology, request.kind)
    if reason is not None:
        raise ScheduleError(reason)


def build_pairwise(topology: Topology, request: Collective, opts: Options) -> Schedule:
    _check(topology, request)
    if opts.get("order") == "concurrent":
        return _pairwise_concurrent(topology, request, opts)
    n = request.nranks
    b = Builder(Collective(CollKind.ALLTOALL, n, 1, request.inplace))
    # MSCCL threadblocks run independently: P-1 plain sends to P-1 peers would all go at
    # once.  Exchange k instead lands in scratch slot k, which exchange k+1 then reuses to
    # send from (copy out to the output, copy the next block in): so exchange k+1 waits for
    # exchange k's receive, as after MPI_Sendrecv.  In place without XOR partners, received
    # blocks would overwrite blocks still to be sent: the input is staged in scratch first.
    staged = request.inplace and not is_pow2(n)
    base = 1 if staged else 0
    src, off = (S, n) if staged else (I, 0)
    b.scratch = n * (2 if staged else 1)
    for r in range(n):
        if not request.inplace:
            b.move(0, r, r, I, [r], O, [r])
        if staged:
            b.move(0, r, r, I, range(n), S, range(n, 2 * n))

    def partner(r: int, k: int) -> tuple[int, int]:   # (send to, receive from) at exchange k
        return (r ^ k, r ^ k) if is_pow2(n) else ((r + k) % n, (r - k) % n)

    for k in range(1, n):
        t = base + 3 * (k - 1)
        lane = (k - 1) // 31   # a lane per 31 partners: at most 32 tbs per channel and direction
        for r in range(n):
            send_to, recv_from = partner(r, k)
            if k > 1:
                b.move(t, r, r, S, [k - 1], O, [partner(r, k - 1)[1]])
            b.move(t + 1, r, r, src, [send_to + off], S, [k - 1])
            b.move(t + 2, r, send_to, S, [k - 1], S, [k], lane=lane)
            # one tb per exchange (receive and send) keeps dependency targets below tb 128
            b.tb_pairs.append((r, lane, recv_from, send_to))
    for r in range(n):
        b.move(base + 3 * (n - 1), r, r, S, [n - 1], O, [partner(r, n - 1)[1]])
    return b.schedule("pairwise", opts, topology.name, REFERENCE)


def _pairwise_concurrent(topology: Topology, request: Collective, opts: Options) -> Schedule:
    """The same exchanges with no ordering between them: every send goes out at once."""
    n = request.nranks
    b = Builder(Collective(CollKind.ALLTOALL, n, 1, request.inplace))
    staged = request.inplace and not is_pow2(n)   # see build_pairwise
    start = 1 if staged else 0
    for r in range(n):
        if not request.inplace:
            b.move(0, r, r, I, [r], O, [r])
        if staged:
            b.move(0, r, r, I, range(n), S, range(n))
    b.scratch = n if staged else 0
    for k in range(1, n):
        for r in range(n):
            peer = r ^ k if is_pow2(n) else (r + k) % n
            b.move(start + k - 1, r, peer, S if staged else I, [peer], O, [r], lane=(k - 1) // 31)
    return b.schedule("pairwise", opts, topology.name, REFERENCE)


def build_bruck(topology: Topology, request: Collective, opts: Options) -> Schedule:
    _check(topology, request)
    n = request.nranks
    b = Builder(Collective(CollKind.ALLTOALL, n, 1, request.inplace))
    b.scratch = n
    for r in range(n):   # rotation: scratch slot j holds the block for r + j
        b.move(0, r, r, I, [(r + j) % n for j in range(n)], S, range(n))
    k, step = 0, 1
    while (1 << k) < n:
        slots = [j for j in range(n) if j >> k & 1]
        for r in range(n):
            b.move(step, r, (r + (1 << k)) % n, S, slots, S, slots)
        k, step = k + 1, step + 1
    for r in range(n):   # slot j now holds the block from r - j
        b.move(step, r, r, S, range(n), O, [(r - j) % n for j in range(n)])
    return b.schedule("bruck", opts, topology.name, REFERENCE)


register(Algorithm(
    name="pairwise",
    collectives=frozenset({CollKind.ALLTOALL}),
    topologies="any with a route between every pair (routed networks, complete, switch)",
    summary="pairwise-exchange alltoall: P-1 steps, one block to one partner per step",
    reference=REFERENCE, build=build_pairwise, applies=lambda t, r, o: applies(t, r.kind),
    params=(Param("order", str, "concurrent",
                  "concurrent: exchanges run at once (MSCCL has no barrier; fits any --chunks/--instances); "
                  "sendrecv: exchange k waits for exchange k-1 as after MPI_Sendrecv (P-1 rounds; with "
                  "--chunks x --instances > 2 from 17 ranks on, its local tb exceeds 64 steps)",
                  ("concurrent", "sendrecv")),),
    example="collc build --topology dfc:4x4 --algorithm pairwise --collective alltoall -o a2a.xml",
))
register(Algorithm(
    name="bruck",
    collectives=frozenset({CollKind.ALLTOALL}),
    topologies="any with a route between every pair (routed networks, complete, switch)",
    summary="Bruck alltoall: ceil(log2 P) steps sending about half the blocks to rank + 2^k",
    reference=REFERENCE, build=build_bruck, applies=lambda t, r, o: applies(t, r.kind),
    example="collc build --topology dfc:4x4 --algorithm bruck --collective alltoall -o a2a.xml",
))
