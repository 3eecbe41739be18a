"""Kautz-C and Kautz-M collectives on the Kautz graph K(d, 2).

Pham, *Low-Latency Collective Communication for HPC Networks* (PhD thesis, SOKENDAI 2026),
chapter 3 (Table 3.1 tree types, eqs. 3.3-3.6, Table 3.2 costs, Fig. 3.1); the schedules
are spelled out in ``docs/kautz-dfc.md``.  Topology: ``kautz:D,2`` (directed, rank of word
``ab`` = ``D a + b - [b > a]``); n = D(D+1) ranks, out(ab) = {bz}, in(ab) = {wa},
rev(ab) = ba.  Both variants use, per root, the BFS out-tree (root -> its D out-neighbours
-> theirs; the reverse child ``ba`` has D-1 children, the others D) and per destination
the in-tree (the out-tree of ``ba`` with every word reversed, every link turned round and
time reversed).  Outgoing trees serve broadcast, allgather and alltoall; incoming trees
reduce and reduce-scatter; allreduce is reduce-scatter then allgather (Table 3.1).

* ``kautz-c`` (Combined, the thesis's proposal): 2 steps.  In step 2 every link carries
  the traffic of all trees that use it as ONE combined message (allgather: the blocks of
  the sender's in-neighbours other than the receiver, D or D-1 of them).  The payload is
  not contiguous in the buffers, so the lowering gathers it into scratch, sends one
  message and scatters it (the thesis's memcpy, section 3.2.2).  Costs (Table 3.2, M =
  block for broadcast/allgather/reduce-scatter, whole buffer for alltoall/allreduce):
  broadcast/reduce ``2(alpha + M beta)``; allgather/reduce-scatter ``2 alpha + (D+1) M
  beta``; allreduce ``4 alpha + 2 M/D beta``; alltoall ``2 alpha + (2D+1) M/(D(D+1)) beta``.
* ``kautz-m`` (simplified MultiTree): the child ``c_p`` (p-th in the order ``b a, b a+1,
  ...`` cyclic, so ``c_1`` = rev) relays its root's data at step ``p + 1``: D+1 steps,
  exactly one block per link per step.  Allgather ``(D+1)(alpha + M beta)``, allreduce
  ``2(D+1) alpha + 2 M/D beta``, alltoall ``(D+1) alpha + (2D+1) M/(D(D+1)) beta``.
  Broadcast and reduce (one tree, no contention) are the 2-step BFS of kautz-c, as in
  Table 3.2.

Point-to-point multipath (section 3.3, :func:`multipath`): the up to D edge-disjoint paths
of length <= 3 between two ranks are computed, but no file is emitted: an MSCCL XML is
selected for a collective that every rank calls, while ``ncclSend``/``ncclRecv`` are called
by the two endpoints only, so the relaying ranks of a multipath transfer would never run
their part, and collc's IR has no send/receive collective.

Scatter and gather (Table 3.1) are not built: collc's IR and checker have no scatter or
gather collective, and of the MSCCL runtimes only RCCL hooks them (its src/collectives.cc;
the NCCL-based executor intercepts neither), so no file is emitted for them.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("kautz-m", parse_spec("kautz:2,2"), CollKind.ALLGATHER, inplace=True)
>>> sorted({t.step for t in s.transfers if not t.is_local})
[0, 1, 2]
>>> [t.count for t in build_schedule("kautz-c", parse_spec("kautz:2,2"), CollKind.ALLGATHER,
...                                  inplace=True).step(1) if t.src == 0]
[1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder
from collc.frontends.dfc import tree_alltoall
from collc.frontends.registry import Algorithm, BuildFn, Options, register
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology
from collc.topology.kautz_dfc import kautz_params, kautz_rank, kautz_words

__all__ = ["applies", "out_tree", "in_tree", "children", "multipath", "REFERENCE", "KINDS"]

REFERENCE = ("Pham, Low-Latency Collective Communication for HPC Networks (PhD thesis, SOKENDAI 2026), "
             "chapter 3: Kautz-C (eqs. 3.3-3.6) and Kautz-M (Fig. 3.1), Table 3.2")

KINDS = frozenset({CollKind.BROADCAST, CollKind.REDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER,
                   CollKind.ALLREDUCE, CollKind.ALLTOALL})

Edge = tuple[int, int, int]   # (parent, child, step from 1)


def applies(topology: Topology, kind: CollKind) -> str | None:
    """None when the Kautz schedules can run ``kind`` on ``topology``, else the reason."""
    dk = kautz_params(topology)
    if dk is None or dk[1] != 2:
        return f"the Kautz schedules need a Kautz graph of diameter 2 (kautz:D,2), got {topology.name}"
    if kind not in KINDS:
        return f"the Kautz schedules do not implement {kind.value}"
    return None


def children(rank: int, d: int) -> list[int]:
    """Out-neighbours of ``ab`` in Kautz-M order: ``b k`` for k = a, a+1, ..., d, 0, ..., a-1, k != b."""
    a, b = kautz_words(d, 2)[rank]
    return [kautz_rank((b, (a + i) % (d + 1)), d, 2) for i in range(d + 1) if (a + i) % (d + 1) != b]


def out_tree(root: int, d: int, variant: str) -> list[Edge]:
    """The BFS out-tree of ``root``: root -> c at step 1; c -> out(c) minus root at step 2
    (``c``: Kautz-C) or at step p + 1 for the p-th child (``m``: Kautz-M)."""
    edges: list[Edge] = []
    kids = children(root, d)
    edges.extend((root, c, 1) for c in kids)
    for p, c in enumerate(kids, start=1):
        t = 2 if variant == "c" else p + 1
        edges.extend((c, w, t) for w in children(c, d) if w != root)
    return edges


def _flip(rank: int, d: int) -> int:
    a, b = kautz_words(d, 2)[rank]
    return kautz_rank((b, a), d, 2)


def in_tree(root: int, d: int, variant: str) -> list[Edge]:
    """The in-tree of ``root``: the out-tree of rev(root) with words reversed, links turned
    round and time reversed (``(c', p', T + 1 - t)``: child sends to parent at that step)."""
    steps = 2 if variant == "c" else d + 1
    return [(_flip(c, d), _flip(p, d), steps + 1 - t) for p, c, t in out_tree(_flip(root, d), d, variant)]


def multipath(src: int, dst: int, d: int) -> list[tuple[int, ...]]:
    """Section 3.3: edge-disjoint paths ``src -> dst`` on K(d, 2), the shortest first.

    For ``xy -> zt``: z != y (type 1): <x y z t> and <x y k z t>, k not in {y, z};
    zt = yx (type 2): the link and <x y k y x>, k not in {x, y}; z = y, t != x (type 3):
    the link and <x y k y t>, k not in {x, y, t}.  Paths are rank tuples.

    >>> from collc.topology.kautz_dfc import kautz_label
    >>> [[kautz_label(r, 3, 2) for r in p] for p in multipath(kautz_rank("01", 3, 2), kautz_rank("02", 3, 2), 3)]
    [['01', '10', '02'], ['01', '12', '20', '02'], ['01', '13', '30', '02']]
    """
    if src == dst:
        raise ScheduleError("a multipath transfer needs two different ranks")
    x, y = kautz_words(d, 2)[src]
    z, t = kautz_words(d, 2)[dst]

    def walk(word: Sequence[int]) -> tuple[int, ...]:
        return tuple(kautz_rank((a, b), d, 2) for a, b in zip(word, word[1:]))

    letters = range(d + 1)
    if z != y:
        return [walk((x, y, z, t))] + [walk((x, y, k, z, t)) for k in letters if k not in (y, z)]
    if t == x:
        return [walk((x, y, x))] + [walk((x, y, k, y, x)) for k in letters if k not in (x, y)]
    return [walk((x, y, t))] + [walk((x, y, k, y, t)) for k in letters if k not in (x, y, t)]


# ---------------------------------------------------------------------- emitters
def _down(b: Builder, trees: Sequence[Sequence[Edge]], s0: int, c: int, own: Buffer, own_at_root_offset: bool) -> None:
    """Copy each root's block (``c`` chunks at ``root * c`` of O) down its tree from step ``s0``.

    The root reads its block from ``own`` (I at offset 0 when ``own_at_root_offset`` is
    False, else at the block's offset).  Blocks sharing a link and a step travel combined."""
    groups: dict[tuple[int, int, int, Buffer], tuple[list[int], list[int]]] = {}
    for root, tree in enumerate(trees):
        if not tree:
            continue
        for p, ch, t in tree:
            buf = own if p == root else O
            first = root * c if (p != root or own_at_root_offset) else 0
            src, dst = groups.setdefault((s0 + t - 1, p, ch, buf), ([], []))
            src.extend(range(first, first + c))
            dst.extend(range(root * c, root * c + c))
    for (step, p, ch, buf), (src, dst) in sorted(groups.items(), key=lambda kv: kv[0][:3]):
        b.move(step, p, ch, buf, src, O, dst)


def _up(b: Builder, trees: Sequence[Sequence[Edge]], s0: int, c: int, work: Buffer) -> None:
    """Reduce each destination's block up its in-tree from step ``s0``; partials of block q
    live at ``q * c`` of ``work`` on every rank.  Blocks sharing a link and a step are combined."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for q, tree in enumerate(trees):
        for u, v, t in tree:
            groups.setdefault((s0 + t - 1, u, v), []).extend(range(q * c, q * c + c))
    for (step, u, v), idx in sorted(groups.items()):
        b.move(step, u, v, work, idx, work, idx, reduce=True)


def _build(variant: str, topology: Topology, request: Collective, opts: Options) -> Schedule:
    reason = applies(topology, request.kind)
    if reason is not None:
        raise ScheduleError(reason)
    dk = kautz_params(topology)
    assert dk is not None
    d = dk[0]
    n, kind, inplace = request.nranks, request.kind, request.inplace
    steps = 2 if variant == "c" else d + 1
    outs = [out_tree(r, d, variant) for r in range(n)]
    ins = [in_tree(r, d, variant) for r in range(n)]
    name = f"kautz-{variant}"
    if kind is CollKind.BROADCAST or kind is CollKind.REDUCE:
        root = request.root
        assert root is not None
        b = Builder(Collective(kind, n, 1, inplace, root))
        if kind is CollKind.BROADCAST:
            if not inplace:
                b.move(0, root, root, I, [0], O, [0])
            trees = [out_tree(root, d, "c") if r == root else [] for r in range(n)]
            # every rank's block is chunk 0: the root's tree moves O[0] (from I[0] at the root)
            for p, ch, t in trees[root]:
                b.move(t - 1, p, ch, I if p == root else O, [0], O, [0])
        else:
            start = 0
            if not inplace:
                for r in range(n):
                    b.move(0, r, r, I, [0], O, [0])
                start = 1
            for u, v, t in in_tree(root, d, "c"):
                b.move(start + t - 1, u, v, O, [0], O, [0], reduce=True)
    elif kind is CollKind.ALLGATHER:
        b = Builder(Collective(kind, n, 1, inplace))
        if not inplace:
            for r in range(n):
                b.move(0, r, r, I, [0], O, [r])
        _down(b, outs, 0, 1, I, False)
    elif kind is CollKind.ALLTOALL:
        b = Builder(Collective(kind, n, 1, inplace))
        tree_alltoall(b, outs)
    elif kind is CollKind.REDUCESCATTER:
        b = Builder(Collective(kind, n, 1, inplace))
        for r in range(n):   # partials in scratch, seeded with the input; the result copied out last
            b.move(0, r, r, I, range(n), S, range(n))
        b.scratch = n
        _up(b, ins, 1, 1, S)
        for r in range(n):
            b.move(1 + steps, r, r, S, [r], O, [0])
    else:  # allreduce: reduce-scatter of blocks r, then allgather, both in O
        b = Builder(Collective(kind, n, n, inplace))
        start = 0
        if not inplace:
            for r in range(n):
                b.move(0, r, r, I, range(n), O, range(n))
            start = 1
        _up(b, ins, start, 1, O)
        _down(b, outs, start + steps, 1, O, True)
    return b.schedule(name, opts, topology.name, REFERENCE)


def _builder(variant: str) -> BuildFn:
    def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
        return _build(variant, topology, request, opts)
    return build


_NOTE = ("; scatter/gather: not emitted (of the MSCCL runtimes only RCCL hooks them, and collc has no "
         "scatter/gather collective)")

register(Algorithm(
    name="kautz-c",
    collectives=KINDS,
    topologies="Kautz graph of diameter 2: kautz:D,2",
    summary="Kautz-C: BFS trees, traffic of all trees on a link combined into one message; 2 steps "
            "(allreduce 4)" + _NOTE,
    reference=REFERENCE, build=_builder("c"), applies=lambda t, r, o: applies(t, r.kind),
    example="collc build --topology kautz:4,2 --algorithm kautz-c --collective alltoall -o a2a.xml",
))
register(Algorithm(
    name="kautz-m",
    collectives=KINDS,
    topologies="Kautz graph of diameter 2: kautz:D,2",
    summary="Kautz-M: simplified MultiTree, one block per link per step; D+1 steps (allreduce 2(D+1); "
            "broadcast/reduce 2)" + _NOTE,
    reference=REFERENCE, build=_builder("m"), applies=lambda t, r, o: applies(t, r.kind),
    example="collc build --topology kautz:4,2 --algorithm kautz-m --collective allgather -o ag.xml",
))
