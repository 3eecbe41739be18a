"""Torus baselines of the Swing paper (De Sensi et al., NSDI'24, section 2.3, 4.1, 5).

Family page: docs/torus-baselines.md (what it does, the paper, the check values and their tests).

All four are allreduce, in place or out of place, on a routed grid network whose
params carry ``dims`` (``torus:RxC``, ``torus:AxBxC``, ``mesh:..``, ``hyperx:RxC``,
``hammingmesh:AxB:XxY``; ranks row-major, last dimension fastest).  The 1-D ones (RD,
mirrored RD, bucket) also run on a bidirectional ``ring:N``, the 1-D torus whose ranks
forward nothing: transfers between non-neighbours are relayed (``collc.frontends.ring_relay``).  Transfers go
between any two ranks and the network forwards them (Swing NSDI'24 section 2.3; docs/torus-baselines.md).

``recursive-doubling-torus`` (``variant=bandwidth`` default, or ``latency``):
the torus-aware recursive doubling.  Every dimension size must be a power of two.
Step ``s`` works on one dimension, round-robin from the **last** (fastest,
"horizontal") dimension backwards, skipping dimensions whose ``log2 d`` steps are
used up; ``sigma`` counts the steps inside a dimension, and the partner flips bit
``sigma`` of that coordinate (distance ``2^sigma``, Fig. 2).  ``latency``: log2 p
steps, the whole vector each step (Lambda 1, Psi D log2 p).  ``bandwidth``
(Rabenseifner): a reduce-scatter of log2 p steps whose data halves while the
distance doubles, then an allgather in reverse (2 log2 p steps, Psi 2D, one port).
On 64x64 the busiest directed link carries [1,1,2,2,4,4,8,8,16,16,16,16] messages
in the reduce-scatter steps (the d/2 steps split over both ways) and Xi on 8x8 is
1.2188 (Swing NSDI'24 section 4.1, Table 2).

``mirrored-recursive-doubling`` (same ``variant``): the authors' multiport RD
(section 4.1, Fig. 7).  The vector is cut into 2D shares, one RD collective per
share and lane: collective ``c`` starts on dimension ``c mod D`` of the round-robin
order, and collectives ``c >= D`` are mirrored (their coordinates are reflected,
``x -> -x mod d``, so they go the opposite way round every ring).  Same step count
as one RD collective.

``bucket`` (Barnett et al.; Jain & Sabharwal; section 2.3.4): 2D concurrent
instances, instance ``c`` visiting the dimensions round-robin from ``c mod D`` in
direction ``+1`` (``c < D``) or ``-1``; each runs a ring reduce-scatter along each
dimension in turn on the part reduced so far, then ring allgathers in reverse order.
Instances move between dimensions in lockstep: ``2 D (d_max - 1)`` steps.  Every
directed link carries one message per step on tori with sides >= 3 (Psi 1, Xi 1).

``hamiltonian-rings`` (section 2.3.1): on a 2D ``R x C`` torus, two edge-disjoint
Hamiltonian cycles (a Hamiltonian decomposition), each run as a ring allreduce in
both directions; the four rings each carry a quarter of the vector (half per cycle),
``2 (p - 1)`` steps, every directed link used by exactly one ring (Xi 1).  The cycles
are the two "helices" of the construction the paper cites: cycle A walks ``c-1``
steps along a row then one down; cycle B is the complement (``c-1`` steps down a
column, one right).  It works iff ``R = C k`` and ``gcd(R, C-1) = 1`` (tried in both
orientations; both sides >= 3); elsewhere ScheduleError.  (Kotzig's theorem gives a
decomposition of every ``C_R x C_C``; collc builds only the paper's construction.)

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> t = parse_spec("torus:4x4")
>>> build_schedule("recursive-doubling-torus", t, CollKind.ALLREDUCE, inplace=True).nsteps
8
>>> build_schedule("bucket", t, CollKind.ALLREDUCE, inplace=True).nsteps
12
>>> build_schedule("hamiltonian-rings", t, CollKind.ALLREDUCE, inplace=True).lanes
4
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from collc.errors import ScheduleError
from collc.frontends.common import I, O, Builder, is_pow2, prefix_copy, refusal_of
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.frontends.ring_relay import is_relay_ring, relay, ring_refusal
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REF_RD = "Swing NSDI'24 section 2.3.2-2.3.3 (torus recursive doubling, latency/bandwidth-optimal); Fig. 2"
REF_MRD = "Swing NSDI'24 sections 4.1 and 5.1 (mirrored recursive doubling, Fig. 7)"
REF_BUCKET = "Barnett et al. 1993; Jain & Sabharwal 2010; Swing NSDI'24 section 2.3.4"
REF_HAM = "HammingMesh (Hoefler et al. SC'22) Hamiltonian decomposition; Swing NSDI'24 section 2.3.1"

VARIANTS = ("bandwidth", "latency")
ALLREDUCE_ONLY = frozenset({CollKind.ALLREDUCE})


# ---------------------------------------------------------------------- grid helpers
def grid_dims(topology: Topology, algorithm: str) -> tuple[int, ...]:
    """The ``dims`` of a routed grid network (torus, mesh, hyperx, hammingmesh), or ``(N,)``
    for a bidirectional ``ring:N`` (the 1-D torus, relayed: ``collc.frontends.ring_relay``)."""
    if is_relay_ring(topology):
        refusal = ring_refusal(topology, algorithm)
        if refusal is not None:
            raise ScheduleError(refusal)
        return (topology.nranks,)
    dims = topology.dims
    if dims is None or not topology.is_routed():
        raise ScheduleError(f"{algorithm} needs a routed grid network with dims (torus:RxC, hyperx:RxC, "
                            f"hammingmesh:AxB:XxY, ...), got {topology.name}")
    if math.prod(dims) != topology.nranks:
        raise ScheduleError(f"{algorithm}: dims {'x'.join(map(str, dims))} of {topology.name} do not cover its "
                            f"{topology.nranks} ranks")
    return dims


def _strides(dims: Sequence[int]) -> list[int]:
    return [math.prod(dims[i + 1:]) for i in range(len(dims))]


def rd_steps(dims: Sequence[int], first: int = 0) -> list[tuple[int, int]]:
    """``(dimension, sigma)`` of every RD step: dimensions round-robin over the order
    last, ..., first dimension, starting at position ``first`` of that order, skipping
    used-up dimensions (``log2 d`` steps each)."""
    order = list(reversed(range(len(dims))))
    order = order[first:] + order[:first]
    left = {d: dims[d].bit_length() - 1 for d in order}
    used = dict.fromkeys(order, 0)
    out: list[tuple[int, int]] = []
    while any(left.values()):
        for d in order:
            if left[d]:
                out.append((d, used[d]))
                used[d] += 1
                left[d] -= 1
    return out


def _reflect(rank: int, dims: Sequence[int], strides: Sequence[int]) -> int:
    out = 0
    for d, st in zip(dims, strides):
        out += ((-((rank // st) % d)) % d) * st
    return out


def rd_ranks(dims: Sequence[int], first: int = 0, mirrored: bool = False) -> tuple[list[int], list[int]]:
    """``(weights, phys)``: step ``k`` of RD flips physical rank bit ``weights[k]``
    (partner ``r ^ weights[k]``); ``phys[v]`` maps logical rank ``v`` (whose bit
    ``log2 p - 1 - k`` is the one flipped at step k of recursive halving) to its
    physical rank, reflected when ``mirrored``."""
    strides = _strides(dims)
    weights = [strides[d] << sigma for d, sigma in rd_steps(dims, first)]
    logn = len(weights)
    phys: list[int] = []
    for v in range(1 << logn):
        r = 0
        for k, w in enumerate(weights):
            if v >> (logn - 1 - k) & 1:
                r |= w
        phys.append(_reflect(r, dims, strides) if mirrored else r)
    return weights, phys


def _pow2_dims(topology: Topology, algorithm: str) -> tuple[int, ...]:
    dims = grid_dims(topology, algorithm)
    if topology.nranks < 2 or not all(is_pow2(d) for d in dims):
        raise ScheduleError(f"{algorithm} needs power-of-two dimension sizes (at least 2 ranks), "
                            f"got {topology.name}")
    return dims


def _rd_collective(b: Builder, phys: Sequence[int], start: int, base: int, lane: int, latency: bool) -> int:
    """One RD allreduce over logical ranks ``phys`` on chunks ``base..``; returns the next step.

    latency: chunk ``base`` exchanged whole at each step.  bandwidth: ``n`` chunks,
    recursive halving (logical partner ``v ^ n/2^(k+1)``, physical distance doubling)
    then recursive doubling in reverse order.
    """
    n = len(phys)
    logn = n.bit_length() - 1
    if latency:
        for k in range(logn):
            d = n >> (k + 1)
            for v in range(n):
                b.move(start + k, phys[v], phys[v ^ d], O, [base], O, [base], reduce=True, lane=lane)
        return start + logn
    for k in range(logn):
        d = n >> (k + 1)
        for v in range(n):
            lo = v & ~((n >> k) - 1)
            give = base + (lo + d if v & d == 0 else lo)
            b.move(start + k, phys[v], phys[v ^ d], O, range(give, give + d), O, range(give, give + d),
                   reduce=True, lane=lane)
    start += logn
    for k in range(logn):
        size = 1 << k
        for v in range(n):
            lo = base + (v & ~(size - 1))
            b.move(start + k, phys[v], phys[v ^ size], O, range(lo, lo + size), O, range(lo, lo + size), lane=lane)
    return start + logn


def _on(topology: Topology, schedule: Schedule) -> Schedule:
    """The schedule relayed over the ring when the topology is a ``ring:N``."""
    return relay(schedule, topology) if is_relay_ring(topology) else schedule


def _variant(opts: Options) -> bool:
    return opts.get("variant", "bandwidth") == "latency"


# ---------------------------------------------------------------------- recursive doubling
def build_rd(topology: Topology, request: Collective, opts: Options) -> Schedule:
    dims = _pow2_dims(topology, "recursive-doubling-torus")
    n = request.nranks
    latency = _variant(opts)
    b = Builder(Collective(CollKind.ALLREDUCE, n, 1 if latency else n, request.inplace))
    start = prefix_copy(b, I, O, b.collective.input_chunks, range(n))
    _rd_collective(b, rd_ranks(dims)[1], start, 0, 0, latency)
    return _on(topology, b.schedule("recursive-doubling-torus", opts, topology.name, REF_RD))


def build_mirrored_rd(topology: Topology, request: Collective, opts: Options) -> Schedule:
    dims = _pow2_dims(topology, "mirrored-recursive-doubling")
    n = request.nranks
    latency = _variant(opts)
    ncoll = 2 * len(dims)
    share = 1 if latency else n
    b = Builder(Collective(CollKind.ALLREDUCE, n, ncoll * share, request.inplace))
    start = prefix_copy(b, I, O, b.collective.input_chunks, range(n))
    for c in range(ncoll):
        phys = rd_ranks(dims, c % len(dims), mirrored=c >= len(dims))[1]
        _rd_collective(b, phys, start, c * share, c, latency)
    return _on(topology, b.schedule("mirrored-recursive-doubling", opts, topology.name, REF_MRD))


# ---------------------------------------------------------------------- bucket
def _bucket_dims(topology: Topology) -> tuple[int, ...]:
    dims = grid_dims(topology, "bucket")
    if topology.nranks < 2 or any(d < 2 for d in dims):
        raise ScheduleError(f"bucket needs every dimension >= 2, got {topology.name}")
    return dims


def build_bucket(topology: Topology, request: Collective, opts: Options) -> Schedule:
    dims = _bucket_dims(topology)
    n = request.nranks
    ndim = len(dims)
    strides = _strides(dims)
    order = list(reversed(range(ndim)))
    phase_len = max(dims) - 1
    ninst = 2 * ndim
    b = Builder(Collective(CollKind.ALLREDUCE, n, ninst * n, request.inplace))
    start = prefix_copy(b, I, O, b.collective.input_chunks, range(n))
    for c in range(ninst):
        seq = order[c % ndim:] + order[:c % ndim]
        sign = 1 if c < ndim else -1
        base = c * n

        def blocks(rank: int, level: int, value: int) -> range:
            """Chunks of the instance with digits of dimensions seq[:level] equal to the
            rank's coordinates and the digit of seq[level] equal to ``value``."""
            lo, span = base, n
            for j in range(level + 1):
                span //= dims[seq[j]]
                digit = value if j == level else (rank // strides[seq[j]]) % dims[seq[j]]
                lo += digit * span
            return range(lo, lo + span)

        def ring(rank: int, level: int) -> tuple[list[int], int]:
            """The ring through ``rank`` along dimension seq[level] in direction ``sign``
            (ranks in ring order, starting at coordinate 0) and the rank's position."""
            d, st = dims[seq[level]], strides[seq[level]]
            x = (rank // st) % d
            cyc = [rank + (((k * sign) % d) - x) * st for k in range(d)]
            return cyc, cyc.index(rank)

        for level in range(ndim):  # reduce-scatters, one dimension after the other
            d, st = dims[seq[level]], strides[seq[level]]
            s0 = start + level * phase_len
            for r in range(n):
                cyc, q = ring(r, level)
                for t in range(d - 1):
                    blk = (cyc[(q - 1 - t) % d] // st) % d
                    idx = blocks(r, level, blk)
                    b.move(s0 + t, r, cyc[(q + 1) % d], O, idx, O, idx, reduce=True, lane=c)
        for back, level in enumerate(reversed(range(ndim))):  # allgathers in reverse order
            d, st = dims[seq[level]], strides[seq[level]]
            s0 = start + (ndim + back) * phase_len
            for r in range(n):
                cyc, q = ring(r, level)
                for t in range(d - 1):
                    blk = (cyc[(q - t) % d] // st) % d
                    idx = blocks(r, level, blk)
                    b.move(s0 + t, r, cyc[(q + 1) % d], O, idx, O, idx, lane=c)
    return _on(topology, b.schedule("bucket", opts, topology.name, REF_BUCKET))


# ---------------------------------------------------------------------- Hamiltonian rings
def _helices(rows: int, cols: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """Two edge-disjoint Hamiltonian cycles of the ``rows x cols`` torus as (row, col)
    cells, or None when the construction does not apply."""
    if rows < 3 or cols < 3 or rows % cols or math.gcd(rows, cols - 1) != 1:
        return None
    a: list[tuple[int, int]] = []
    for j in range(rows):  # row j, from column -j, c-1 steps right, then one down
        a.extend((j, (-j + i) % cols) for i in range(cols))
    bcyc: list[tuple[int, int]] = []
    row, col = 0, 0
    for _ in range(rows):  # c-1 steps down a column, then one right
        for i in range(cols):
            bcyc.append(((row + i) % rows, col))
        row, col = (row + cols - 1) % rows, (col + 1) % cols
    return a, bcyc


def hamiltonian_decomposition(rows: int, cols: int) -> tuple[list[int], list[int]] | None:
    """Two edge-disjoint Hamiltonian cycles of ``torus:{rows}x{cols}`` as rank lists
    (row-major ranks), trying both orientations; None if the construction fails."""
    found = _helices(rows, cols)
    if found is not None:
        return [r * cols + c for r, c in found[0]], [r * cols + c for r, c in found[1]]
    found = _helices(cols, rows)  # transposed: cell (r, c) is row c, column r
    if found is not None:
        return [c * cols + r for r, c in found[0]], [c * cols + r for r, c in found[1]]
    return None


def _hamiltonian_cycles(topology: Topology) -> tuple[list[int], list[int]]:
    dims = grid_dims(topology, "hamiltonian-rings") if topology.family == "torus" else ()
    if len(dims) != 2:
        raise ScheduleError(f"hamiltonian-rings needs a 2D torus (torus:RxC), got {topology.name}")
    rows, cols = dims
    cycles = hamiltonian_decomposition(rows, cols)
    if cycles is None:
        raise ScheduleError(
            f"hamiltonian-rings: no pair of edge-disjoint Hamiltonian cycles from the paper's construction on "
            f"{topology.name}: it needs both sides >= 3 and R = C*k with gcd(R, C-1) = 1 (or the same with R "
            f"and C swapped)")
    return cycles


def build_hamiltonian_rings(topology: Topology, request: Collective, opts: Options) -> Schedule:
    a, c = _hamiltonian_cycles(topology)
    n = request.nranks
    rings = [a, a[:1] + a[:0:-1], c, c[:1] + c[:0:-1]]
    b = Builder(Collective(CollKind.ALLREDUCE, n, 4 * n, request.inplace))
    start = prefix_copy(b, I, O, 4 * n, range(n))
    for lane, cyc in enumerate(rings):
        base = lane * n
        for t in range(n - 1):
            for q in range(n):
                x = base + cyc[(q - 1 - t) % n]
                b.move(start + t, cyc[q], cyc[(q + 1) % n], O, [x], O, [x], reduce=True, lane=lane)
        for t in range(n - 1):
            for q in range(n):
                x = base + cyc[(q - t) % n]
                b.move(start + n - 1 + t, cyc[q], cyc[(q + 1) % n], O, [x], O, [x], lane=lane)
    return b.schedule("hamiltonian-rings", opts, topology.name, REF_HAM)


_VARIANT = Param("variant", str, "bandwidth", "bandwidth (reduce-scatter + allgather) or latency (whole vector)",
                 VARIANTS)
_GRIDS = ("routed grid with power-of-two sides (torus:RxC, torus:AxBxC, hyperx:RxC, hammingmesh:AxB:XxY), "
          "or ring:N relayed")

register(Algorithm(
    name="recursive-doubling-torus",
    collectives=ALLREDUCE_ONLY,
    topologies=_GRIDS,
    summary="torus-aware recursive doubling, dimension by dimension; bandwidth (2 log2 p steps) or latency",
    reference=REF_RD, build=build_rd, params=(_VARIANT,),
    applies=lambda t, r, o: refusal_of(lambda: _pow2_dims(t, "recursive-doubling-torus")),
    example="collc build --topology torus:8x8 --algorithm recursive-doubling-torus --collective allreduce -o rd.xml",
))
register(Algorithm(
    name="mirrored-recursive-doubling",
    collectives=ALLREDUCE_ONLY,
    topologies=_GRIDS,
    summary="2D concurrent torus RD collectives (D plain, D mirrored), one share and lane each",
    reference=REF_MRD, build=build_mirrored_rd, params=(_VARIANT,),
    applies=lambda t, r, o: refusal_of(lambda: _pow2_dims(t, "mirrored-recursive-doubling")),
    example="collc build --topology torus:8x8 --algorithm mirrored-recursive-doubling --collective allreduce "
            "-o mrd.xml",
))
register(Algorithm(
    name="bucket",
    collectives=ALLREDUCE_ONLY,
    topologies="routed grid network (torus:RxC, torus:AxBxC, hyperx:RxC, hammingmesh:AxB:XxY), sides >= 2, "
               "or ring:N",
    summary="2D concurrent bucket instances: ring reduce-scatter per dimension, then ring allgathers",
    reference=REF_BUCKET, build=build_bucket, applies=lambda t, r, o: refusal_of(lambda: _bucket_dims(t)),
    example="collc build --topology torus:8x8 --algorithm bucket --collective allreduce -o bucket.xml",
))
register(Algorithm(
    name="hamiltonian-rings",
    collectives=ALLREDUCE_ONLY,
    topologies="2D torus R x C with R = C k, gcd(R, C-1) = 1 (either orientation), sides >= 3",
    summary="two edge-disjoint Hamiltonian cycles, each a ring allreduce both ways (4 rings, quarter each)",
    reference=REF_HAM, build=build_hamiltonian_rings,
    applies=lambda t, r, o: refusal_of(lambda: _hamiltonian_cycles(t)),
    example="collc build --topology torus:8x8 --algorithm hamiltonian-rings --collective allreduce -o ham.xml",
))
