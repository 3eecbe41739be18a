"""Kautz graphs, n-dimensional fully connected networks and Dragonfly groups.

Families of Pham, *Low-Latency Collective Communication for HPC Networks* (PhD thesis,
SOKENDAI 2026), section 2.1.3 (Kautz) and section 2.1.4 (two-dimensional fully connected,
2dfc); see ``docs/kautz-dfc.md``.

``kautz:D,K`` -- the directed Kautz graph K(D, K): nodes are the words ``x1 .. xK`` over
the alphabet ``0..D`` with ``x_i != x_(i+1)``; a link ``x -> y`` when the last ``K-1``
letters of ``x`` are the first ``K-1`` of ``y``.  ``(D+1) D^(K-1)`` ranks, out- and
in-degree ``D``, ``(D+1) D^K`` directed links, diameter ``K``.  Ranks number the words
in lexicographic order (for ``K = 2``: rank of ``ab`` is ``D a + b - [b > a]``, the
numbering of the thesis's code).  Links are one-way; only the reverse neighbour ``ba``
of ``ab`` is linked both ways.  Not routed: a rank sends only to its out-neighbours.

``dfc:M2xM1`` (and ``dfc:M3xM2xM1`` ...) -- the n-dimensional fully connected network
(HyperX / generalised hypercube): ranks differing in exactly one coordinate are linked
both ways.  Ranks are row-major with the last coordinate fastest: in ``dfc:M2xM1`` the
rank of ``(a2, a1)`` is ``a2 M1 + a1``; ``a1`` is the X (row) position.  Routed
(``routing: network``) like the thesis's SimGrid platforms, so baselines that talk to
far ranks (pairwise exchange, Bruck) run on it; the DO/MD/MultiTree schedules use
direct links only.

``dragonfly:A,G`` -- a Dragonfly of G groups of A routers (one rank each) whose groups are
cliques and whose router ``i`` has a global link to router ``i`` of every other group
(``h = G - 1`` global links per router): exactly the 2dfc ``G x A`` (thesis Figs 2.4 and
2.5: a = 3, g = 4, h = 3 is a 3 x 4 2dfc).  Rank ``g A + i`` is router ``i`` of group
``g``; the name stays ``dragonfly:A,G``.  An optional third number must be ``G - 1``.

>>> t = kautz(2, 2)
>>> t.nranks, len(t.links), [kautz_label(r, 2, 2) for r in t.out_neighbors(kautz_rank("01", 2, 2))]
(6, 12, ['10', '12'])
>>> dfc([4, 4]).nranks, len(dfc([3, 3]).links)
(16, 36)
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from functools import lru_cache

from collc.errors import TopologyError
from collc.topology.generators import MAX_RANKS, _snake, link_attr_suffix
from collc.topology.model import Link, Topology
from collc.topology.spec import parse_dims, parse_int, parse_link_options, register_family

__all__ = ["kautz", "kautz_words", "kautz_rank", "kautz_label", "dfc", "dragonfly", "dfc_dims", "kautz_params"]


_suffix = link_attr_suffix


# ---------------------------------------------------------------------- Kautz
@lru_cache(maxsize=64)
def kautz_words(d: int, k: int) -> tuple[tuple[int, ...], ...]:
    """The words of K(d, k) in rank order (lexicographic)."""
    return tuple(w for w in itertools.product(range(d + 1), repeat=k)
                 if all(a != b for a, b in zip(w, w[1:])))


@lru_cache(maxsize=64)
def _kautz_index(d: int, k: int) -> dict[tuple[int, ...], int]:
    return {w: i for i, w in enumerate(kautz_words(d, k))}


def kautz_rank(word: str | Sequence[int], d: int, k: int) -> int:
    """Rank of a Kautz word (``"01"`` or ``(0, 1)``); single-digit letters in the string form."""
    w = tuple(int(c) for c in word)
    found = _kautz_index(d, k).get(w)
    if found is None:
        raise TopologyError(f"{word!r} is not a word of the Kautz graph K({d},{k})")
    return found


def kautz_label(rank: int, d: int, k: int) -> str:
    """The word of ``rank`` as a string (letters joined, ``.``-separated when D > 9)."""
    w = kautz_words(d, k)[rank]
    return ("" if d <= 9 else ".").join(str(x) for x in w)


def kautz(d: int, k: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """The directed Kautz graph K(d, k); ``d >= 2``, ``k >= 1``."""
    for value, what in ((d, "Kautz degree"), (k, "Kautz diameter")):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TopologyError(f"{what} must be an integer, got {value!r}")
    if d < 2 or k < 1:
        raise TopologyError(f"Kautz graph needs degree d >= 2 and diameter k >= 1, got d={d}, k={k}")
    n = (d + 1) * d ** (k - 1)
    if n > MAX_RANKS:
        raise TopologyError(f"Kautz graph K({d},{k}) has {n} ranks, more than {MAX_RANKS}")
    words = kautz_words(d, k)
    index = _kautz_index(d, k)
    links = [Link(i, index[w[1:] + (z,)], bandwidth, latency)
             for i, w in enumerate(words) for z in range(d + 1) if z != w[-1]]
    options, extra = _suffix(bandwidth, latency)
    name = f"kautz:{d},{k}" + (":" + ",".join(options) if options else "")
    return Topology(name, n, tuple(links), params=(("degree", str(d)), ("diameter", str(k)), *extra),
                    cycle=_kautz_cycle(d, k))


def _kautz_cycle(d: int, k: int) -> tuple[int, ...]:
    """A Hamiltonian cycle over the ranks.  K(d,k) is the line digraph of K(d,k-1) (of the
    complete digraph on the d+1 letters for k = 2): an Eulerian circuit there passes every
    word of K(d,k) once, consecutive words linked."""
    import networkx as nx  # type: ignore[import-untyped]  # imported lazily: slow import

    if k == 1:
        return tuple(range(d + 1))
    g = nx.MultiDiGraph()
    g.add_edges_from((w, w[1:] + (z,)) for w in kautz_words(d, k - 1) for z in range(d + 1) if z != w[-1])
    index = _kautz_index(d, k)
    return tuple(index[u + (v[-1],)] for u, v in nx.eulerian_circuit(g, source=kautz_words(d, k - 1)[0]))


def kautz_params(topology: Topology) -> tuple[int, int] | None:
    """``(d, k)`` when ``topology`` is a Kautz graph made by :func:`kautz`, else None."""
    if not topology.name.startswith("kautz:"):
        return None
    d, k = topology.param("degree"), topology.param("diameter")
    if d is None or k is None:
        return None
    return int(d), int(k)


def _parse_kautz(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    m = re.fullmatch(r"([0-9]+),([0-9]+)", args)
    if not m:
        raise TopologyError(f"kautz arguments must be DEGREE,DIAMETER such as 2,2, got {args!r}")
    return kautz(int(m.group(1)), int(m.group(2)), o.bandwidth, o.latency)


# ---------------------------------------------------------------------- n-dimensional fully connected
def _fc_links(dims: Sequence[int], bandwidth: float, latency: float) -> list[Link]:
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    links: list[Link] = []
    for rank in range(math.prod(dims)):
        peers: list[int] = []
        for size, stride in zip(dims, strides):
            c = (rank // stride) % size
            peers.extend(rank + (x - c) * stride for x in range(size) if x != c)
        links.extend(Link(rank, v, bandwidth, latency) for v in sorted(peers))
    return links


def _check_fc_dims(dims: Sequence[int], family: str) -> tuple[int, ...]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or not dims:
        raise TopologyError(f"{family} needs a non-empty list of dimension sizes, got {dims!r}")
    out = tuple(dims)
    if any(not isinstance(x, int) or isinstance(x, bool) or x < 2 for x in out):
        raise TopologyError(f"{family} dimension sizes must be integers >= 2, got {dims!r}")
    if math.prod(out) > MAX_RANKS:
        raise TopologyError(f"{family} {'x'.join(map(str, out))} has {math.prod(out)} ranks, more than {MAX_RANKS}")
    return out


def _fc_cycle(sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """A Hamiltonian cycle of a 2-D fully connected network (None in other dimensions).

    Row r is walked from column a_r to column a_(r+1) (consecutive rows meet in a column,
    and a row is a clique), with a_0 = a_R = 0: a_r = r mod 2, and a_(R-1) = 2 for odd R.
    Odd R with 2 columns is walked by columns instead.  In more dimensions: the mesh snake
    with an even-sized axis slowest, which ends one step from its start (None if all are odd)."""
    if len(sizes) != 2:
        even = [a for a, m in enumerate(sizes) if m % 2 == 0]
        if not even:
            return None
        axes = [even[0]] + [a for a in range(len(sizes)) if a != even[0]]
        strides = [math.prod(sizes[a + 1:]) for a in range(len(sizes))]
        cells = _snake([sizes[a] for a in axes])
        return tuple(sum(cell[i] * strides[a] for i, a in enumerate(axes)) for cell in cells)
    rows, cols = sizes
    if rows % 2 and cols == 2:
        # down column 0, up column 1
        return tuple([r * cols for r in range(rows)] + [r * cols + 1 for r in reversed(range(rows))])
    ends = [r % 2 for r in range(rows)] + [0]
    if rows % 2:
        ends[rows - 1] = 2
    order: list[int] = []
    for r in range(rows):
        first, last = ends[r], ends[r + 1]
        middle = [c for c in range(cols) if c not in (first, last)]
        order.extend(r * cols + c for c in [first, *middle, last])
    return tuple(order)


def dfc(dims: Sequence[int], bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """The n-dimensional fully connected network ``dims = [Mn, .., M2, M1]`` (row-major ranks)."""
    sizes = _check_fc_dims(dims, "dfc")
    text = "x".join(map(str, sizes))
    options, extra = _suffix(bandwidth, latency)
    name = f"dfc:{text}" + (":" + ",".join(options) if options else "")
    return Topology(name, math.prod(sizes), tuple(_fc_links(sizes, bandwidth, latency)),
                    params=(("dims", text), ("routing", "network"), *extra), cycle=_fc_cycle(sizes))


def dragonfly(a: int, g: int, bandwidth: float = 1.0, latency: float = 0.0) -> Topology:
    """G groups of A routers, groups are cliques, router i linked to router i of every other group."""
    if any(not isinstance(x, int) or isinstance(x, bool) or x < 2 for x in (a, g)):
        raise TopologyError(f"dragonfly needs A >= 2 routers per group and G >= 2 groups, got A={a!r}, G={g!r}")
    sizes = _check_fc_dims([g, a], "dragonfly")
    options, extra = _suffix(bandwidth, latency)
    name = f"dragonfly:{a},{g}" + (":" + ",".join(options) if options else "")
    return Topology(name, a * g, tuple(_fc_links(sizes, bandwidth, latency)),
                    params=(("dims", f"{g}x{a}"), ("routing", "network"), ("groups", str(g)),
                            ("routers", str(a)), *extra), cycle=_fc_cycle(sizes))


def dfc_dims(topology: Topology) -> tuple[int, ...] | None:
    """The sizes ``(Mn, .., M1)`` of a ``dfc`` or ``dragonfly`` topology, else None."""
    family = topology.name.split(":", 1)[0]
    if family not in ("dfc", "dragonfly"):
        return None
    dims = topology.param("dims")
    return None if dims is None else tuple(int(x) for x in dims.split("x"))


def _parse_dfc(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return dfc(parse_dims(args, "dfc dimensions"), o.bandwidth, o.latency)


def _parse_dragonfly(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    parts = args.split(",")
    if len(parts) not in (2, 3):
        raise TopologyError(f"dragonfly arguments must be A,G (routers per group, groups) such as 4,5, got {args!r}")
    a, g = parse_int(parts[0], "routers per group"), parse_int(parts[1], "groups")
    if len(parts) == 3 and parse_int(parts[2], "global links per router") != g - 1:
        raise TopologyError(f"dragonfly:{args}: only h = G-1 global links per router (router i linked to router i "
                            f"of every other group, a 2dfc GxA) is modelled, got h={parts[2]}")
    return dragonfly(a, g, o.bandwidth, o.latency)


register_family("kautz", _parse_kautz, "directed Kautz graph K(D,K), lexicographic word ranks", "kautz:2,2")
register_family("dfc", _parse_dfc, "n-dimensional fully connected (2dfc = 2D HyperX), row-major, routed",
                "dfc:4x4")
register_family("dragonfly", _parse_dragonfly,
                "A routers x G groups, cliques + router i to router i of every group (= dfc GxA), routed",
                "dragonfly:3,4")
