"""Double binary tree allreduce (NCCL; the MultiTree paper's DBTREE baseline).

Family page: docs/baselines.md (what it does, the paper, the check values and their tests).

Collective: allreduce.  Topology-oblivious (tree position = rank id), so it needs
a route between every parent and child: a switch, a complete graph, or a routed
network (torus, mesh) whose multi-hop routes then contend, which is the paper's
point (MultiTree ISCA'21 sections II-C, III-B Fig. 4b, VI;
docs/baselines.md).  Other topologies are refused with a ScheduleError naming the missing
route.

Trees.  Tree 0 is NCCL's in-order binary tree over ranks ``0..N-1``: rank 0 is
the root with a single child; rank ``r > 0`` with lowest set bit ``b`` has parent
``(r - b) | 2b`` (that is ``r + b`` or ``r - b``), or ``r - b`` when that is
``>= N``.  Odd ranks are its leaves.  Tree 1 is tree 0 mirrored (``r -> N-1-r``)
when N is even, so the leaves of one tree are the internal nodes of the other, or
shifted (``r -> r+1 mod N``) when N is odd.  Both have height
``H = ceil(log2 N)``.

Schedule.  Chunk factor 2: tree k owns chunk k (half the vector).  Reduce: a rank
sends its partial sum to its parent as soon as all its children have reduced into
it (step = height of its subtree); the root then holds the sum.  Broadcast: the
root sends at step H, a rank at depth k forwards to its children at step H + k.
The two trees run side by side on lanes 0 and 1: ``2H`` steps (plus one local copy
step out of place), each message half the vector; cost ``2H (alpha + M/(2b))``
without contention.  Pipelining is left to ``--chunks``.  ``alternate=true``
applies the paper's black/red colouring instead: tree 0 on even steps, tree 1 on
odd steps, so no rank sends or receives in both trees in one step (``4H`` steps).

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("double-binary-tree", parse_spec("switch:8"), CollKind.ALLREDUCE, inplace=True)
>>> s.nsteps, s.collective.chunk_factor
(6, 2)
>>> binary_tree_parents(6)
[None, 2, 4, 2, 0, 4]
>>> double_binary_tree(6)[1]
[1, 5, 3, 1, 3, None]
"""

from __future__ import annotations

from collc.errors import ScheduleError
from collc.frontends.common import I, O, Builder, prefix_copy, route_refusal
from collc.frontends.registry import Algorithm, Options, Param, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REFERENCE = ("Sanders, Speck & Traeff 2009 (two-tree broadcast/reduction); NCCL 2.4 double binary trees; "
             "baseline DBTREE of MultiTree ISCA'21 sections II-C, III-B (docs/baselines.md)")

Parents = list[int | None]


def binary_tree_parents(n: int) -> Parents:
    """Parent of every rank in NCCL's in-order binary tree rooted at rank 0."""
    parents: Parents = [None] * n
    for r in range(1, n):
        low = r & -r
        up = (r - low) | (low << 1)
        parents[r] = up if up < n else r - low
    return parents


def double_binary_tree(n: int) -> tuple[Parents, Parents]:
    """The two trees as parent lists: tree 0 and its mirror (N even) or shift (N odd)."""
    t0 = binary_tree_parents(n)
    if n % 2 == 0:
        def relabel(r: int) -> int:
            return n - 1 - r
    else:
        def relabel(r: int) -> int:
            return (r + 1) % n
    t1: Parents = [None] * n
    for r, p in enumerate(t0):
        t1[relabel(r)] = None if p is None else relabel(p)
    return t0, t1


def children_of(parents: Parents) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in parents]
    for r, p in enumerate(parents):
        if p is not None:
            kids[p].append(r)
    return kids


def subtree_heights(parents: Parents) -> list[int]:
    """Edges on the longest path from each rank down to a leaf of its subtree."""
    kids = children_of(parents)
    root = parents.index(None)
    order = [root]
    for r in order:  # BFS: parents before children
        order.extend(kids[r])
    height = [0] * len(parents)
    for r in reversed(order):
        height[r] = max((height[c] + 1 for c in kids[r]), default=0)
    return height


def depths(parents: Parents) -> list[int]:
    out = []
    for r in range(len(parents)):
        d, p = 0, parents[r]
        while p is not None:
            d, p = d + 1, parents[p]
        out.append(d)
    return out


def route_refusal_of(topology: Topology, trees: tuple[Parents, ...], algorithm: str) -> str | None:
    """Why the trees cannot run on the topology: a parent/child pair without a route either way."""
    pairs = ((a, b) for parents in trees for child, parent in enumerate(parents) if parent is not None
             for a, b in ((child, parent), (parent, child)))
    return route_refusal(topology, pairs, algorithm, "tree neighbours (it is topology-oblivious)")


def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
    if request.nranks < 2:
        return "double-binary-tree needs at least 2 ranks"
    return route_refusal_of(topology, double_binary_tree(request.nranks), "double-binary-tree")


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    if n < 2:
        raise ScheduleError("double-binary-tree needs at least 2 ranks")
    trees = double_binary_tree(n)
    alternate = bool(opts.get("alternate"))
    b = Builder(Collective(CollKind.ALLREDUCE, n, 2, request.inplace))
    start = prefix_copy(b, I, O, 2, range(n))
    for k, parents in enumerate(trees):
        height = subtree_heights(parents)
        depth = depths(parents)
        top = max(height)

        def at(local: int, tree: int = k) -> int:
            return start + (2 * local + tree if alternate else local)

        for r, p in enumerate(parents):
            if p is None:
                continue
            b.move(at(height[r]), r, p, O, [k], O, [k], reduce=True, lane=k)
            b.move(at(top + depth[p]), p, r, O, [k], O, [k], lane=k)
    return b.schedule("double-binary-tree", opts, topology.name, REFERENCE)


register(Algorithm(
    name="double-binary-tree",
    collectives=frozenset({CollKind.ALLREDUCE}),
    topologies="any topology with routes between all ranks (switch, complete, torus, mesh); topology-oblivious",
    summary="NCCL double binary tree: two complementary trees, half the vector each; 2 ceil(log2 N) steps",
    reference=REFERENCE,
    build=build, applies=applies,
    params=(Param("alternate", bool, False, "paper's black/red colouring: tree 0 on even steps, tree 1 on odd"),),
    example="collc build --topology switch:16 --algorithm double-binary-tree --collective allreduce "
            "--chunks 8 -o dbtree.xml",
))
