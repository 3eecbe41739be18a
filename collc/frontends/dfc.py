"""Collectives on the two-dimensional fully connected network (2dfc): DO, MD, MultiTree.

Pham, *Low-Latency Collective Communication for HPC Networks* (PhD thesis, SOKENDAI 2026),
chapter 4; ``docs/kautz-dfc.md`` explains the schedules and lists the check values.
Topology: ``dfc:M2xM1`` (or ``dragonfly:A,G``); rank ``a2 M1 + a1`` sits at row ``a2``,
column ``a1``; every row and every column is a clique.  Block ``b`` = one rank's share.

* ``dfc-do`` -- Dimension Order (section 4.1.1, Algorithm 1, eq. 4.5).  Alltoall: step 1
  sends on every row link one combined message of the M2 blocks bound for the
  neighbour's column, step 2 on every column link the M1 blocks bound for the
  neighbour: ``2 alpha + (M1 + M2) b beta``.  Allgather: own block along the row, then
  the M1 row blocks along the column (``2 alpha + (1 + M1) b beta``); reduce-scatter
  the mirror (derived, see the docs: ``2 alpha + (M2 + 1) b beta``); allreduce DO
  reduce-scatter + DO allgather.
* ``dfc-md`` -- Multi-Dimensional (section 4.2, Algorithm 2, eqs. 4.6-4.7).  Every block
  is cut into ``(M1+M2)/g`` chunks (``g = gcd(M1, M2)``); the first ``M2/g`` (the
  fraction ``x = M2/(M1+M2)``) go X then Y, the rest Y then X, so both link sets work
  in both steps: alltoall ``2 alpha + max(M1, M2) b beta``.  Allgather the same split
  (square: ``2 alpha + (M+1)/2 b beta``); allreduce is DO reduce-scatter + MD allgather,
  the thesis's recommendation (Fig. 4.12); reduce-scatter is DO's.
* ``dfc-multitree`` -- the MultiTree competitor with the thesis's parity tree build
  (section 4.1.2, Fig. 4.2, eq. 4.4), square networks only: one tree per root, step 1
  the root reaches its 2(M-1) axis neighbours, each later step grows two row and two
  column neighbours (offsets 1,2 then 3,4, ...); a column neighbour at row offset o
  feeds its row's columns of o's parity, a row neighbour at column offset o its
  column's rows of the other parity.  Steps ``ceil((M^2-1)/(2M-2))``: 3, 4, 5, 9 on
  4x4, 6x6, 8x8, 16x16.  Alltoall: step 1 carries a neighbour's chunk and its children's
  (``ceil(M/2) + 1`` chunks), later steps one chunk per link: ``(M/2+1) alpha + (M+1) b
  beta`` for even M (Table 4.2 prints ``(M/2) alpha + M b beta``; see the docs).

In n dimensions (section 4.5) DO goes axis by axis, last axis first (n steps, step j
carries N/M_j blocks per link); MD needs equal sizes, cuts every block in n chunks and
runs the n rotations of that axis order at once, so every link works in every step
(a third of DO's bytes on 3x3x3).

Every step is one message per directed link (combined blocks that are not contiguous
are gathered and scattered through scratch by the lowering), so the lowered program's
rounds are the thesis's steps.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> s = build_schedule("dfc-md", parse_spec("dfc:4x4"), CollKind.ALLTOALL)
>>> s.collective.chunk_factor, sorted({t.step for t in s.transfers if not t.is_local})
(2, [0, 1])
>>> parity_trees(8).steps
5
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, prefix_copy
from collc.frontends.multitree import Trees, check_trees
from collc.frontends.registry import Algorithm, BuildFn, Options, register
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology
from collc.topology.kautz_dfc import dfc_dims

__all__ = ["applies", "applies_multitree", "parity_trees", "eq44_steps", "tree_alltoall", "REFERENCE"]

REFERENCE = ("Pham, Low-Latency Collective Communication for HPC Networks (PhD thesis, SOKENDAI 2026), "
             "chapter 4: DO (Algorithm 1, eq. 4.5), MD (Algorithm 2, eq. 4.6), MultiTree parity build (eq. 4.4)")

KINDS = {
    "dfc-do": frozenset({CollKind.ALLTOALL, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE}),
    "dfc-md": frozenset({CollKind.ALLTOALL, CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE}),
    "dfc-multitree": frozenset({CollKind.ALLTOALL}),
}

Pos = tuple[int, int]   # (a2, a1): row, column
X, Y = 1, 0             # axis index into Pos: X moves along a row (changes a1), Y along a column


def _applies(topology: Topology, kind: CollKind, algorithm: str) -> str | None:
    dims = dfc_dims(topology)
    if algorithm == "dfc-multitree" and (dims is None or len(dims) != 2):
        return f"dfc-multitree needs a square two-dimensional fully connected network (dfc:MxM), got {topology.name}"
    if dims is None:
        return f"{algorithm} needs a fully connected network (dfc:M2xM1, dfc:M3xM2xM1, ... or dragonfly:A,G), " \
               f"got {topology.name}"
    if kind not in KINDS[algorithm]:
        return f"{algorithm} does not implement {kind.value}"
    if algorithm == "dfc-md" and len(dims) > 2 and kind is not CollKind.REDUCESCATTER and len(set(dims)) != 1:
        return f"dfc-md in {len(dims)} dimensions needs equal sizes (the thesis gives no split for unequal ones), " \
               f"got {topology.name}"
    if algorithm == "dfc-multitree" and dims[0] != dims[1]:
        return f"dfc-multitree's parity build is defined for square networks only (thesis 4.1.2), got {topology.name}"
    return None


def applies(topology: Topology, kind: CollKind) -> str | None:
    """None when ``dfc-do`` and ``dfc-md`` can run ``kind`` on ``topology``, else the reason."""
    return _applies(topology, kind, "dfc-do")


def applies_multitree(topology: Topology, kind: CollKind) -> str | None:
    """None when ``dfc-multitree`` can run ``kind`` on ``topology``, else the reason."""
    return _applies(topology, kind, "dfc-multitree")


def eq44_steps(m2: int, m1: int) -> int:
    """Eq. 4.4: the fewest steps a MultiTree alltoall needs, ceil((m1 m2 - 1) / (m1 + m2 - 2))."""
    return -(-(m1 * m2 - 1) // (m1 + m2 - 2))


# ---------------------------------------------------------------------- grid helpers
class _Grid:
    def __init__(self, m2: int, m1: int) -> None:
        self.dims = (m2, m1)
        self.n = m2 * m1

    def rank(self, p: Pos) -> int:
        return p[0] * self.dims[1] + p[1]

    def pos(self, r: int) -> Pos:
        a2, a1 = divmod(r, self.dims[1])
        return a2, a1

    @staticmethod
    def moved(p: Pos, axis: int, value: int) -> Pos:
        return (value, p[1]) if axis == Y else (p[0], value)


def _slots(blocks: Sequence[int], c: int, part: Sequence[int]) -> list[int]:
    return [q * c + k for q in blocks for k in part]


# ---------------------------------------------------------------------- alltoall, DO and MD
def _alltoall_parts(b: Builder, g: _Grid, c: int, parts: Sequence[tuple[int, Sequence[int]]]) -> None:
    """Dimension-order alltoall of each part (first axis, chunk offsets in a block) at steps 0 and 1.

    Part scratch at rank v: slot ``(j, t)`` holds the piece from the rank at position j on
    the first axis (v's line) bound for position t on the second axis.
    """
    inplace = b.collective.inplace
    base = 0
    for first, part in parts:
        second = 1 - first
        mf, ms = g.dims[first], g.dims[second]
        width = len(part)

        def sslot(j: int, t: int) -> list[int]:
            return [base + (j * ms + t) * width + k for k in range(width)]  # noqa: B023 (used in this loop only)

        for u in range(g.n):
            pu = g.pos(u)
            if not inplace:
                b.move(0, u, u, I, _slots([u], c, part), O, _slots([u], c, part))
            # own pieces bound along the second axis wait in scratch for step 1
            for t in range(ms):
                if t != pu[second]:
                    dest = g.rank(g.moved(pu, second, t))
                    b.move(0, u, u, I, _slots([dest], c, part), S, sslot(pu[first], t))
            # step 0: along the first axis, the pieces bound for the neighbour's line
            for x in range(mf):
                if x == pu[first]:
                    continue
                v = g.moved(pu, first, x)
                dests = [g.rank(g.moved(v, second, t)) for t in range(ms)]
                b.move(0, u, g.rank(v), I, _slots(dests, c, part), S,
                       [s for t in range(ms) for s in sslot(pu[first], t)])
            # step 1: along the second axis, every piece of the line bound for the neighbour
            line = [g.rank(g.moved(pu, first, j)) for j in range(mf)]
            for y in range(ms):
                if y == pu[second]:
                    continue
                w = g.rank(g.moved(pu, second, y))
                b.move(1, u, w, S, [s for j in range(mf) for s in sslot(j, y)], O, _slots(line, c, part))
            # pieces that reached their destination at step 0
            for j in range(mf):
                if j != pu[first]:
                    b.move(1, u, u, S, sslot(j, pu[second]), O, _slots([line[j]], c, part))
        base += g.n * width
    b.scratch = base


# ---------------------------------------------------------------------- allgather, DO and MD
def _allgather_parts(b: Builder, g: _Grid, c: int, parts: Sequence[tuple[int, Sequence[int]]], s0: int,
                     src: Buffer) -> None:
    """Each part: own piece along the first axis at step s0, the line's pieces along the second at s0+1.

    ``src`` is where rank u's own block starts out: the input (allgather, offsets within the
    block) or the output (allreduce, at the block's own offsets)."""
    for first, part in parts:
        second = 1 - first
        mf, ms = g.dims[first], g.dims[second]
        for u in range(g.n):
            pu = g.pos(u)
            own = list(part) if src is I else _slots([u], c, part)
            for x in range(mf):
                if x != pu[first]:
                    b.move(s0, u, g.rank(g.moved(pu, first, x)), src, own, O, _slots([u], c, part))
            line = [g.rank(g.moved(pu, first, j)) for j in range(mf)]
            for y in range(ms):
                if y != pu[second]:
                    w = g.rank(g.moved(pu, second, y))
                    b.move(s0 + 1, u, w, O, _slots(line, c, part), O, _slots(line, c, part))


# ---------------------------------------------------------------------- reduce-scatter, DO
def _reducescatter_do(b: Builder, g: _Grid, c: int, s0: int, allreduce: bool) -> None:
    """DO reduce-scatter: X then Y (mirror of DO allgather), whole blocks of ``c`` chunks.

    Partials of block q live at offset ``q c`` of O (allreduce) or of scratch
    (reducescatter, initialised by :func:`_reducescatter_init`; a last, local step
    copies a rank's finished block to its output)."""
    part = range(c)
    m2, m1 = g.dims
    work = O if allreduce else S
    for u in range(g.n):
        pu = g.pos(u)
        # step s0 (X): to row neighbour (a2, k) the blocks bound for column k, reduced there
        for k in range(m1):
            if k != pu[1]:
                dests = _slots([g.rank((r, k)) for r in range(m2)], c, part)
                b.move(s0, u, g.rank((pu[0], k)), O if allreduce else I, dests, work, dests, reduce=True)
        # step s0+1 (Y): the partial of (r, a1) to (r, a1)
        for r in range(m2):
            if r != pu[0]:
                q = _slots([g.rank((r, pu[1]))], c, part)
                b.move(s0 + 1, u, g.rank((r, pu[1])), work, q, work, q, reduce=True)
        if not allreduce:
            b.move(s0 + 2, u, u, S, _slots([u], c, part), O, part)
    if not allreduce:
        b.scratch = g.n * c


def _reducescatter_init(b: Builder, g: _Grid, c: int) -> None:
    """Step 0 (local): the partial slots a rank accumulates (its column's blocks) start as its input."""
    for v in range(g.n):
        a1 = g.pos(v)[1]
        column = _slots([g.rank((r, a1)) for r in range(g.dims[0])], c, range(c))
        b.move(0, v, v, I, column, S, column)


# ---------------------------------------------------------------------- MultiTree (parity build)
def parity_trees(m: int, topology: Topology | None = None) -> Trees:
    """The thesis's parity MultiTree build on an m x m 2dfc, as :class:`multitree.Trees`.

    Validated with :func:`multitree.check_trees` (spanning trees, every link at most once
    per step) when ``topology`` is given."""
    if m < 2:
        raise ScheduleError(f"the parity build needs m >= 2, got {m}")
    g = _Grid(m, m)
    edges: list[tuple[tuple[int, int, int], ...]] = []
    paths: list[tuple[tuple[int, ...], ...]] = []
    sequence: list[tuple[int, int, int, int]] = []
    steps = 1
    for root in range(g.n):
        r2, r1 = g.pos(root)

        def at(o2: int, o1: int) -> int:
            return g.rank(((r2 + o2) % m, (r1 + o1) % m))  # noqa: B023 (used in this iteration only)

        tree: list[tuple[int, int, int]] = []
        for o in range(1, m):
            tree.append((root, at(0, o), 1))
        for o in range(1, m):
            tree.append((root, at(o, 0), 1))
        for o in range(1, m):
            t = 2 + (o - 1) // 2
            steps = max(steps, t)
            tree.extend((at(o, 0), at(o, x), t) for x in range(1, m) if x % 2 == o % 2)
            tree.extend((at(0, o), at(y, o), t) for y in range(1, m) if y % 2 != o % 2)
        tree.sort(key=lambda e: e[2])
        edges.append(tuple(tree))
        paths.append(tuple((p, ch) for p, ch, _ in tree))
        sequence.extend((root, p, ch, t) for p, ch, t in tree)
    trees = Trees(f"dfc:{m}x{m}", g.n, steps, "parity", "offset", 0, tuple(edges), tuple(paths),
                  tuple(sorted(sequence, key=lambda e: (e[3], e[0]))))
    if topology is not None:
        check_trees(trees, topology)
    return trees


def tree_alltoall(b: Builder, edges: Sequence[Sequence[tuple[int, int, int]]]) -> None:
    """Alltoall over one depth-2 tree per root (``edges[r]``: ``(parent, child, step)``, steps from 1).

    Tree r carries r's chunks.  At step 1 the root sends each child its chunk and the
    chunks of that child's children (one message, into scratch); a child then forwards
    one chunk to each of its children at their step.  Forwards sharing a link and a step
    (several trees) travel as one combined message.  Writes schedule steps ``t - 1``.
    """
    n = b.collective.nranks
    used = [0] * n
    forward: dict[tuple[int, int, int], list[tuple[int, int]]] = {}   # (step, u, v) -> [(slot, root)]
    for root, tree in enumerate(edges):
        if not b.collective.inplace:
            b.move(0, root, root, I, [root], O, [root])
        kids: dict[int, list[tuple[int, int]]] = {}
        for p, ch, t in tree:
            if p != root:
                kids.setdefault(p, []).append((ch, t))
        for p, ch, t in tree:
            if p != root:
                continue
            if t != 1:
                raise ScheduleError(f"tree {root}: the root must reach its children at step 1")
            below = kids.get(ch, [])
            at = used[ch]
            used[ch] += 1 + len(below)
            b.move(0, root, ch, I, [ch] + [k for k, _ in below], S, range(at, at + 1 + len(below)))
            b.move(1, ch, ch, S, [at], O, [root])
            for i, (k, t_k) in enumerate(below):
                if kids.get(k):
                    raise ScheduleError(f"tree {root} is deeper than 2")
                forward.setdefault((t_k - 1, ch, k), []).append((at + 1 + i, root))
    for (step, u, v), items in sorted(forward.items()):
        b.move(step, u, v, S, [slot for slot, _ in items], O, [root for _, root in items])
    b.scratch = max(used)


# ---------------------------------------------------------------------- n dimensions (section 4.5)
class _Cube:
    """Row-major coordinates of an n-dimensional fully connected network (last axis fastest)."""

    def __init__(self, dims: Sequence[int]) -> None:
        self.dims = tuple(dims)
        self.n = math.prod(self.dims)
        self.strides = [math.prod(self.dims[i + 1:]) for i in range(len(self.dims))]

    def coord(self, r: int, axis: int) -> int:
        return (r // self.strides[axis]) % self.dims[axis]

    def moved(self, r: int, axis: int, value: int) -> int:
        return r + (value - self.coord(r, axis)) * self.strides[axis]

    def line(self, r: int, axes: Sequence[int]) -> list[int]:
        """Ranks equal to ``r`` except on ``axes`` (which take every value), ascending."""
        out = [r]
        for a in axes:
            out = [self.moved(x, a, v) for x in out for v in range(self.dims[a])]
        return sorted(out)


def _nd_alltoall(b: Builder, cube: _Cube, c: int, parts: Sequence[tuple[Sequence[int], Sequence[int]]]) -> None:
    """Dimension-order alltoall of each part (axis order, chunk offsets) in n steps.

    Before step j a rank w holds the pieces (o, t) with o equal to w off the first j axes
    of the order and t equal to w on them; they live in region j of scratch (the input at
    j = 0), at the dense index of (o on axes < j, t on axes >= j).  Step j sends along
    axis order[j] the pieces whose destination has the neighbour's coordinate there."""
    n, inplace = cube.n, b.collective.inplace
    base = 0
    for order, part in parts:
        width = len(part)
        nax = len(order)

        def index(w: int, o: int, t: int, j: int) -> list[int]:
            """Chunks of piece (o, t) at rank w in region j (1 <= j < nax)."""
            pos = 0
            for i, a in enumerate(order):  # noqa: B023 (used in this loop only)
                pos = pos * cube.dims[a] + cube.coord(o if i < j else t, a)
            return [base + ((j - 1) * n + pos) * width + k for k in range(width)]  # noqa: B023

        def place(w: int, o: int, t: int, j: int) -> tuple[Buffer, list[int]]:
            if j == 0:
                return I, [t * c + k for k in part]  # noqa: B023
            if j == nax:
                return O, [o * c + k for k in part]  # noqa: B023
            return S, index(w, o, t, j)

        for u in range(n):
            if not inplace:
                b.move(0, u, u, I, [u * c + k for k in part], O, [u * c + k for k in part])
            for j, a in enumerate(order):
                origins = cube.line(u, order[:j])
                for x in range(cube.dims[a]):
                    v = cube.moved(u, a, x)
                    dests = [t for t in cube.line(u, order[j:]) if cube.coord(t, a) == x]
                    pieces = [(o, t) for o in origins for t in dests if not (v == u and o == u and t == u)]
                    if not pieces:
                        continue
                    sb = place(u, pieces[0][0], pieces[0][1], j)[0]
                    db = place(v, pieces[0][0], pieces[0][1], j + 1)[0]
                    src = [i for o, t in pieces for i in place(u, o, t, j)[1]]
                    dst = [i for o, t in pieces for i in place(v, o, t, j + 1)[1]]
                    b.move(j, u, v, sb, src, db, dst)
        base += (nax - 1) * n * width
    b.scratch = base


def _nd_allgather(b: Builder, cube: _Cube, c: int, parts: Sequence[tuple[Sequence[int], Sequence[int]]],
                  s0: int, src: Buffer) -> None:
    """Step j along axis order[j]: every block gathered on the first j axes of the order."""
    for order, part in parts:
        for u in range(cube.n):
            for j, a in enumerate(order):
                held = cube.line(u, order[:j])
                idx = [o * c + k for o in held for k in part]
                for x in range(cube.dims[a]):
                    if x != cube.coord(u, a):
                        own = list(part) if src is I and j == 0 else idx
                        b.move(s0 + j, u, cube.moved(u, a, x), src if j == 0 else O, own, O, idx)


def _nd_reducescatter(b: Builder, cube: _Cube, c: int, s0: int, work: Buffer, first: Buffer) -> None:
    """Step j along axis order[j] = last axis first: the partials of the blocks bound for the
    neighbour's coordinate there (equal to the sender on earlier axes), reduced there."""
    order = list(reversed(range(len(cube.dims))))
    for u in range(cube.n):
        for j, a in enumerate(order):
            for x in range(cube.dims[a]):
                if x == cube.coord(u, a):
                    continue
                v = cube.moved(u, a, x)
                dests = cube.line(v, order[j + 1:])
                idx = [t * c + k for t in dests for k in range(c)]
                b.move(s0 + j, u, v, first if j == 0 else work, idx, work, idx, reduce=True)


def _build_nd(algorithm: str, topology: Topology, request: Collective, dims: Sequence[int],
              opts: Options) -> Schedule:
    cube = _Cube(dims)
    n, kind, nax = cube.n, request.kind, len(dims)
    do_order = list(reversed(range(nax)))
    if algorithm == "dfc-md" and kind is not CollKind.REDUCESCATTER:
        if len(set(dims)) != 1:
            raise ScheduleError(f"dfc-md in {nax} dimensions needs equal sizes (the thesis gives no split for "
                                f"unequal ones), got {topology.name}")
        c = nax
        parts: list[tuple[Sequence[int], Sequence[int]]] = [(do_order[p:] + do_order[:p], [p]) for p in range(nax)]
    else:
        c = 1
        parts = [(do_order, [0])]
    if kind is CollKind.ALLTOALL:
        b = Builder(Collective(kind, n, c, request.inplace))
        _nd_alltoall(b, cube, c, parts)
    elif kind is CollKind.ALLGATHER:
        b = Builder(Collective(kind, n, c, request.inplace))
        if not request.inplace:
            for u in range(n):
                b.move(0, u, u, I, range(c), O, range(u * c, u * c + c))
        _nd_allgather(b, cube, c, parts, 0, I)
    elif kind is CollKind.REDUCESCATTER:
        b = Builder(Collective(kind, n, 1, request.inplace))
        for u in range(n):
            b.move(0, u, u, I, range(n), S, range(n))
        b.scratch = n
        _nd_reducescatter(b, cube, 1, 1, S, S)
        for u in range(n):
            b.move(1 + nax, u, u, S, [u], O, [0])
    else:
        b = Builder(Collective(kind, n, n * c, request.inplace))
        start = prefix_copy(b, I, O, n * c, range(n))
        _nd_reducescatter(b, cube, c, start, O, O)
        _nd_allgather(b, cube, c, parts, start + nax, O)
    return b.schedule(algorithm, opts, topology.name, REFERENCE)


# ---------------------------------------------------------------------- build
def _build(algorithm: str, topology: Topology, request: Collective, opts: Options) -> Schedule:
    reason = _applies(topology, request.kind, algorithm)
    if reason is not None:
        raise ScheduleError(reason)
    dims = dfc_dims(topology)
    assert dims is not None
    if len(dims) != 2:
        return _build_nd(algorithm, topology, request, dims, opts)
    m2, m1 = dims
    g = _Grid(m2, m1)
    n, kind = g.n, request.kind
    if algorithm == "dfc-md" and kind is not CollKind.REDUCESCATTER:
        gcd = math.gcd(m1, m2)
        c = (m1 + m2) // gcd
        x1 = m2 // gcd
        parts: list[tuple[int, Sequence[int]]] = [(X, range(0, x1)), (Y, range(x1, c))]
    else:
        c = 1
        parts = [(X, range(1))]
    if algorithm == "dfc-multitree":
        b = Builder(Collective(kind, n, 1, request.inplace))
        tree_alltoall(b, parity_trees(m1, topology).edges)
    elif kind is CollKind.ALLTOALL:
        b = Builder(Collective(kind, n, c, request.inplace))
        _alltoall_parts(b, g, c, parts)
    elif kind is CollKind.ALLGATHER:
        b = Builder(Collective(kind, n, c, request.inplace))
        if not request.inplace:
            for u in range(n):
                b.move(0, u, u, I, range(c), O, range(u * c, u * c + c))
        _allgather_parts(b, g, c, parts, 0, I)
    elif kind is CollKind.REDUCESCATTER:
        b = Builder(Collective(kind, n, 1, request.inplace))
        _reducescatter_init(b, g, 1)
        _reducescatter_do(b, g, 1, 1, allreduce=False)
    else:  # allreduce: DO reduce-scatter on whole blocks, then DO or MD allgather
        b = Builder(Collective(kind, n, n * c, request.inplace))
        start = prefix_copy(b, I, O, n * c, range(n))
        _reducescatter_do(b, g, c, start, allreduce=True)
        _allgather_parts(b, g, c, parts, start + 2, O)
    return b.schedule(algorithm, opts, topology.name, REFERENCE)


def _builder(algorithm: str) -> BuildFn:
    def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
        return _build(algorithm, topology, request, opts)
    return build


register(Algorithm(
    name="dfc-do",
    collectives=KINDS["dfc-do"],
    topologies="fully connected: dfc:M2xM1 (also n-D, dfc:M3xM2xM1), dragonfly:A,G",
    summary="Dimension Order on a 2dfc: rows then columns, one combined message per link and step (2 steps; "
            "n steps in n-D)",
    reference=REFERENCE, build=_builder("dfc-do"), applies=lambda t, r, o: _applies(t, r.kind, "dfc-do"),
    example="collc build --topology dfc:4x4 --algorithm dfc-do --collective alltoall -o a2a.xml",
))
register(Algorithm(
    name="dfc-md",
    collectives=KINDS["dfc-md"],
    topologies="fully connected: dfc:M2xM1 (also n-D with equal sizes), dragonfly:A,G",
    summary="Multi-Dimensional on a 2dfc: blocks split M2:M1, two dimension orders at once (2 steps; in n-D "
            "n orders rotated, n steps); allreduce = DO reduce-scatter + MD allgather",
    reference=REFERENCE, build=_builder("dfc-md"), applies=lambda t, r, o: _applies(t, r.kind, "dfc-md"),
    example="collc build --topology dfc:8x8 --algorithm dfc-md --collective alltoall -o a2a.xml",
))
register(Algorithm(
    name="dfc-multitree",
    collectives=KINDS["dfc-multitree"],
    topologies="square 2D fully connected: dfc:MxM",
    summary="MultiTree alltoall with the thesis's parity tree build (eq. 4.4 steps: 3/4/5/9 on 4x4/6x6/8x8/16x16)",
    reference=REFERENCE, build=_builder("dfc-multitree"),
    applies=lambda t, r, o: _applies(t, r.kind, "dfc-multitree"),
    example="collc build --topology dfc:8x8 --algorithm dfc-multitree --collective alltoall -o a2a.xml",
))
