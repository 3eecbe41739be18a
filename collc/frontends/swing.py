"""Swing allreduce (De Sensi, Bonato, Saam & Hoefler, NSDI'24), and its two halves.

Family page: docs/swing.md (what it does, the paper, the check values and their tests).

Collectives: allreduce, reducescatter, allgather, broadcast, reduce.  Topology: tori of any
number of dimensions, square or rectangular (``torus:8x8``, ``torus:6x4``, ``torus:16``), and
the torus-like ``hyperx:RxC`` and ``hammingmesh:AxB:XxY`` (section 5.4: the 2-D Swing on
their global grid);
the 1-D torus is ``torus:N`` or a bidirectional ``ring:N``, whose ranks forward nothing:
there every transfer to a partner more than one hop away is relayed by the ranks between
(``collc.frontends.ring_relay``); a one-way ``ring:N:uni`` is refused.  Anything else raises
ScheduleError.

Rank layout (section 4.1, Fig. 5): the Swing dimension 0 is the topology's *last* (fastest)
dimension, so on ``torus:4x4`` rank ``y*4 + x`` meets ``x+1`` first, as in the
paper's Fig. 5.

* Peers: ``rho(s) = sum_{i<=s} (-2)^i``; on dimension ``omega`` at in-dimension step
  ``sigma`` a rank moves its coordinate by ``+rho(sigma)`` (``-rho`` when that
  coordinate is odd, and negated again for mirrored collectives) (section 3.1.1 Eq. 2, section 4.1
  with the signed-rho erratum; docs/swing.md).  Dimensions are visited round-robin from the
  collective's start dimension, skipping those whose ``ceil(log2 d)`` steps are used
  up (sections 4.1, 4.2).
* ``variant=bandwidth`` (B): reduce-scatter over ``L = sum_k ceil(log2 d_k)`` steps,
  sending the corrected block sets ``S(r,s) = {q} u T(q,s+1)`` (section 3.1.1, Fig. 3 corrected), then
  the allgather that transposes it (reverse peer order); 2L steps, cost
  ``2L alpha + 2 (p-1)/p M / (2D b)`` times Xi.  The blocks of each collective are
  remapped (section 3.1.1, last paragraph) so every send is one contiguous chunk range when every
  dimension is a power of two; otherwise one transfer per contiguous run of
  blocks (block by block; docs/swing.md).  Even
  non-power-of-two sizes drop earlier duplicates (section 3.2, Appendix A.2); an odd 1-D size
  runs on p-1 ranks plus an extra rank that trades single blocks with groups of
  3, 2, 1, ... ranks (Fig. 4).  A torus with an odd side in several dimensions runs on its
  core (odd sides less one) and every rank outside it trades its blocks in the same way
  (our generalisation of Fig. 4; docs/swing.md).
* ``variant=latency`` (L): L steps, each exchanging (and reducing) the whole share
  of every collective (section 3.1.2).  For a p that is not a power of two (which the
  paper does not describe) the ranks above ``p' = 2^floor(log2 p)`` fold onto the
  first p' ranks, which run 1-D Swing L, and get the result back: ``log2 p' + 2``
  steps (our extension, after recursive doubling's rule, section 2.3.2; docs/swing.md).
* broadcast and reduce (section 6: Swing's peers replace the binomial tree): one tree per
  collective (``swing_tree``), the steps in the allgather's order, ``L`` steps; every torus
  shape, odd sides included.
* ``ports=all`` runs 2D collectives (D plain, D mirrored), each on its own share of
  the vector and its own lane, so every port is busy every step; ``ports=single``
  runs the one plain collective starting on dimension 0.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> import collc.frontends.swing
>>> s = build_schedule("swing", parse_spec("torus:4x4"), CollKind.ALLREDUCE, inplace=True)
>>> s.nsteps, s.collective.chunk_factor, s.lanes
(8, 64, 4)
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from collc.limits import LIMITS, Dialect
from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, is_pow2, prefix_copy, refusal_of
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.frontends.ring_relay import is_relay_ring, relay, ring_refusal
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = "De Sensi et al., Swing: Short-cutting Rings for Higher Bandwidth Allreduce, NSDI'24 (docs/swing.md)"

Blocks = tuple[int, ...]


# ---------------------------------------------------------------------------- peers
def rho(s: int) -> int:
    """Signed step offset ``sum_{i=0..s} (-2)^i`` = 1, -1, 3, -5, 11, ... (section 3.1.1, Eq. 2)."""
    power: int = (-2) ** (s + 1)
    return (1 - power) // 3


def delta(s: int) -> int:
    """Hop distance ``|rho(s)|`` of step s (section 3.1.1)."""
    return abs(rho(s))


def peer(r: int, s: int, p: int) -> int:
    """1-D peer ``pi(r, s)``: even ranks add rho(s), odd ranks subtract it, mod p (section 3.1.1)."""
    return (r + rho(s)) % p if r % 2 == 0 else (r - rho(s)) % p


def omega(s: int, ndims: int) -> int:
    """Dimension of step s on a square torus: ``s mod D`` (section 4.1)."""
    return s % ndims


def sigma(s: int, ndims: int) -> int:
    """Step of s within its dimension on a square torus: ``floor(s / D)`` (section 4.1)."""
    return s // ndims


def dim_steps(d: int) -> int:
    """Steps Swing spends on a dimension of size d: ``ceil(log2 d)`` (sections 4.1, 3.2)."""
    return max(1, (d - 1).bit_length())


def dim_sequence(dims: Sequence[int], port: int) -> tuple[tuple[int, int], ...]:
    """(dimension, sigma) of every step of collective ``port`` in ``[0, 2D)``.

    Round-robin from dimension ``port mod D``, skipping dimensions whose
    ``ceil(log2 d)`` steps are used up (sections 4.1-4.2, the authors' ``compute_peers``).
    """
    ndims = len(dims)
    need = [dim_steps(d) for d in dims]
    done = [0] * ndims
    cur = port % ndims
    out: list[tuple[int, int]] = []
    for _ in range(sum(need)):
        while done[cur] >= need[cur]:
            cur = (cur + 1) % ndims
        out.append((cur, done[cur]))
        done[cur] += 1
        cur = (cur + 1) % ndims
    return tuple(out)


def torus_peer(r: int, s: int, dims: Sequence[int], port: int = 0) -> int:
    """Peer of rank r at step s of collective ``port`` on a torus (section 4.1).

    ``dims`` is in Swing order (dimension 0 has stride 1).  The offset is the signed
    rho(sigma) (the paper's erratum: not delta), negated when the coordinate on the
    dimension in use is odd and again for mirrored collectives (``port >= D``).
    """
    dim, sig = dim_sequence(dims, port)[s]
    return _move(r, dim, sig, dims, port >= len(dims))


def _move(r: int, dim: int, sig: int, dims: Sequence[int], mirrored: bool) -> int:
    stride = 1
    for d in dims[:dim]:
        stride *= d
    size = dims[dim]
    x = (r // stride) % size
    off = rho(sig)
    if x % 2:
        off = -off
    if mirrored:
        off = -off
    return r + ((x + off) % size - x) * stride


def peer_table(dims: Sequence[int], port: int = 0) -> tuple[tuple[int, ...], ...]:
    """``[r][s]`` -> peer of r at step s, for every rank of the torus ``dims`` (Swing order)."""
    seq = dim_sequence(dims, port)
    mirrored = port >= len(dims)
    p = 1
    for d in dims:
        p *= d
    return tuple(tuple(_move(r, dim, sig, dims, mirrored) for dim, sig in seq) for r in range(p))


# ---------------------------------------------------------------------------- block sets
def _send_sets(peers: tuple[tuple[int, ...], ...]) -> tuple[tuple[frozenset[int], ...], ...]:
    """``[r][s]`` -> blocks r sends at RS step s (section 3.1.1, corrected as in docs/swing.md;
    section 3.2 for p not 2^k).

    ``S(r,s) = {q} u T(q, s+1)`` with ``T(x,t) = U_{s>=t} {pi(x,s)} u T(pi(x,s), s+1)``;
    then r itself is dropped and a block sent again later is deleted from the earlier
    step (the authors' rule for non-power-of-two p; a no-op for powers of two).
    """
    p = len(peers)
    nsteps = len(peers[0]) if p else 0

    @lru_cache(maxsize=None)
    def reach(x: int, t: int) -> frozenset[int]:
        out: set[int] = set()
        for s in range(t, nsteps):
            q = peers[x][s]
            out.add(q)
            out |= reach(q, s + 1)
        return frozenset(out)

    table: list[tuple[frozenset[int], ...]] = []
    for r in range(p):
        raw = [({peers[r][s]} | reach(peers[r][s], s + 1)) - {r} for s in range(nsteps)]
        later: set[int] = set()
        for s in range(nsteps - 1, -1, -1):
            raw[s] -= later
            later |= raw[s]
        table.append(tuple(frozenset(x) for x in raw))
    return tuple(table)


def send_set(r: int, s: int, p: int) -> frozenset[int]:
    """Blocks rank r sends (and its peer reduces) at RS step s of 1-D Swing on p ranks (section 3.1.1)."""
    return _send_sets(peer_table((p,)))[r][s]


def keep_set(r: int, s: int, p: int) -> frozenset[int]:
    """Blocks rank r is still responsible for after RS step s: ``{r} u T(r, s+1)`` (section 3.1.1)."""
    sends = _send_sets(peer_table((p,)))
    out = {r}
    for t in range(s + 1, len(sends[r])):
        out |= sends[r][t]
    return frozenset(out)


def torus_send_set(r: int, s: int, dims: Sequence[int], port: int = 0) -> frozenset[int]:
    """``S_c(r, s)`` of collective ``port`` on a torus (Swing-order dims) (section 4.1)."""
    return _send_sets(peer_table(dims, port))[r][s]


def remap(peers: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Block -> buffer position so each send set is one contiguous range (section 3.1.1).

    Recursive split from node 0: at step s the sim node's send set goes to the high
    half (with sim = its peer), the rest to the low half.  Powers of two only.
    """
    p = len(peers)
    sends = _send_sets(peers)
    nsteps = len(peers[0])
    pos = [0] * p

    def split(nodes: frozenset[int], sim: int, s: int, lo: int) -> None:
        if s == nsteps or len(nodes) == 1:
            (only,) = nodes
            pos[only] = lo
            return
        right = sends[sim][s] & nodes
        left = nodes - right
        split(left, sim, s + 1, lo)
        split(right, peers[sim][s], s + 1, lo + len(left))

    split(frozenset(range(p)), 0, 0, 0)
    return tuple(pos)


def remap_1d(p: int) -> tuple[int, ...]:
    """The 1-D remap (section 3.1.1): p=8 gives (0, 4, 6, 1, 3, 7, 5, 2)."""
    return remap(peer_table((p,)))


# ---------------------------------------------------------------------------- plans
@dataclass(frozen=True)
class Port:
    """One collective: its peers, positions and per-step send positions (RS direction)."""

    peers: tuple[tuple[int, ...], ...]       # [r][s] over the core ranks
    pos: tuple[int, ...]                     # block -> position within this port's share
    sends: tuple[tuple[range | Blocks, ...], ...]  # [r][s] -> positions r sends at RS step s


def _groups_pow2(peers: tuple[tuple[int, ...], ...]) -> Port:
    """Fast butterfly construction for powers of two: keep sets as groups per level, O(p log p).

    ``K(r, L-1) = {r}``, ``K(r, s-1) = K(r, s) u K(pi(r,s), s)``; positions come from
    splitting each group's range with the remap rule (section 3.1.1).
    """
    p = len(peers)
    nsteps = len(peers[0])
    # gid[s][r]: id of K(r, s) (level s = after step s); level -1 = everything
    gid: list[list[int]] = [[0] * p for _ in range(nsteps)]
    gid[nsteps - 1] = list(range(p))
    for s in range(nsteps - 1, 0, -1):
        cur = gid[s]
        gid[s - 1] = [min(cur[r], cur[peers[r][s]]) for r in range(p)]
    # rng[s][group id at level s] -> its position range; each parent range splits in two
    rng: list[dict[int, tuple[int, int]]] = [{} for _ in range(nsteps)]
    parents: list[tuple[int, int, int]] = [(0, 0, p)]  # (sim, lo, hi)
    for s in range(nsteps):
        nxt: list[tuple[int, int, int]] = []
        for sim, lo, hi in parents:
            mid = (lo + hi) // 2
            other = peers[sim][s]
            rng[s][gid[s][sim]] = (lo, mid)
            rng[s][gid[s][other]] = (mid, hi)
            nxt += [(sim, lo, mid), (other, mid, hi)]
        parents = nxt
    pos = tuple(rng[nsteps - 1][r][0] for r in range(p))
    sends = tuple(tuple(range(*rng[s][gid[s][peers[r][s]]]) for s in range(nsteps)) for r in range(p))
    return Port(peers, pos, sends)


def _general(peers: tuple[tuple[int, ...], ...]) -> Port:
    sets = _send_sets(peers)
    p = len(peers)
    return Port(peers, tuple(range(p)), tuple(tuple(tuple(sorted(x)) for x in row) for row in sets))


def make_port(dims: Sequence[int], port: int) -> Port:
    """The plan of one collective on the torus ``dims`` (Swing order, all sizes even or 1-D)."""
    peers = peer_table(dims, port)
    if all(is_pow2(d) for d in dims):
        return _groups_pow2(peers)
    return _general(peers)


def extra_groups(core: int, nsteps: int) -> list[list[int]]:
    """Ranks the extra rank of an odd p trades with at each step: halves of the rest,
    all that remain at the last step (Fig. 4: p=7 gives [0,1,2], [3,4], [5]) (section 3.2)."""
    out: list[list[int]] = []
    nxt = 0
    for s in range(nsteps):
        left = core - nxt
        take = left if s == nsteps - 1 else (left + 1) // 2
        out.append(list(range(nxt, nxt + take)))
        nxt += take
    return out


# ---------------------------------------------------------------------------- topology
def swing_dims(topology: Topology) -> tuple[int, ...]:
    """Torus sizes in Swing order (dimension 0 = the topology's fastest); ScheduleError otherwise."""
    if topology.family == "ring":
        refusal = ring_refusal(topology, "swing")
        if refusal is not None:
            raise ScheduleError(refusal)
        return (topology.nranks,)
    if topology.family in ("hyperx", "hammingmesh") and topology.dims is not None and topology.is_routed():
        # section 5.4: the 2-D Swing on the global R x C grid; every partner is in the
        # same row or column, which HyperX links directly and HammingMesh reaches over its
        # board mesh or the row / column fat tree (the network routes, minimal paths)
        return tuple(reversed(topology.dims))
    if topology.family != "torus" or topology.dims is None:
        raise ScheduleError(f"swing runs on tori (torus:AxB..., torus:N, ring:N), hyperx:RxC and "
                            f"hammingmesh:AxB:XxY, not {topology.name}")
    return tuple(reversed(topology.dims))


@dataclass(frozen=True)
class Plan:
    """All collectives of one Swing run, p blocks per collective.

    The ``core`` ranks (every coordinate below its side rounded down to even) run Swing;
    each ``extras`` rank (a coordinate on the last position of an odd side) trades its block
    for every core rank's directly, with groups of core ranks over the core steps (Fig. 4),
    and with the other extra ranks at the last step.  Block positions: the core's ports
    place the core blocks in ``0..len(core)-1``, extra ``i`` sits at ``len(core) + i``.
    """

    nranks: int
    nsteps: int
    ports: tuple[Port, ...]
    core: tuple[int, ...]              # core index -> global rank
    extras: tuple[int, ...]            # the ranks outside the core (odd sides), ascending
    groups: tuple[tuple[tuple[int, ...], ...], ...]   # [extra][step] -> core indices traded with
    pow2: bool
    nlanes: int = 0                    # lanes of the collectives (0: one each); see fit_lanes

    def exchanges(self, c: int) -> list[tuple[int, int, int, range | Blocks]]:
        """RS transfers of collective c as (step, src, dst, positions)."""
        port, core = self.ports[c], self.core
        out: list[tuple[int, int, int, range | Blocks]] = []
        for r, row in enumerate(port.sends):
            for s, blocks in enumerate(row):
                if len(blocks):
                    out.append((s, core[r], core[port.peers[r][s]], blocks))
        base = len(core)
        for i, e in enumerate(self.extras):
            for s, group in enumerate(self.groups[i]):
                for j in group:
                    out.append((s, e, core[j], (port.pos[j],)))
                    out.append((s, core[j], e, (base + i,)))
            for i2, e2 in enumerate(self.extras):
                if e2 != e:
                    out.append((self.nsteps - 1, e, e2, (base + i2,)))
        return out

    def lane(self, c: int, src: int, dst: int) -> int:
        """Lane of a transfer of collective c: its own, except that with several extra ranks
        their trades share lane 0 (so a rank's many peers fit the runtime's tbs per channel)."""
        if len(self.extras) > 1 and (src not in self._core_index or dst not in self._core_index):
            return 0
        return lane_of(c, len(self.ports), self.nlanes) if self.nlanes else c

    def position(self, c: int, block: int) -> int:
        index = self._core_index.get(block)
        return self.ports[c].pos[index] if index is not None else len(self.core) + self.extras.index(block)

    @cached_property
    def _core_index(self) -> dict[int, int]:
        return {r: i for i, r in enumerate(self.core)}

    def sync(self) -> tuple[tuple[int, int], ...]:
        """``step_sync`` connections: every extra rank with every other rank, both ways.  Only for
        one extra rank (1-D): with several, their dependencies would need more tbs than a
        ``depid`` can name, and their trades go out as soon as the data allow."""
        if len(self.extras) != 1:
            return ()
        others = sorted(set(self.core) | set(self.extras))
        return tuple(c for e in self.extras for r in others if r != e for c in ((e, r), (r, e)))

    def reply(self) -> tuple[tuple[int, int], ...]:
        """``step_reply`` connections: every core rank to the extra rank, when the core is not a
        power of two.  A power-of-two core sends one message per peer and step, so it moves one
        round per step and ``sync`` alone keeps the extra rank's groups in successive rounds;
        another core sends several runs per step at an uneven pace, and a group could send to
        the extra rank in the round of the group before (p = 7: the allgather's last two
        groups).  Answering the extra rank's message of the step puts each of its steps in
        rounds of its own (a round trip each)."""
        if len(self.extras) != 1 or is_pow2(len(self.core)):
            return ()
        return tuple((r, e) for e in self.extras for r in self.core)


def _core(dims: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(core dims, core index -> global rank, extra ranks) for Swing-order ``dims``."""
    core_dims = tuple(d - d % 2 for d in dims)
    strides = [math.prod(dims[:k]) for k in range(len(dims))]
    core: list[int] = []
    for local in range(math.prod(core_dims)):
        rank, rest = 0, local
        for d, st in zip(core_dims, strides):
            rank += (rest % d) * st
            rest //= d
        core.append(rank)
    taken = set(core)
    return core_dims, tuple(core), tuple(r for r in range(math.prod(dims)) if r not in taken)


def make_plan(dims: tuple[int, ...], nports: int, local_tbs: int | None = 0) -> Plan:
    """The plan of ``nports`` collectives on the torus ``dims`` (Swing order); ``local_tbs``:
    threadblocks the lowering needs for local copies besides the connections' (see
    :func:`with_lanes`; None: one lane per collective)."""
    p = math.prod(dims)
    if p < 2:
        raise ScheduleError("swing needs at least 2 ranks")
    core_dims: tuple[int, ...]
    extras: tuple[int, ...]
    if len(dims) == 1 and p % 2:
        core_dims, core, extras = (p - 1,), tuple(range(p - 1)), (p - 1,)
    else:
        core_dims, core, extras = _core(dims)
    ports = tuple(make_port(core_dims, c) for c in range(nports))
    nsteps = len(ports[0].peers[0])
    # each extra rank starts its groups at a different core rank, spreading their load
    shift = max(1, len(core) // max(1, len(extras)))
    groups = tuple(tuple(tuple((j + i * shift) % len(core) for j in g) for g in extra_groups(len(core), nsteps))
                   for i in range(len(extras)))
    plan = Plan(p, nsteps, ports, core, extras, groups, not extras and is_pow2(p))
    return plan if local_tbs is None else with_lanes(plan, local_tbs)


def with_lanes(plan: Plan, local_tbs: int) -> Plan:
    """``plan`` with its collectives on as many lanes as fit RCCL's tbs (:func:`fit_lanes`)."""
    nports = len(plan.ports)
    conns: list[list[tuple[int, int]]] = [[] for _ in range(nports)]
    fixed: list[tuple[int, int]] = []     # the outside ranks' trades, all on lane 0 (Plan.lane)
    for c in range(nports):
        for _, src, dst, _ in plan.exchanges(c):
            (fixed if plan.lane(c, src, dst) == 0 and c else conns[c]).append((src, dst))
    lanes = fit_lanes(conns, fixed, LIMITS[Dialect.RCCL].max_tbs_per_gpu - local_tbs)
    return replace(plan, nlanes=lanes) if lanes != nports else plan


def lane_of(c: int, nports: int, lanes: int) -> int:
    """Lane of collective c when ``nports`` collectives share ``lanes``: consecutive ones
    together, so plain collectives (same peers, other start dimensions) share before a plain
    and a mirrored one (opposite neighbours) do."""
    return c * lanes // nports


def fit_lanes(conns: Sequence[Sequence[tuple[int, int]]], fixed: Sequence[tuple[int, int]] = (),
              budget: int = 64) -> int:
    """Lanes for collectives whose connections are ``conns[c]`` (collective c goes on lane
    ``lane_of(c)``; ``fixed`` connections stay on lane 0): as many as keep every rank within
    ``budget`` threadblocks (RCCL's 64 per GPU, the strictest runtime's, less the local ones)
    when each (lane, peer, direction) takes one; else all of them (the lowering then refuses
    the runtimes with fewer tbs, naming the limit).

    The 2D collectives of a multiport Swing use 2D different ports at every step, so
    collectives sharing a lane never send two messages on one connection in one step: fewer
    lanes cost no round, only the overlap of a collective that runs ahead (docs/swing.md).
    On a 3-D torus 6 lanes x 6 peers x 2 directions = 72 tbs on 4x4x4; 5 lanes hold 60.

    >>> fit_lanes([[(0, 1), (1, 0)]] * 4, budget=4)   # 4 collectives, one peer: 2 tbs a lane
    2
    """
    nports = len(conns)
    for lanes in range(nports, 0, -1):
        lane = [lane_of(c, nports, lanes) for c in range(nports)]
        seen: set[tuple[int, int, int, bool]] = set()
        count: dict[int, int] = {}
        for c, pairs in enumerate(conns):
            for src, dst in pairs:
                for key in ((src, lane[c], dst, True), (dst, lane[c], src, False)):
                    if key not in seen:
                        seen.add(key)
                        count[key[0]] = count.get(key[0], 0) + 1
        for src, dst in fixed:
            for key in ((src, 0, dst, True), (dst, 0, src, False)):
                if key not in seen:
                    seen.add(key)
                    count[key[0]] = count.get(key[0], 0) + 1
        if max(count.values(), default=0) <= budget:
            return lanes
    return nports


# ---------------------------------------------------------------------------- build
def _runs(blocks: range | Blocks, base: int) -> list[range]:
    """Positions shifted by ``base`` as maximal contiguous ranges: one range for the
    remapped power-of-two sets (section 3.1.1), block-by-block runs otherwise (docs/swing.md)."""
    if isinstance(blocks, range):
        return [range(blocks.start + base, blocks.stop + base)]
    out: list[range] = []
    for x in sorted(blocks):
        if out and out[-1].stop == base + x:
            out[-1] = range(out[-1].start, base + x + 1)
        else:
            out.append(range(base + x, base + x + 1))
    return out


def _local_tbs(plan: Plan, nports: int, kind: CollKind, inplace: bool) -> int:
    """Threadblocks the lowering gives a rank's local copies (one per 32 contiguous runs):
    none for an in-place allreduce, one for an out-of-place one; reduce-scatter and allgather
    copy between the input or output order and the scratch laid out by position."""
    if kind is CollKind.ALLREDUCE:
        return 0 if inplace else 1
    order = [blk * nports + c for c in range(nports) for blk in _by_position(plan, c)]
    runs = 1 + sum(1 for a, b in zip(order, order[1:]) if b != a + 1)
    return -(-(runs + nports) // 32)


def _rs(b: Builder, plan: Plan, nports: int, start: int, buf: Buffer) -> int:
    p = plan.nranks
    for c in range(nports):
        for s, src, dst, blocks in plan.exchanges(c):
            for idx in _runs(blocks, c * p):
                b.move(start + s, src, dst, buf, idx, buf, idx, reduce=True, lane=plan.lane(c, src, dst))
    return start + plan.nsteps


def _ag(b: Builder, plan: Plan, nports: int, start: int, buf: Buffer) -> int:
    """The allgather: the reduce-scatter transposed (reverse step order, peers swapped, copies)."""
    p, last = plan.nranks, plan.nsteps - 1
    for c in range(nports):
        for s, src, dst, blocks in plan.exchanges(c):
            for idx in _runs(blocks, c * p):
                b.move(start + last - s, dst, src, buf, idx, buf, idx, lane=plan.lane(c, dst, src))
    return start + plan.nsteps


def _by_position(plan: Plan, c: int) -> list[int]:
    """Blocks of collective c in buffer-position order."""
    inverse = [0] * plan.nranks
    for blk in range(plan.nranks):
        inverse[plan.position(c, blk)] = blk
    return inverse


def _latency_folded(b: Builder, n: int, nports: int, start: int) -> None:
    """L on a non-power-of-two p: our extension, the paper does not describe it (docs/swing.md).

    As recursive doubling does for such p (section 2.3.2): the ``p - p'`` ranks above
    ``p' = 2^floor(log2 p)`` first add their vector into rank ``r - p'``, the first
    ``p'`` ranks run 1-D Swing L among themselves (rank order; the torus routes every
    pair), and the result goes back to the folded ranks: ``log2 p' + 2`` steps.  Share
    ``c`` uses the plain (even ``c``) or mirrored (odd ``c``) peers, as the ports do.
    """
    pp = 1 << (n.bit_length() - 1)
    tables = [peer_table((pp,), c % 2) for c in range(nports)]
    nsteps = len(tables[0][0])
    for c in range(nports):
        for e in range(pp, n):
            b.move(start, e, e - pp, O, [c], O, [c], reduce=True, lane=c)
        for r in range(pp):
            for s in range(nsteps):
                b.move(start + 1 + s, r, tables[c][r][s], O, [c], O, [c], reduce=True, lane=c)
        for e in range(pp, n):
            b.move(start + 1 + nsteps, e - pp, e, O, [c], O, [c], lane=c)


def swing_tree(peers: tuple[tuple[int, ...], ...], root: int) -> list[list[tuple[int, int]]]:
    """The broadcast tree of one collective: per step, (parent, child) edges (section 6).

    Swing's peer sequence replaces the binomial tree's: the steps run in the allgather's
    order (last peer step first, so the data first jumps the farthest and the many messages of
    the late steps go one hop), and at each step every rank that has the data sends it to its
    peer unless the peer has it (or another rank sends it there first, the lowest rank
    winning).  On power-of-two sides these are the allgather's butterfly groups, so the
    reached set doubles every step; other shapes also reach every rank (checked in build).
    """
    have = {root}
    steps: list[list[tuple[int, int]]] = []
    for s in reversed(range(len(peers[0]))):
        new: dict[int, int] = {}
        for x in sorted(have):
            y = peers[x][s]
            if y not in have and y not in new:
                new[y] = x
        steps.append(sorted((x, y) for y, x in new.items()))
        have |= set(new)
    if len(have) != len(peers):  # pragma: no cover - every torus shape is covered (tests)
        raise ScheduleError(f"swing's peers reach only {len(have)} of {len(peers)} ranks from root {root}")
    return steps


def _rooted(b: Builder, dims: tuple[int, ...], kind: CollKind, root: int, nports: int, inplace: bool) -> None:
    """Broadcast or reduce on ``nports`` shares, share c on collective c's tree (section 6).

    Reduce is the broadcast reversed: children send their partial sums up, deepest first;
    ranks with children accumulate in scratch (as binomial-tree does), the root in its output."""
    trees = [swing_tree(peer_table(dims, c), root) for c in range(nports)]
    start = 0
    if not inplace:
        b.move(0, root, root, I, range(nports), O, range(nports))
        start = 1 if kind is CollKind.REDUCE else 0
    if kind is CollKind.BROADCAST:
        for c, tree in enumerate(trees):
            for k, edges in enumerate(tree):
                for x, y in edges:
                    b.move(k, x, y, I if x == root else O, [c], O, [c], lane=c)
        return
    b.scratch = nports
    for c, tree in enumerate(trees):
        parents = {x for edges in tree for x, _ in edges} - {root}
        for x in sorted(parents):
            b.move(0, x, x, I, [c], S, [c], lane=c)
            start = 1
    for c, tree in enumerate(trees):
        parents = {x for edges in tree for x, _ in edges}
        for k, edges in enumerate(reversed(tree)):
            for x, y in edges:
                b.move(start + k, y, x, S if y in parents else I, [c], O if x == root else S, [c], reduce=True,
                       lane=c)


def _validate(topology: Topology, request: Collective, opts: Options) -> None:
    dims = swing_dims(topology)
    if math.prod(dims) < 2:
        raise ScheduleError("swing needs at least 2 ranks")
    if request.kind in (CollKind.BROADCAST, CollKind.REDUCE):
        if request.root is None:
            raise ScheduleError(f"swing {request.kind.value} needs a root")
        return   # any torus shape: the tree of swing_tree reaches every rank
    if opts.get("variant", "bandwidth") == "latency":
        if request.kind is not CollKind.ALLREDUCE:
            raise ScheduleError("swing variant=latency implements allreduce only")


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    return refusal_of(lambda: _validate(topology, request, opts))


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    """The Swing schedule; on a ``ring:N`` its distant transfers relayed by the ranks between."""
    schedule = _build(topology, request, opts)
    return relay(schedule, topology) if is_relay_ring(topology) else schedule


def _build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    dims = swing_dims(topology)
    n = request.nranks
    nports = 2 * len(dims) if opts.get("ports", "all") == "all" else 1
    variant = opts.get("variant", "bandwidth")
    kind = request.kind
    if kind in (CollKind.BROADCAST, CollKind.REDUCE):
        _validate(topology, request, opts)
        assert request.root is not None
        b = Builder(Collective(kind, n, nports, request.inplace, request.root))
        _rooted(b, dims, kind, request.root, nports, request.inplace)
        return b.schedule("swing", opts, topology.name, REFERENCE)
    if variant == "latency":
        if kind is not CollKind.ALLREDUCE:
            raise ScheduleError("swing variant=latency implements allreduce only")
        b = Builder(Collective(kind, n, nports, request.inplace))
        start = prefix_copy(b, I, O, nports, range(n))
        if is_pow2(n):
            plan = make_plan(dims, nports, 0 if request.inplace else 1)
            for c, port in enumerate(plan.ports):
                for r in range(n):
                    for s in range(plan.nsteps):
                        q = port.peers[r][s]
                        b.move(start + s, r, q, O, [c], O, [c], reduce=True, lane=plan.lane(c, r, q))
        else:
            _latency_folded(b, n, nports, start)
        return b.schedule("swing", opts, topology.name, REFERENCE)
    plan = make_plan(dims, nports, None)
    plan = with_lanes(plan, _local_tbs(plan, nports, kind, request.inplace))
    p = n
    # the extra rank's sends read only its own input: step_sync keeps them in the groups
    # of Fig. 4 (3, 2, 1 for p = 7) in the program instead of all at once (section 3.2)
    sync, reply = plan.sync(), plan.reply()
    if kind is CollKind.ALLREDUCE:
        b = Builder(Collective(kind, n, nports * p, request.inplace), step_sync=sync, step_reply=reply)
        start = prefix_copy(b, I, O, nports * p, range(n))
        _ag(b, plan, nports, _rs(b, plan, nports, start, O), O)
        return b.schedule("swing", opts, topology.name, REFERENCE)
    # reducescatter / allgather: work in scratch laid out by position (contiguous sends)
    order = [(c, blk) for c in range(nports) for blk in _by_position(plan, c)]
    b = Builder(Collective(kind, n, nports, request.inplace), step_sync=sync, step_reply=reply)
    b.scratch = nports * p
    mine = {r: [c * p + plan.position(c, r) for c in range(nports)] for r in range(n)}
    if kind is CollKind.REDUCESCATTER:
        for r in range(n):
            b.move(0, r, r, I, [blk * nports + c for c, blk in order], S, range(nports * p))
        step = _rs(b, plan, nports, 1, S)
        for r in range(n):
            b.move(step, r, r, S, mine[r], O, range(nports))
    elif kind is CollKind.ALLGATHER:
        for r in range(n):
            b.move(0, r, r, I, range(nports), S, mine[r])
        step = _ag(b, plan, nports, 1, S)
        for r in range(n):
            b.move(step, r, r, S, range(nports * p), O, [blk * nports + c for c, blk in order])
    else:  # pragma: no cover - the registry filters collectives
        raise ScheduleError(f"swing does not implement {kind.value}")
    return b.schedule("swing", opts, topology.name, REFERENCE)


def orbits(topology: Topology, kind: CollKind, opts: Options) -> tuple[int, ...] | None:
    """Swing's partners ``r +- rho(s)`` alternate with each coordinate's parity, so shifting
    every coordinate by 2 maps the schedule onto itself on a torus of even sides: the ranks
    with coordinates in 0..3 stand for all (0..1 would do; the others cost nothing).  Only
    for the rootless collectives on power-of-two sides (no extra ranks, blocks remapped to
    ranges) and not on a relayed ring."""
    if kind in (CollKind.BROADCAST, CollKind.REDUCE) or is_relay_ring(topology):
        return None
    try:
        dims = swing_dims(topology)
    except ScheduleError:
        return None
    if not all(is_pow2(d) and d >= 2 for d in dims):
        return None
    strides = [math.prod(dims[:k]) for k in range(len(dims))]
    reps = [0]
    for d, st in zip(dims, strides):
        reps = [r + x * st for r in reps for x in range(min(d, 4))]
    return tuple(sorted(reps))


register(Algorithm(
    name="swing",
    collectives=frozenset({CollKind.ALLREDUCE, CollKind.REDUCESCATTER, CollKind.ALLGATHER, CollKind.BROADCAST,
                           CollKind.REDUCE}),
    topologies="tori of any dimension and shape (torus:AxBx..., torus:N or ring:N for 1-D, relayed on the ring), "
               "hyperx:RxC, hammingmesh:AxB:XxY",
    summary="Swing: peers at +-1, -+1, +-3, ... per dimension; 2D multiport collectives, B or L variant; "
            "broadcast/reduce trees",
    reference=REFERENCE,
    build=build, applies=applies, orbits=orbits,
    params=(Param("variant", str, "bandwidth", "bandwidth (RS + AG, 2 log2 p steps) or latency "
                  "(log2 p full-vector steps)", ("bandwidth", "latency")),
            Param("ports", str, "all", "all: 2D plain + mirrored collectives; single: one plain collective",
                  ("all", "single"))),
    example="collc build --topology torus:8x8 --algorithm swing --collective allreduce -o swing.xml",
))
