"""MultiTree allreduce, allgather and reduce-scatter (Huang et al., ISCA'21).

Family page: docs/multitree.md (what it does, the paper, the check values and their tests).

Collectives: allgather and reducescatter (T steps each), allreduce (2T steps:
reduce-scatter, then allgather), alltoall (on the allgather trees, section VII's
DLRM use: T steps, a message per tree edge carrying the child's subtree's blocks), where T is the number of time steps Algorithm 1
needs to grow its trees on the topology; one more step for the local copies of an
out-of-place reducescatter or allreduce.  Topology: any on which every rank can
reach every other (direct links, or paths whose interior nodes are all switches).
Cost model (alpha-beta, message size M, link bandwidth b): allreduce
2T(alpha + M/(N b)); e.g. T = 5 on a 4x4 torus (ring: 15), T = N-1 (as ring) with
one NIC link per rank (``cap=1``) on switch fabrics.

Algorithm (paper section III-C, Algorithm 1; docs/multitree.md): one
spanning tree per rank, tree ``r`` rooted at ``r`` and carrying chunk ``r``.  The
trees grow top-down in lockstep time steps ``t = 1, 2, ...``.  Every step starts
from a fresh copy of the link capacities (a link of multiplicity m may carry m
tree edges per step) and runs rounds in which the trees take turns, each adding at
most one node per turn: its parents are scanned in insertion order, skipping nodes
added in the current step (store-and-forward), and the first parent with a free
link to a node not yet in the tree adopts it.  Neighbour order: for tori and meshes
(topologies with a ``dims`` parameter) the artifact's N, S, W, E, i.e. for each
dimension in order ``-1`` then ``+1`` (a dimension of size 2 has one neighbour);
otherwise ascending out-neighbours.

Switch fabrics (section III-C3): a tree edge ``p -> c`` is a path whose interior
nodes are switches; it consumes one unit of capacity on every link of the path for
that step.  In a tree's turn the parents are scanned in insertion order as in
Algorithm 1, and the first with a free path adopts its nearest rank not in the tree
(a rank on its own switch, then one switch further, ...; breadth-first over switches
with free capacity, ascending ids).  With one NIC link per rank this gives the
artifact's stars around each root with T = N-1 on fattree:8 and dgx2:16.  The trees
are also grown ranking candidate edges by path length over *all* parents, and those
are kept when they need fewer steps: on BiGraph, stars need more than N-1 steps (the
switch-to-switch link units of all N(N-1) star paths, over the 4m links a step
offers: 40 > 31 on 4x8; parent-first takes 43) while length-first reaches N-1 (31 on
4x8, 63 on 4x16) with trees that forward.  ``Trees.search`` says which.  On direct
networks every edge has length 1 and both are exactly Algorithm 1.

Parameters:

* ``rule`` -- when a step ends: ``any`` (the paper: after a round in which no tree
  grew) or ``last`` (the authors' artifact: after a round in which the last tree of
  the round did not grow).  The two agree on tori; on a 4x4 mesh T is 8 vs 10.
* ``order`` -- turn order of the trees in a round: ``ascending`` root ids, or
  the artifact's ``sort=True`` with a static priority: the very first round of
  step 1 is ascending; every later round orders roots by priority, descending, ties
  broken by descending root id.  ``priority``: the priority of root ``r`` is the
  height it must at least reach, its eccentricity in the rank graph (hops, where a
  hop is a link or a switch-only path).  ``artifact``: the artifact's own priority
  (:func:`artifact_priority`: on a 2-D mesh its buggy corner distance, else 0), which
  with ``rule=last`` reproduces its mesh step counts (10 and 34 on 4x4 and 8x8).
* ``cap`` -- the NI capacity in links: sends and receives per rank per step, 0 for
  no limit beyond the links (the paper's torus/mesh runs); ``cap=1`` is the paper's
  one-NIC setting for fat tree, BiGraph and DGX-2.
* ``threadblocks`` -- ``link``: one tb per directed link, transfers in step order
  (docs/multitree.md); ``fused``: lanes and ``tb_pairs`` hints (:class:`FusedTbs`)
  under which a rank's receive and the send that forwards it share a tb and fuse
  into one ``rrs``/``rcs`` step, for tori too large for one step per transfer
  (4 (N-1) steps per rank; 32x32 needs it to fit the parser's 4095 nodes per rank);
  ``auto`` (default): ``link`` unless a rank would not fit in the file written.  Forwards only fuse
  between direct neighbours, so on switch fabrics ``fused`` is ``link``.

On a topology whose links are not all paired with a reverse link of the same
multiplicity (``ring:8:uni``), reduce-scatter uses trees grown on the transposed
topology (an edge ``p -> c`` there is the link ``c -> p`` here), so T may differ
between the two phases; otherwise both phases use the same trees.

Schedules (0-based steps; ``s0`` = 1 for the local copies of an out-of-place
allreduce or reducescatter, else 0): an edge ``(p, c, t)`` of tree ``r`` reduces
chunk ``r`` from ``c`` into ``p`` at step ``s0 + T - t`` (reducescatter and the
first phase of allreduce) and copies it from ``p`` to ``c`` at ``s0 + T + t - 1``
in allreduce, ``t - 1`` in allgather.  A child is added after its parent, so a rank
holds every child's partial before it sends its own (notes section 1.5).
Out-of-place allgather copies its input to ``o[r]`` at step 0 while the roots send
from the input; out-of-place reducescatter works in scratch (ring's pattern).

>>> from collc.topology import parse_spec
>>> trees = build_trees(parse_spec("torus:4x4"))
>>> trees.steps, trees.links_used, len(trees.edges[0])
(5, (64, 64, 48, 48, 16), 15)
>>> trees.edges[0][:4]
((0, 12, 1), (0, 4, 1), (0, 3, 1), (0, 1, 1))
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> build_schedule("multitree", parse_spec("torus:4x4"), CollKind.ALLREDUCE, inplace=True).nsteps
10
>>> build_trees(parse_spec("fattree:8"), cap=1).steps
63
"""

from __future__ import annotations

import numpy as np

from collc.limits import MAX_PARSER_NODES
from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, ColumnBuilder, Ints, code, prefix_copy, refusal_of
from collc.frontends.multitree.lanes import (TB_MODES, Edge3, FusedTbs, link_run_lanes, link_runs, link_tbs_nodes,
                                             turn_order)
from collc.frontends.multitree.trees import (ORDERS, RULES, TableEntry, Trees, _one_hop, _require_connected,
                                             artifact_priority, build_trees, check_trees, eccentricities,
                                             neighbour_order)
from collc.frontends.registry import FILE_GPUS, Algorithm, Options, Param, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

__all__ = ["Trees", "TableEntry", "build_trees", "check_trees", "neighbour_order", "eccentricities", "artifact_priority",
           "RULES", "ORDERS",
           "REFERENCE", "FusedTbs", "turn_order", "link_tbs_nodes", "TB_MODES"]

REFERENCE = ("Huang et al., Communication Algorithm-Architecture Co-Design for Distributed Deep Learning "
             "(MultiTree, ISCA'21), section III-C, Algorithm 1")


# ---------------------------------------------------------------------- schedules
def _symmetric(topology: Topology) -> bool:
    """True when every link has a reverse link of the same multiplicity, so the
    trees of the transposed topology are the same trees."""
    return all((r := topology.link(lk.dst, lk.src)) is not None and r.multiplicity == lk.multiplicity
               for lk in topology.links)


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    if request.nranks < 2:
        return "multitree needs at least 2 ranks"
    return refusal_of(lambda: _require_connected(topology, _one_hop(topology)))


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    if n < 2:
        raise ScheduleError("multitree needs at least 2 ranks")
    rule, order, cap = opts.get("rule", "any"), opts.get("order", "ascending"), opts.get("cap", 0)
    mode = opts.get("threadblocks", "auto")
    if not isinstance(rule, str) or not isinstance(order, str) or not isinstance(cap, int) or mode not in TB_MODES:
        raise ScheduleError(f"multitree: bad parameters rule={rule!r}, order={order!r}, cap={cap!r}, "
                            f"threadblocks={mode!r}")
    kind = request.kind
    ag = build_trees(topology, rule, order, cap) if kind is not CollKind.REDUCESCATTER else None
    if kind is CollKind.ALLTOALL:
        mode = "link"    # a forward carries a whole subtree's chunks: nothing to fuse
    rs = None     # only a reduction has a reduce-scatter phase (allgather's would change its lanes)
    if kind in (CollKind.REDUCESCATTER, CollKind.ALLREDUCE):
        rs = (ag if ag is not None and _symmetric(topology) else
              build_trees(topology.transpose(), rule, order, cap))   # edge p -> c there is link c -> p here
    if mode == "auto":
        file_gpus = opts.get(FILE_GPUS, n)
        assert isinstance(file_gpus, int)
        mode = "fused" if link_tbs_nodes(n, rs, ag, file_gpus) > MAX_PARSER_NODES else "link"
    ln_rs: dict[Edge3, int] = {}
    ln_ag: dict[Edge3, int] = {}
    tb_pairs: list[tuple[int, int, int, int]] = []
    fusing = FusedTbs(turn_order(topology)) if mode == "fused" else None
    if fusing is not None and fusing.turns >= 1:
        phases = [(trees, reduce) for trees, reduce in ((rs, True), (ag, False)) if trees is not None]
        for trees, reduce in phases:
            fusing.forwards(trees, reduce)
        fusing.allot()
        load: dict[tuple[int, int], list[int]] = {}
        lanes = [fusing.lanes(trees, i, reduce, load) for i, (trees, reduce) in enumerate(phases)]
        ln_rs = lanes[0] if rs is not None else {}
        ln_ag = lanes[-1] if ag is not None else {}
        tb_pairs = fusing.pairs()
    if kind is CollKind.ALLTOALL:
        assert ag is not None
        b = Builder(Collective(kind, n, 1, request.inplace))
        _alltoall(b, ag)
        b.tb_pairs = tb_pairs
        b.transfers = link_runs(b.transfers)    # fusing is None: alltoall is "link"
        b.ordered_sends = True
        return b.schedule("multitree", opts, topology.name, REFERENCE)
    # the other collectives as columns (a million transfers on 32x32): a row per tree edge
    cb = ColumnBuilder(Collective(kind, n, n if kind is CollKind.ALLREDUCE else 1, request.inplace))
    if kind is CollKind.ALLREDUCE:
        assert rs is not None and ag is not None
        start = prefix_copy(cb, I, O, n, range(n))
        r, p, c, t = rs.edge_columns
        cb.moves(start + rs.steps - t, c, p, O, r, O, r, reduce=True, lane=_lanes(ln_rs, r, c, p))
        r, p, c, t = ag.edge_columns
        cb.moves(start + rs.steps - 1 + t, p, c, O, r, O, r, lane=_lanes(ln_ag, r, p, c))
    elif kind is CollKind.ALLGATHER:
        assert ag is not None
        if not request.inplace:
            ranks = np.arange(n, dtype=np.int64)
            cb.moves(0, ranks, ranks, I, 0, O, ranks)
        r, p, c, t = ag.edge_columns
        # the root reads its input (in place it is o[r]); others forward o[r]
        root = p == r
        cb.moves(t - 1, p, c, np.where(root, code(I), code(O)), np.where(root, 0, r), O, r,
                 lane=_lanes(ln_ag, r, p, c))
    elif kind is CollKind.REDUCESCATTER:
        assert rs is not None
        start = 0
        if not request.inplace:
            cb.scratch = n
            for x in range(n):
                cb.move(0, x, x, I, range(n), S, range(n))
                cb.move(0, x, x, I, range(x, x + 1), O, range(0, 1))
            start = 1
        work = I if request.inplace else S
        r, p, c, t = rs.edge_columns
        # in place o[0] of rank r is i[r]; out of place the root accumulates in o[0]
        last = (p == r) & (not request.inplace)
        cb.moves(start + rs.steps - t, c, p, work, r, np.where(last, code(O), code(work)), np.where(last, 0, r),
                 reduce=True, lane=_lanes(ln_rs, r, c, p))
    else:  # pragma: no cover - the registry filters collectives
        raise ScheduleError(f"multitree does not implement {kind.value}")
    cb.tb_pairs = tb_pairs
    linked = fusing is None
    del ag, rs, r, p, c, t, ln_rs, ln_ag, fusing     # the trees and lane maps: not alive beside the transfers
    if linked:
        # one tb per link and run: a link's transfers in step order, never sharing the link
        cb.set_lanes(link_run_lanes(cb.columns()))
        cb.ordered_sends = True
    return cb.schedule("multitree", opts, topology.name, REFERENCE)


def _lanes(lanes: dict[Edge3, int], r: Ints, a: Ints, b: Ints) -> Ints | int:
    """The lane of each edge ``(r, a, b)`` (0 where ``lanes`` has none)."""
    if not lanes:
        return 0
    get = lanes.get
    return np.fromiter((get(e, 0) for e in zip(r.tolist(), a.tolist(), b.tolist())), dtype=np.int64, count=len(r))


def _alltoall(b: Builder, trees: Trees) -> None:
    """Alltoall over the allgather trees (paper section VII: all-to-all for DLRM).

    Tree ``r`` carries rank ``r``'s blocks: its edge ``(p, c, t)`` moves, at step
    ``t``, the blocks for every rank of ``c``'s subtree, as one message.  A rank keeps
    the blocks it receives in tree ``r`` in scratch in the subtree's preorder (itself
    first, then each child's subtree in the order the children joined), so that what
    it forwards to a child is one contiguous slice; at step ``t + 1`` it copies its own
    block to ``o[r]``.  At step 0 every root packs its input into scratch in its
    tree's preorder (and, out of place, copies its own block to ``o[r]``).  A link
    carries one message per step as in allgather, of the child's subtree size.
    """
    n = b.collective.nranks
    used = [0] * n                       # scratch chunks allotted per rank
    for r, tree_edges in enumerate(trees.edges):
        kids: dict[int, list[tuple[int, int]]] = {}
        for p, c, t in tree_edges:
            kids.setdefault(p, []).append((c, t))
        order: list[int] = []            # preorder, iteratively
        stack = [r]
        while stack:
            v = stack.pop()
            order.append(v)
            stack.extend(c for c, _ in reversed(kids.get(v, [])))
        pos = {v: i for i, v in enumerate(order)}
        size = [0] * n
        for v in reversed(order):
            size[v] = 1 + sum(size[c] for c, _ in kids.get(v, []))
        # rank v's region for tree r holds the preorder of its subtree; the root's omits itself
        base: dict[int, int] = {}
        for v in order:
            base[v] = used[v] - (pos[v] if v != r else 1)   # slot of preorder index i: base + i
            used[v] += size[v] if v != r else n - 1
        if not b.collective.inplace:
            b.move(0, r, r, I, [r], O, [r])
        if n > 1:
            b.move(0, r, r, I, tuple(order[1:]), S, range(base[r] + 1, base[r] + n))
        for p, c, t in tree_edges:
            lo = pos[c]
            b.move(t, p, c, S, range(base[p] + lo, base[p] + lo + size[c]), S,
                   range(base[c] + lo, base[c] + lo + size[c]))
            b.move(t + 1, c, c, S, [base[c] + lo], O, [r])
    b.scratch = max(used)


def _report(topology: Topology, schedule: Schedule) -> list[str]:
    """``collc build --report`` lines: the trees behind the schedule."""
    opts = dict(schedule.provenance.params)
    trees = build_trees(topology, rule=opts.get("rule", "any"), order=opts.get("order", "ascending"),
                        cap=int(opts.get("cap", "0")))
    lines = trees.report()
    rs_line = ""
    if schedule.collective.kind in (CollKind.ALLREDUCE, CollKind.REDUCESCATTER):
        rs_line = (f"reduce-scatter runs data-driven, not at the paper's step {trees.steps + 1} - t (t: the edge's "
                   f"allgather step): a rank sends its partial once its children's have arrived and its link is free, "
                   f"leaves at once")
    if not schedule.tb_pairs:
        if rs_line and _symmetric(topology):   # else reduce-scatter runs on the transposed topology's trees
            rounds = trees.reduce_scatter_rounds()
            per_step = [0] * trees.steps
            for tree_edges in trees.edges:
                for _, _, t in tree_edges:
                    per_step[trees.steps - t] += 1
            rs_line += (f"; messages per round {', '.join(map(str, rounds))} ({len(rounds)} rounds) against the "
                        f"paper's {', '.join(map(str, per_step))} ({trees.steps} steps)")
        if rs_line:
            lines.append(rs_line)
        return lines + ["threadblocks: link (one per directed link and run of its transfers)"]
    if rs_line:
        lines.append(rs_line)
    fusing = FusedTbs(turn_order(topology))
    kept = fusing.forwards(trees, True) + fusing.forwards(trees, False)
    fusing.allot()
    forwards = 2 * sum(len({p for p, _, _ in e}) - 1 for e in trees.edges)
    return lines + [f"threadblocks: fused; {kept} of {forwards} forwards on the lane of their turn, lanes per "
                    f"turn {', '.join(str(len(x)) for x in fusing.lanes_of_turn[1:])} (the lowering fuses those "
                    f"whose receive and send are adjacent in their tb)"]


register(Algorithm(
    name="multitree",
    collectives=frozenset({CollKind.ALLREDUCE, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL}),
    topologies="any with every rank reaching every other over links or switch-only paths "
               "(torus, mesh, fattree, bigraph, dgx2, switch, complete, ...)",
    summary="one contention-free spanning tree per rank grown in lockstep (MultiTree, ISCA'21); "
            "T steps per phase, T = 5 on a 4x4 torus",
    reference=REFERENCE,
    build=build, applies=applies,
    params=(Param("rule", str, "any", "when a step ends: any (paper) or last (artifact)", RULES),
            Param("order", str, "ascending", "turn order: ascending roots; priority (artifact sort=True by "
                  "eccentricity); artifact (sort=True with the artifact's own priority)", ORDERS),
            Param("cap", int, 0, "sends and receives per rank per step (NI links); 0 = no limit"),
            Param("threadblocks", str, "auto", "link: one tb per directed link (fastest); fused: a tb "
                  "receives on one link and sends on another so forwards fuse (fewer XML steps); auto: "
                  "link unless a rank would exceed the parser's 4095 nodes in the file written "
                  "(alltoall: always link)", TB_MODES)),
    example="collc build --topology torus:4x4 --algorithm multitree --collective allreduce -o mt.xml",
    report=_report,
    # a tb per directed link, transfers in step order (docs/multitree.md): pairing a
    # receive link with a send link makes every send wait for unrelated arrivals, which
    # turns the data-driven trees back into lockstep steps (8x8 torus, 32 KiB, 16 GB/s,
    # 150 ns/hop in the event model: 5.7 us paired, 3.0 us unpaired)
    pair_tbs=False,
    budget_fallback={"threadblocks": "fused"},
))
