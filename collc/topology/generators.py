"""Generators for the standard topology families.

Every generator validates its arguments (:class:`TopologyError` on bad ones),
names the topology with its canonical spec string (``parse_spec(t.name) == t``),
records its parameters in ``Topology.params`` and, where one is known, a
Hamiltonian cycle over the ranks in ``Topology.cycle``.

Switch fabrics (``switch``, ``fattree``, ``bigraph``, ``dgx2``) number their
ranks first (``0 .. nranks-1``, grouped by the switch they attach to) and their
switch nodes after them; every rank attaches to its switch with one link each way.

Routed direct networks (``hyperx``, ``hammingmesh``; the Swing paper's section 5.4)
record ``routing: network`` in their params, so any rank may send to any other and
the network forwards along shortest paths (:meth:`Topology.is_routed`), and
``dims``, the global grid their ranks form (row-major like tori).

Rank numbering of tori and meshes is **row-major, last dimension fastest**:
in ``torus([R, C])`` rank ``r * C + c`` sits at row ``r``, column ``c``;
:func:`coords` and :func:`rank_of` convert.

Hosts (``Topology.hosts``, docs/algorithms.md "Hosts and link kinds"): ``switch`` and ``dgx2``
are one host (their links ``nvlink``); every other family here puts each rank on a host of its
own (the ``hosts=``/``per-host=`` spec options group them), and the switches of ``fattree``,
``bigraph`` and ``hammingmesh`` are network switches (links ``net``).

All links of one generated topology share ``bandwidth`` (GB/s) and
``latency`` (us).  Non-default values appear in the name as ``bw=`` / ``lat=``
options, e.g. ``ring:8:uni,bw=25,lat=0.7``.

>>> torus([4, 4]).name, len(torus([4, 4]).links)
('torus:4x4', 64)
>>> coords(6, [4, 4]), rank_of((1, 2), [4, 4])
((1, 2), 6)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from collc.errors import TopologyError
from collc.topology.model import Link, Topology

__all__ = ["ring", "torus", "mesh", "hypercube", "complete", "switch", "fattree", "bigraph", "dgx2",
           "hammingmesh", "hyperx", "coords", "rank_of", "MAX_RANKS", "MAX_LINKS"]

#: Largest number of ranks a generator accepts.
MAX_RANKS = 1 << 16
#: Largest number of directed links a generator accepts (bounds ``complete``).
MAX_LINKS = 1 << 20     # each link is ~10 us and ~300 bytes to build: the largest specs stay seconds

Coord = tuple[int, ...]


# ---------------------------------------------------------------------- argument checks
def _check_count(value: object, what: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TopologyError(f"{what} must be an integer, got {value!r}")
    if value < minimum:
        raise TopologyError(f"{what} must be >= {minimum}, got {value}")
    if value > MAX_RANKS:
        raise TopologyError(f"{what} must be <= {MAX_RANKS}, got {value}")
    return value


def _check_dims(dims: Sequence[int], family: str) -> tuple[int, ...]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) == 0:
        raise TopologyError(f"{family} dimensions must be a non-empty sequence of integers, got {dims!r}")
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TopologyError(f"{family} dimensions must be integers, got {dims!r}")
    out = tuple(dims)
    if any(d < 2 for d in out):
        raise TopologyError(f"{family} dimensions must each be >= 2, got {_dims_str(out)}")
    if math.prod(out) > MAX_RANKS:
        raise TopologyError(f"{family} {_dims_str(out)} has {math.prod(out)} ranks, more than {MAX_RANKS}")
    return out


def _check_link_attrs(bandwidth: float, latency: float) -> None:
    if not _is_finite_number(bandwidth) or bandwidth <= 0:
        raise TopologyError(f"bandwidth must be a finite number > 0 (GB/s), got {bandwidth!r}")
    if not _is_finite_number(latency) or latency < 0:
        raise TopologyError(f"latency must be a finite number >= 0 (us), got {latency!r}")


def _is_finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _dims_str(dims: Sequence[int]) -> str:
    return "x".join(str(d) for d in dims)


def format_number(x: float) -> str:
    """Shortest text that parses back to ``x`` (``25.0`` -> ``25``)."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def link_attr_suffix(bandwidth: float, latency: float) -> tuple[list[str], list[tuple[str, str]]]:
    """The spec options and params that record non-default link attributes (``bw=``, ``lat=``)."""
    options: list[str] = []
    params: list[tuple[str, str]] = []
    if float(bandwidth) != 1.0:
        options.append(f"bw={format_number(bandwidth)}")
        params.append(("bandwidth", format_number(bandwidth)))
    if float(latency) != 0.0:
        options.append(f"lat={format_number(latency)}")
        params.append(("latency", format_number(latency)))
    return options, params


def _finish(family: str, args: str, params: list[tuple[str, str]], options: list[str],
            bandwidth: float, latency: float) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Canonical name and params, adding non-default link attributes."""
    extra_options, extra_params = link_attr_suffix(bandwidth, latency)
    options += extra_options
    params += extra_params
    name = f"{family}:{args}" + (":" + ",".join(options) if options else "")
    return name, tuple(params)


# ---------------------------------------------------------------------- coordinates
def coords(rank: int, dims: Sequence[int]) -> Coord:
    """Coordinates of ``rank`` in a grid of ``dims`` (row-major, last dim fastest)."""
    dims_t = _check_dims(dims, "grid")
    total = math.prod(dims_t)
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < total:
        raise TopologyError(f"rank {rank!r} is out of range for grid {_dims_str(dims_t)} (0..{total - 1})")
    out = []
    for d in reversed(dims_t):
        rank, c = divmod(rank, d)
        out.append(c)
    return tuple(reversed(out))


def rank_of(coord: Sequence[int], dims: Sequence[int]) -> int:
    """Rank at coordinates ``coord`` in a grid of ``dims`` (inverse of :func:`coords`)."""
    dims_t = _check_dims(dims, "grid")
    if len(coord) != len(dims_t) or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c < d for c, d in zip(coord, dims_t)):
        raise TopologyError(f"coordinates {tuple(coord)!r} are out of range for grid {_dims_str(dims_t)}")
    rank = 0
    for c, d in zip(coord, dims_t):
        rank = rank * d + c
    return rank


def _strides(dims: Sequence[int]) -> list[int]:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return strides


def _grid_links(dims: tuple[int, ...], wrap: bool, bandwidth: float, latency: float) -> tuple[Link, ...]:
    strides = _strides(dims)
    links: list[Link] = []
    for rank in range(math.prod(dims)):
        neighbors: set[int] = set()
        for d, stride in zip(dims, strides):
            c = (rank // stride) % d
            for step in (-1, 1):
                nc = c + step
                if not 0 <= nc < d:
                    if not wrap:
                        continue
                    nc %= d
                neighbors.add(rank + (nc - c) * stride)
        links.extend(Link(rank, v, bandwidth, latency) for v in sorted(neighbors))
    return tuple(links)


# ---------------------------------------------------------------------- Hamiltonian cycles on grids
def _snake(dims: Sequence[int]) -> list[Coord]:
    """Boustrophedon (reflected mixed-radix Gray code) order of a grid: a
    Hamiltonian path of the mesh, consecutive entries differ by 1 in one coordinate."""
    order: list[Coord] = [()]
    for d in reversed(dims):
        # prepend dimension d (slower than everything already in order)
        backwards = order[::-1]
        order = [(i,) + c for i in range(d) for c in (order if i % 2 == 0 else backwards)]
    return order


def _mesh_cycle_2d(rows: int, cols: int) -> list[tuple[int, int]]:
    """Cycle through a rows x cols mesh without wraparound; needs ``rows`` even."""
    cycle = [(0, 0)]
    for r in range(rows):
        span = range(1, cols) if r % 2 == 0 else range(cols - 1, 0, -1)
        cycle.extend((r, c) for c in span)
    cycle.extend((r, 0) for r in range(rows - 1, 0, -1))
    return cycle


def _odd_torus_cycle_2d(rows: int, cols: int) -> list[tuple[int, int]]:
    """Cycle through a rows x cols grid, both odd and >= 3, using columns as a
    path and the row wraparound (rows-1 -> 0) once."""
    cycle: list[tuple[int, int]] = []
    for r in range(rows - 2):
        span = range(cols) if r % 2 == 0 else range(cols - 1, -1, -1)
        cycle.extend((r, c) for c in span)
    for c in range(cols - 1, -1, -1):
        pair = [(rows - 2, c), (rows - 1, c)]
        cycle.extend(pair if (cols - 1 - c) % 2 == 0 else pair[::-1])
    return cycle


def _grid_cycle(dims: tuple[int, ...], wrap: bool) -> tuple[int, ...] | None:
    """A Hamiltonian cycle of a torus (``wrap``) or mesh, as ranks, or None."""
    if len(dims) == 1:
        n = dims[0]
        return tuple(range(n)) if wrap or n == 2 else None
    if wrap and dims[0] % 2 == 0:
        # the plain snake closes: it ends at (dims[0]-1, 0, ..., 0), a wraparound neighbour of 0
        return tuple(rank_of(c, dims) for c in _snake(dims))
    # View the grid as rows (dimension 0) x columns (snake order of the other dimensions).
    rows = dims[0]
    column_path = _snake(dims[1:])
    cols = len(column_path)
    if rows % 2 == 0:
        cells = _mesh_cycle_2d(rows, cols)
    elif cols % 2 == 0:
        cells = [(r, c) for c, r in _mesh_cycle_2d(cols, rows)]
    elif wrap:
        cells = _odd_torus_cycle_2d(rows, cols)
    else:
        return None  # a mesh with an odd number of ranks is bipartite and unbalanced
    return tuple(rank_of((r,) + column_path[c], dims) for r, c in cells)


# ---------------------------------------------------------------------- generators
def ring(n: int, bidirectional: bool = True, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """Ring of ``n`` ranks: ``i -> i+1 (mod n)``, and ``i+1 -> i`` when
    bidirectional.  ``ring(2)`` has one link each way.  Cycle ``0..n-1``."""
    n = _check_count(n, "ring size", 2)
    if not isinstance(bidirectional, bool):
        raise TopologyError(f"bidirectional must be True or False, got {bidirectional!r}")
    _check_link_attrs(bandwidth, latency)
    pairs = {(i, (i + 1) % n) for i in range(n)}
    if bidirectional:
        pairs |= {(b, a) for a, b in pairs}
    links = tuple(Link(a, b, bandwidth, latency) for a, b in sorted(pairs))
    params = [("n", str(n)), ("direction", "bi" if bidirectional else "uni")]
    name, params_t = _finish("ring", str(n), params, [] if bidirectional else ["uni"], bandwidth, latency)
    return Topology(name, n, links, params=params_t, cycle=tuple(range(n)))


def torus(dims: Sequence[int], bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """Torus with wraparound in every dimension; each dimension >= 2.  A
    dimension of size 2 gets one link each way.  Ranks are row-major (last
    dimension fastest).  Always carries a Hamiltonian cycle: the snake order
    when it closes (first dimension even), otherwise a constructed one."""
    dims_t = _check_dims(dims, "torus")
    _check_link_attrs(bandwidth, latency)
    text = _dims_str(dims_t)
    name, params = _finish("torus", text, [("dims", text)], [], bandwidth, latency)
    return Topology(name, math.prod(dims_t), _grid_links(dims_t, True, bandwidth, latency),
                    params=params, cycle=_grid_cycle(dims_t, True))


def mesh(dims: Sequence[int], bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """Mesh (grid without wraparound), bidirectional links between neighbours;
    ranks row-major.  Has a Hamiltonian cycle iff the rank count is even
    (or the mesh is ``mesh:2``); it is recorded when it exists."""
    dims_t = _check_dims(dims, "mesh")
    _check_link_attrs(bandwidth, latency)
    text = _dims_str(dims_t)
    name, params = _finish("mesh", text, [("dims", text)], [], bandwidth, latency)
    return Topology(name, math.prod(dims_t), _grid_links(dims_t, False, bandwidth, latency),
                    params=params, cycle=_grid_cycle(dims_t, False))


def hypercube(d: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """``2**d`` ranks, ``i <-> i ^ (1 << k)``; cycle is the binary reflected Gray code."""
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise TopologyError(f"hypercube dimension must be an integer >= 1, got {d!r}")
    if (1 << d) > MAX_RANKS:
        raise TopologyError(f"hypercube dimension must be <= {MAX_RANKS.bit_length() - 1}, got {d}")
    _check_link_attrs(bandwidth, latency)
    n = 1 << d
    links = tuple(Link(i, j, bandwidth, latency) for i in range(n) for j in sorted(i ^ (1 << k) for k in range(d)))
    name, params = _finish("hypercube", str(d), [("d", str(d))], [], bandwidth, latency)
    return Topology(name, n, links, params=params, cycle=tuple(i ^ (i >> 1) for i in range(n)))


def complete(n: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """``n`` ranks with a link for every ordered pair; cycle ``0..n-1``."""
    n = _check_count(n, "complete graph size", 2)
    if n * (n - 1) > MAX_LINKS:
        raise TopologyError(f"complete:{n} would have {n * (n - 1)} links, more than {MAX_LINKS}")
    _check_link_attrs(bandwidth, latency)
    links = tuple(Link(i, j, bandwidth, latency) for i in range(n) for j in range(n) if i != j)
    name, params = _finish("complete", str(n), [("n", str(n))], [], bandwidth, latency)
    return Topology(name, n, links, params=params, cycle=tuple(range(n)))


def switch(n: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """``n`` ranks on one crossbar (NVSwitch-like): switch node ``n`` and links
    ``rank <-> switch``.  Every rank routes to every other through the switch;
    cycle ``0..n-1``."""
    n = _check_count(n, "switch size", 2)
    _check_link_attrs(bandwidth, latency)
    links = tuple(Link(i, n, bandwidth, latency, 1, "nvlink") for i in range(n)) + tuple(
        Link(n, i, bandwidth, latency, 1, "nvlink") for i in range(n))
    name, params = _finish("switch", str(n), [("n", str(n))], [], bandwidth, latency)
    return Topology(name, n, links, nswitches=1, params=params, cycle=tuple(range(n)), hosts=(0,) * n)


def _rank_switch_links(nranks: int, per_switch: int, bandwidth: float, latency: float,
                       kind: str = "net") -> list[Link]:
    """One link each way between rank ``i`` and switch node ``nranks + i // per_switch``."""
    links: list[Link] = []
    for i in range(nranks):
        sw = nranks + i // per_switch
        links.append(Link(i, sw, bandwidth, latency, 1, kind))
        links.append(Link(sw, i, bandwidth, latency, 1, kind))
    return links


def fattree(k: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """The MultiTree paper's k-ary 2-level fat tree (ISCA'21 section VI-A): ``k`` leaf
    switches with ``k`` ranks each and ``k`` spine switches, one link each way between
    every leaf and every spine.  ``k >= 2``; ``k*k`` ranks, ``2k`` switches, ``4k^2``
    directed links.

    Numbering: rank ``i`` sits on leaf ``i // k``; leaf switch ``l`` is node
    ``k*k + l``, spine switch ``s`` is node ``k*k + k + s``.  Cycle ``0..k*k-1``
    (every pair of ranks has a route through the switches).

    >>> t = fattree(8)
    >>> t.name, t.nranks, t.nswitches, len(t.links)
    ('fattree:8', 64, 16, 256)
    >>> t.route(0, 1), t.route(0, 8)
    ((0, 64, 1), (0, 64, 72, 65, 8))
    """
    k = _check_count(k, "fat tree arity", 2)
    if k * k > MAX_RANKS:
        raise TopologyError(f"fattree:{k} would have {k * k} ranks, more than {MAX_RANKS}")
    _check_link_attrs(bandwidth, latency)
    n = k * k
    links = _rank_switch_links(n, k, bandwidth, latency)
    for leaf in range(n, n + k):
        for spine in range(n + k, n + 2 * k):
            links.append(Link(leaf, spine, bandwidth, latency, 1, "net"))
            links.append(Link(spine, leaf, bandwidth, latency, 1, "net"))
    name, params = _finish("fattree", str(k), [("k", str(k))], [], bandwidth, latency)
    return Topology(name, n, tuple(links), nswitches=2 * k, params=params, cycle=tuple(range(n)))


def bigraph(m: int, nsw: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """BiGraph (EFLOPS; MultiTree ISCA'21 section VI-A): ``nsw`` switches with ``m``
    ranks each, split into ``nsw/2`` upper and ``nsw/2`` lower switches with one link
    each way between every upper and every lower switch (complete bipartite).
    ``m >= 1``, ``nsw`` even and ``>= 2``; ``m*nsw`` ranks.

    Numbering: rank ``i`` sits on switch ``i // m``; switch ``s`` is node
    ``m*nsw + s``; switches ``0 .. nsw/2-1`` are the upper half.  Cycle ``0..m*nsw-1``.

    >>> t = bigraph(4, 8)
    >>> t.name, t.nranks, t.nswitches, len(t.links)
    ('bigraph:4x8', 32, 8, 96)
    >>> t.route(0, 4)
    (0, 32, 36, 33, 4)
    """
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise TopologyError(f"bigraph ranks per switch must be an integer >= 1, got {m!r}")
    nsw = _check_count(nsw, "bigraph switch count", 2)
    if nsw % 2:
        raise TopologyError(f"bigraph switch count must be even (upper and lower halves), got {nsw}")
    if m * nsw > MAX_RANKS:
        raise TopologyError(f"bigraph:{m}x{nsw} would have {m * nsw} ranks, more than {MAX_RANKS}")
    if 2 * (nsw // 2) ** 2 + 2 * m * nsw > MAX_LINKS:
        raise TopologyError(f"bigraph:{m}x{nsw} would have {2 * (nsw // 2) ** 2 + 2 * m * nsw} links, "
                            f"more than {MAX_LINKS}")
    _check_link_attrs(bandwidth, latency)
    n = m * nsw
    half = nsw // 2
    links = _rank_switch_links(n, m, bandwidth, latency)
    for upper in range(n, n + half):
        for lower in range(n + half, n + nsw):
            links.append(Link(upper, lower, bandwidth, latency, 1, "net"))
            links.append(Link(lower, upper, bandwidth, latency, 1, "net"))
    name, params = _finish("bigraph", f"{m}x{nsw}", [("m", str(m)), ("n", str(nsw))], [], bandwidth, latency)
    return Topology(name, n, tuple(links), nswitches=nsw, params=params, cycle=tuple(range(n)))


def dgx2(n: int = 16, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """DGX-2-like fabric as the MultiTree artifact models it (one plane): two switches
    with ``n/2`` ranks each, joined by ``n/2`` parallel links each way (one
    :class:`Link` with ``multiplicity = n/2``).  ``n`` even and ``>= 2``; ``dgx2:16`` is
    the real machine's size.

    Numbering: ranks ``0 .. n/2-1`` on switch node ``n``, the rest on switch node
    ``n+1``.  Cycle ``0..n-1``.

    >>> t = dgx2(16)
    >>> t.name, t.nswitches, t.link(16, 17).multiplicity, t.route(0, 8)
    ('dgx2:16', 2, 8, (0, 16, 17, 8))
    """
    n = _check_count(n, "dgx2 rank count", 2)
    if n % 2:
        raise TopologyError(f"dgx2 rank count must be even (two switches), got {n}")
    _check_link_attrs(bandwidth, latency)
    half = n // 2
    links = _rank_switch_links(n, half, bandwidth, latency, "nvlink")
    links.append(Link(n, n + 1, bandwidth, latency, half, "nvlink"))
    links.append(Link(n + 1, n, bandwidth, latency, half, "nvlink"))
    name, params = _finish("dgx2", str(n), [("n", str(n))], [], bandwidth, latency)
    return Topology(name, n, tuple(links), nswitches=2, params=params, cycle=tuple(range(n)), hosts=(0,) * n)


def _check_grid2(dims: Sequence[int], family: str, what: str, minimum: int) -> tuple[int, int]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) != 2:
        raise TopologyError(f"{family} {what} must be two integers (rows, columns), got {dims!r}")
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TopologyError(f"{family} {what} must be integers, got {dims!r}")
        if d < minimum:
            raise TopologyError(f"{family} {what} must each be >= {minimum}, got {_dims_str(dims)}")
    return dims[0], dims[1]


def hyperx(dims: Sequence[int], bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """2D HyperX ``R x C`` (Swing NSDI'24 section 5.4, Fig. 15): every rank has a link
    each way to every other rank of its row and of its column; ``R, C >= 2``.  Ranks
    are row-major (rank ``r*C + c`` at row ``r``, column ``c``); ``R*C*(R+C-2)``
    directed links.  A routed network (``routing: network``): ranks in neither the
    same row nor the same column talk over two hops.  Cycle: the snake over rows
    (or columns) when R (or C) is even.

    >>> t = hyperx([3, 4])
    >>> t.name, t.nranks, len(t.links), t.route(0, 3), t.is_routed()
    ('hyperx:3x4', 12, 60, (0, 3), True)
    """
    rows, cols = _check_grid2(dims, "hyperx", "dimensions", 2)
    n = rows * cols
    if n > MAX_RANKS:
        raise TopologyError(f"hyperx {rows}x{cols} has {n} ranks, more than {MAX_RANKS}")
    if n * (rows + cols - 2) > MAX_LINKS:
        raise TopologyError(f"hyperx {rows}x{cols} would have {n * (rows + cols - 2)} links, more than {MAX_LINKS}")
    _check_link_attrs(bandwidth, latency)
    links: list[Link] = []
    for rank in range(n):
        r, c = divmod(rank, cols)
        peers = [r * cols + x for x in range(cols) if x != c] + [y * cols + c for y in range(rows) if y != r]
        links.extend(Link(rank, v, bandwidth, latency) for v in sorted(peers))
    text = f"{rows}x{cols}"
    cycle: tuple[int, ...] | None = None
    if rows % 2 == 0:
        cycle = tuple(rank_of(cell, (rows, cols)) for cell in _snake((rows, cols)))
    elif cols % 2 == 0:
        cycle = tuple(rank_of((r, c), (rows, cols)) for c, r in _snake((cols, rows)))
    name, params = _finish("hyperx", text, [("dims", text), ("routing", "network")], [], bandwidth, latency)
    return Topology(name, n, tuple(links), params=params, cycle=cycle)


def hammingmesh(board: Sequence[int], arrangement: Sequence[int], bandwidth: float = 1.0,
                latency: float = 0.0) -> Topology:
    """HammingMesh (Hoefler et al. SC'22; Swing NSDI'24 section 5.4, Figs. 13-14):
    boards of ``A x B`` ranks (a 2D mesh on the board, no wraparound) arranged in
    ``X x Y`` boards; ``A, B >= 1``, ``X, Y >= 2``.  ``hammingmesh([2, 2], [32, 32])``
    is the paper's Hx2Mesh of 4096 ranks, ``([4, 4], [16, 16])`` its Hx4Mesh.

    The ranks form a global ``(A*X) x (B*Y)`` grid, row-major: rank ``R*(B*Y) + C``
    sits at global row ``R``, column ``C``, on board ``(R // A, C // B)``.  Boards are
    joined per global row and per global column by a network, modelled as one
    full-bandwidth switch node per line (a fat tree with full bisection): the
    switch of row ``R`` is node ``N + R`` (``N`` = number of ranks) and links each
    way to the west-edge and east-edge rank of that row on every board; the switch
    of column ``C`` is node ``N + A*X + C`` and links to the north- and south-edge
    ranks of that column on every board.  A rank that is both edges of a line (a
    board side of 1) has one link of multiplicity 2 to its switch.  A routed
    network (``routing: network``); no cycle is recorded.

    >>> t = hammingmesh([2, 2], [2, 2])
    >>> t.name, t.nranks, t.nswitches, len(t.links), t.route(0, 2)
    ('hammingmesh:2x2:2x2', 16, 8, 96, (0, 16, 2))
    """
    a, b = _check_grid2(board, "hammingmesh", "board sides", 1)
    x, y = _check_grid2(arrangement, "hammingmesh", "board arrangement", 2)
    rows, cols = a * x, b * y
    n = rows * cols
    if n > MAX_RANKS:
        raise TopologyError(f"hammingmesh {a}x{b}:{x}x{y} has {n} ranks, more than {MAX_RANKS}")
    _check_link_attrs(bandwidth, latency)
    links: list[Link] = []
    for rank in range(n):
        r, c = divmod(rank, cols)
        if c % b != b - 1:  # east neighbour on the same board
            links += [Link(rank, rank + 1, bandwidth, latency), Link(rank + 1, rank, bandwidth, latency)]
        if r % a != a - 1:  # south neighbour on the same board
            links += [Link(rank, rank + cols, bandwidth, latency), Link(rank + cols, rank, bandwidth, latency)]
    for r in range(rows):
        sw = n + r
        for c in range(cols):
            mult = (c % b == 0) + (c % b == b - 1)
            if mult:
                rank = r * cols + c
                links += [Link(rank, sw, bandwidth, latency, mult, "net"), Link(sw, rank, bandwidth, latency, mult, "net")]
    for c in range(cols):
        sw = n + rows + c
        for r in range(rows):
            mult = (r % a == 0) + (r % a == a - 1)
            if mult:
                rank = r * cols + c
                links += [Link(rank, sw, bandwidth, latency, mult, "net"), Link(sw, rank, bandwidth, latency, mult, "net")]
    params = [("board", f"{a}x{b}"), ("arrangement", f"{x}x{y}"), ("dims", f"{rows}x{cols}"),
              ("routing", "network")]
    name, params_t = _finish("hammingmesh", f"{a}x{b}", params, [f"{x}x{y}"], bandwidth, latency)
    return Topology(name, n, tuple(links), nswitches=rows + cols, params=params_t)
