"""Direct-connect topology families of Zhao et al., "Efficient Direct-Connect Topologies
for Collective Communications" (arXiv 2202.03356), Table 9, Table 7 and App. E.

Every family is a digraph over ranks ``0..N-1`` with no switch nodes.  Parallel arcs
become one link with ``multiplicity``; self-loops (de Bruijn, generalized Kautz) cannot
be links, so the ports they waste are recorded in the ``ports`` parameter (BFB's
``beta`` counts them, as the paper does: B(4,2) gives 1.25).  A ``group`` parameter
names an abelian group ``Z_a x Z_b ...`` (mixed radix, last fastest) whose
translations are automorphisms, which lets BFB solve one node per step.

Spec grammar (see ``docs/direct-connect.md``):

* ``circulant:N:a,b,...`` bidirectional circulant, ``i <-> i +- a_j``; ``circulant:N``
  picks Thm 22's minimum-diameter generators ``{a, a+1}``, ``a = ceil((sqrt(2N-1)-1)/2)``;
* ``dcirculant:N:a,b,...`` directed circulant ``i -> i + a_j``;
* ``unitorus:AxBx..`` unidirectional torus (product of directed rings);
* ``bipartite:D`` complete bipartite ``K_{D,D}`` (N = 2D, degree D);
* ``hamming:D,Q`` Hamming graph ``H(D, Q)`` (N = Q^D, degree D(Q-1));
* ``genkautz:D,N`` generalized Kautz (Imase-Itoh): ``u -> (-D u - a) mod N``, a = 1..D;
* ``debruijn:D,K`` de Bruijn ``B(D, K)``: ``u -> (D u + x) mod D^K``;
* ``twistedtorus:RxC[:S]`` 2D torus whose row wrap-around shifts the column by ``S``
  (default ``C/2``; TPU v4 style);
* ``drg:NAME`` the distance-regular graphs of Table 7 (``collc list topologies``);
* ``recipe:L3(C16(3,4))`` (or the bare recipe) and ``find:N:D[:ROW][,bi]``: expansion
  recipes and the topology finder's picks (``collc.frontends.topology_finder``).

>>> from collc.topology import parse_spec
>>> t = parse_spec("circulant:12")
>>> t.name, t.diameter()
('circulant:12:2,3', 2)
>>> parse_spec("debruijn:4,2").param("ports")
'4'
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from collc.errors import TopologyError
from collc.topology.model import Link, Topology
from collc.topology.spec import parse_int, register_family

__all__ = ["dcirculant", "uni_torus", "circulant", "min_diameter_generators", "bipartite", "hamming", "genkautz", "debruijn",
           "twisted_torus", "drg", "DRG_NAMES", "from_arcs"]

MAX_DC_RANKS = 1 << 16


def from_arcs(name: str, n: int, arcs: Iterable[tuple[int, int]], params: list[tuple[str, str]],
              ports: int | None = None) -> Topology:
    """A Topology from an arc list with repeats (parallel arcs) and self-loops (dropped,
    their ports recorded).  ``ports`` is recorded when given or when loops were dropped."""
    if n > MAX_DC_RANKS:
        raise TopologyError(f"{name} would have {n} ranks, more than {MAX_DC_RANKS}")
    count = Counter(arcs)
    loops = sum(c for (a, b), c in count.items() if a == b)
    links = tuple(Link(a, b, multiplicity=c) for (a, b), c in sorted(count.items()) if a != b)
    out: Counter[int] = Counter()
    for (a, _b), c in count.items():
        out[a] += c
    if ports is None and loops:
        ports = max(out.values())
    p = list(params)
    if ports is not None:
        p.append(("ports", str(ports)))
    if loops:
        p.append(("selfloops", str(loops)))
    return Topology(name, n, links, params=tuple(p))


# ---------------------------------------------------------------------- circulants
def min_diameter_generators(n: int) -> tuple[int, int]:
    """Thm 22 (Boesch-Wang): ``{a, a+1}`` with ``a = ceil((sqrt(2N-1) - 1)/2)`` has the
    minimum diameter ``a`` over all 2-generator circulants."""
    a = max(1, math.ceil((math.isqrt(2 * n - 1) - 1) / 2))
    while 2 * a * a + 2 * a + 1 < n:   # exact form of a >= (sqrt(2N-1)-1)/2
        a += 1
    while a > 1 and 2 * (a - 1) * (a - 1) + 2 * (a - 1) + 1 >= n:
        a -= 1
    return a, a + 1


def circulant(n: int, gens: tuple[int, ...] | None = None) -> Topology:
    if n < 3:
        raise TopologyError(f"a circulant needs at least 3 ranks, got {n}")
    if gens is None:
        gens = min_diameter_generators(n)
    if not gens or any(not 1 <= g < n for g in gens):
        raise TopologyError(f"circulant generators must lie in 1..{n - 1}, got {','.join(map(str, gens))}")
    if math.gcd(n, *gens) != 1:
        raise TopologyError(f"circulant:{n}:{','.join(map(str, gens))} is disconnected (gcd of N and the "
                            f"generators is not 1)")
    arcs = [(i, (i + s * g) % n) for i in range(n) for g in gens for s in (1, -1)]
    text = ",".join(map(str, gens))
    return from_arcs(f"circulant:{n}:{text}", n, arcs, [("n", str(n)), ("generators", text),
                                                        ("group", str(n))])


def dcirculant(n: int, gens: tuple[int, ...]) -> Topology:
    """Directed circulant ``i -> i + a_j (mod N)`` (Table 9), degree ``len(gens)``."""
    if n < 2 or not gens or any(not 1 <= g < n for g in gens):
        raise TopologyError(f"dcirculant:{n} generators must lie in 1..{n - 1}, got {gens}")
    if math.gcd(n, *gens) != 1:
        raise TopologyError(f"dcirculant:{n}:{','.join(map(str, gens))} is not strongly connected")
    text = ",".join(map(str, gens))
    return from_arcs(f"dcirculant:{n}:{text}", n, [(i, (i + g) % n) for i in range(n) for g in gens],
                     [("n", str(n)), ("generators", text), ("group", str(n))])


def uni_torus(dims: Iterable[int]) -> Topology:
    """Unidirectional torus: the Cartesian product of directed rings (degree = #dims)."""
    ds = list(dims)
    if not ds or any(x < 2 for x in ds):
        raise TopologyError(f"unitorus sides must be >= 2, got {ds}")
    n = math.prod(ds)
    if n > MAX_DC_RANKS:
        raise TopologyError(f"unitorus would have {n} ranks, more than {MAX_DC_RANKS}")
    arcs = []
    stride = 1
    strides = []
    for x in reversed(ds):
        strides.append(stride)
        stride *= x
    strides.reverse()
    for u in range(n):
        for size, st in zip(ds, strides):
            c = (u // st) % size
            arcs.append((u, u + (((c + 1) % size) - c) * st))
    text = "x".join(map(str, ds))
    return from_arcs(f"unitorus:{text}", n, arcs, [("dims", text), ("group", text)])


# ---------------------------------------------------------------------- bipartite, Hamming
def bipartite(d: int) -> Topology:
    if d < 1:
        raise TopologyError(f"bipartite degree must be >= 1, got {d}")
    arcs = [(a, b) for a in range(2 * d) for b in range(2 * d) if (a < d) != (b < d)]
    return from_arcs(f"bipartite:{d}", 2 * d, arcs, [("d", str(d)), ("group", f"2x{d}")])


def hamming(dims: int, q: int) -> Topology:
    if dims < 1 or q < 2:
        raise TopologyError(f"hamming needs D >= 1 and Q >= 2, got {dims},{q}")
    if q ** dims > MAX_DC_RANKS:
        raise TopologyError(f"hamming:{dims},{q} would have {q ** dims} ranks, more than {MAX_DC_RANKS}")
    n = q ** dims
    arcs = []
    for u in range(n):
        stride = 1
        for _ in range(dims):
            digit = (u // stride) % q
            for x in range(q):
                if x != digit:
                    arcs.append((u, u + (x - digit) * stride))
            stride *= q
    return from_arcs(f"hamming:{dims},{q}", n, arcs, [("dims", str(dims)), ("q", str(q)),
                                                       ("group", "x".join([str(q)] * dims))])


# ---------------------------------------------------------------------- Kautz-like digraphs
def genkautz(d: int, n: int) -> Topology:
    """Imase-Itoh generalized Kautz digraph Pi(d, N) (App. E.2)."""
    if d < 1 or n < 2:
        raise TopologyError(f"genkautz needs D >= 1 and N >= 2, got {d},{n}")
    arcs = [(u, (-d * u - a) % n) for u in range(n) for a in range(1, d + 1)]
    return from_arcs(f"genkautz:{d},{n}", n, arcs, [("d", str(d)), ("n", str(n))], ports=d)


def debruijn(d: int, k: int) -> Topology:
    if d < 2 or k < 1:
        raise TopologyError(f"debruijn needs D >= 2 and K >= 1, got {d},{k}")
    if d ** k > MAX_DC_RANKS:
        raise TopologyError(f"debruijn:{d},{k} would have {d ** k} ranks, more than {MAX_DC_RANKS}")
    n = d ** k
    arcs = [(u, (u * d + x) % n) for u in range(n) for x in range(d)]
    return from_arcs(f"debruijn:{d},{k}", n, arcs, [("d", str(d)), ("k", str(k))], ports=d)


def twisted_torus(rows: int, cols: int, twist: int | None = None) -> Topology:
    if rows < 2 or cols < 2:
        raise TopologyError(f"twistedtorus sides must be >= 2, got {rows}x{cols}")
    s = cols // 2 if twist is None else twist
    if not 0 <= s < cols:
        raise TopologyError(f"twist must be in 0..{cols - 1}, got {s}")
    arcs = set()
    for r in range(rows):
        for c in range(cols):
            u = r * cols + c
            right = r * cols + (c + 1) % cols
            down = (r + 1) * cols + c if r + 1 < rows else (c + s) % cols
            for v in (right, down):
                if v != u:
                    arcs.add((u, v))
                    arcs.add((v, u))
    return from_arcs(f"twistedtorus:{rows}x{cols}:{s}", rows * cols, sorted(arcs),
                     [("dims", f"{rows}x{cols}"), ("twist", str(s))])


# ---------------------------------------------------------------------- distance-regular graphs
def _projective_points(q: int, dim: int) -> list[tuple[int, ...]]:
    """Normalised nonzero vectors of GF(q)^dim (q prime): the points of PG(dim-1, q)."""
    pts = []
    for v in itertools.product(range(q), repeat=dim):
        nz = [x for x in v if x]
        if nz and nz[0] == 1:
            pts.append(v)
    return pts


def _incidence(points: Sequence[Hashable], blocks: Sequence[frozenset[Any]]) -> list[tuple[int, int]]:
    idx = {p: i for i, p in enumerate(points)}
    np_ = len(points)
    edges = []
    for j, blk in enumerate(blocks):
        for p in blk:
            edges.append((idx[p], np_ + j))
    return edges


def _pg23() -> list[tuple[int, int]]:
    pts = _projective_points(3, 3)
    lines = [frozenset(p for p in pts if sum(a * b for a, b in zip(p, ln)) % 3 == 0) for ln in pts]
    return _incidence(list(pts), lines)


def _gq33() -> list[tuple[int, int]]:
    """W(3): points of PG(3,3), lines the totally isotropic lines of a symplectic form."""
    pts = _projective_points(3, 4)

    def form(x: tuple[int, ...], y: tuple[int, ...]) -> int:
        return (x[0] * y[1] - x[1] * y[0] + x[2] * y[3] - x[3] * y[2]) % 3

    lines: set[frozenset[tuple[int, ...]]] = set()
    for a, b in itertools.combinations(pts, 2):
        if form(a, b) == 0:
            span = set()
            for s, t in itertools.product(range(3), repeat=2):
                v = tuple((s * x + t * y) % 3 for x, y in zip(a, b))
                nz = [x for x in v if x]
                if nz:
                    inv = 1 if nz[0] == 1 else 2
                    span.add(tuple((inv * x) % 3 for x in v))
            lines.add(frozenset(span))
    return _incidence(list(pts), sorted(lines, key=sorted))


def _ag24_minus_class() -> list[tuple[int, int]]:
    """Incidence graph of AG(2,4) with one parallel class of lines removed."""
    # GF(4) = {0, 1, w, w^2} as 0..3 with addition XOR and a log table for products
    log = {1: 0, 2: 1, 3: 2}
    exp = [1, 2, 3]

    def mul(a: int, b: int) -> int:
        return 0 if a == 0 or b == 0 else exp[(log[a] + log[b]) % 3]

    pts = [(x, y) for x in range(4) for y in range(4)]
    lines = []
    for m in range(4):       # y = m x + c (the vertical class x = c is the one removed)
        for c in range(4):
            lines.append(frozenset((x, mul(m, x) ^ c) for x in range(4)))
    return _incidence(list(pts), lines)


def _nx_edges(build: Callable[[], object]) -> list[tuple[int, int]]:
    import networkx as nx  # type: ignore[import-untyped]

    g = build()
    assert isinstance(g, nx.Graph)
    g = nx.convert_node_labels_to_integers(g, ordering="sorted") if _sortable(g) else \
        nx.convert_node_labels_to_integers(g)
    return [(int(a), int(b)) for a, b in g.edges()]


def _sortable(g: object) -> bool:
    try:
        sorted(g)  # type: ignore[call-overload]
        return True
    except TypeError:
        return False


def _drg_edges(name: str) -> list[tuple[int, int]]:
    import networkx as nx

    def tutte8() -> object:   # the Tutte-Coxeter graph (Tutte's 8-cage) in LCF notation
        return nx.LCF_graph(30, [-13, -9, 7, -7, 9, 13], 5)

    builders: dict[str, Callable[[], object]] = {
        "octahedron": nx.octahedral_graph,
        "paley9": lambda: nx.cartesian_product(nx.complete_graph(3), nx.complete_graph(3)),  # = H(2,3)
        "k55-matching": lambda: nx.Graph([(a, 5 + b) for a in range(5) for b in range(5) if a != b]),
        "heawood-distance3": lambda: nx.Graph([(a, b) for a, row in nx.all_pairs_shortest_path_length(
            nx.heawood_graph()) for b, dist in row.items() if dist == 3 and a < b]),
        "petersen-line": lambda: nx.line_graph(nx.petersen_graph()),
        "q4": lambda: nx.hypercube_graph(4),
        "heawood-line": lambda: nx.line_graph(nx.heawood_graph()),
        "pg23-incidence": lambda: nx.Graph(_pg23()),
        "ag24-incidence": lambda: nx.Graph(_ag24_minus_class()),
        "odd4": lambda: nx.kneser_graph(7, 3),
        "tutte8-line": lambda: nx.line_graph(tutte8()),
        "doubled-odd4": lambda: nx.Graph([((tuple(sorted(a)), 0), (tuple(sorted(b)), 1))
                                          for a in itertools.combinations(range(7), 3)
                                          for b in itertools.combinations(range(7), 4) if set(a) <= set(b)]
                                         + [((tuple(sorted(b)), 1), (tuple(sorted(a)), 0))
                                            for a in itertools.combinations(range(7), 3)
                                            for b in itertools.combinations(range(7), 4) if set(a) <= set(b)]),
        "gq33-incidence": lambda: nx.Graph(_gq33()),
    }
    if name not in builders:
        raise TopologyError(f"unknown distance-regular graph {name!r} (known: {', '.join(DRG_NAMES)})")
    return _nx_edges(builders[name])


#: Table 7's graphs available as ``drg:NAME`` (all degree 4).
DRG_NAMES = ("octahedron", "paley9", "k55-matching", "heawood-distance3", "petersen-line", "q4",
             "heawood-line", "pg23-incidence", "ag24-incidence", "odd4", "tutte8-line", "doubled-odd4",
             "gq33-incidence")


def drg(name: str) -> Topology:
    edges = _drg_edges(name)
    n = 1 + max(max(e) for e in edges)
    arcs = [(a, b) for a, b in edges] + [(b, a) for a, b in edges]
    return from_arcs(f"drg:{name}", n, arcs, [("graph", name)])


# ---------------------------------------------------------------------- spec parsers
def _pair(args: str, what: str) -> tuple[int, int]:
    m = re.fullmatch(r"([0-9]+),([0-9]+)", args)
    if not m:
        raise TopologyError(f"{what} arguments must be two integers 'A,B', got {args!r}")
    return int(m.group(1)), int(m.group(2))


def _parse_circulant(args: str, options: str | None) -> Topology:
    n = parse_int(args, "circulant size")
    if options is None:
        return circulant(n)
    if not re.fullmatch(r"[0-9]+(,[0-9]+)*", options):
        raise TopologyError(f"circulant generators must be integers separated by commas, got {options!r}")
    return circulant(n, tuple(int(x) for x in options.split(",")))


def _no_options(family: str, options: str | None) -> None:
    if options is not None:
        raise TopologyError(f"{family} takes no options, got {options!r}")


def _parse_dcirculant(args: str, options: str | None) -> Topology:
    n = parse_int(args, "dcirculant size")
    if options is None or not re.fullmatch(r"[0-9]+(,[0-9]+)*", options):
        raise TopologyError(f"dcirculant needs generators such as dcirculant:16:1,7, got {options!r}")
    return dcirculant(n, tuple(int(x) for x in options.split(",")))


def _parse_unitorus(args: str, options: str | None) -> Topology:
    _no_options("unitorus", options)
    if not re.fullmatch(r"[0-9]+(x[0-9]+)*", args):
        raise TopologyError(f"unitorus dimensions must be sizes separated by 'x', got {args!r}")
    return uni_torus(int(x) for x in args.split("x"))


def _parse_bipartite(args: str, options: str | None) -> Topology:
    _no_options("bipartite", options)
    return bipartite(parse_int(args, "bipartite degree"))


def _parse_hamming(args: str, options: str | None) -> Topology:
    _no_options("hamming", options)
    return hamming(*_pair(args, "hamming"))


def _parse_genkautz(args: str, options: str | None) -> Topology:
    _no_options("genkautz", options)
    return genkautz(*_pair(args, "genkautz"))


def _parse_debruijn(args: str, options: str | None) -> Topology:
    _no_options("debruijn", options)
    return debruijn(*_pair(args, "debruijn"))


def _parse_twisted(args: str, options: str | None) -> Topology:
    m = re.fullmatch(r"([0-9]+)x([0-9]+)", args)
    if not m:
        raise TopologyError(f"twistedtorus dimensions must be ROWSxCOLUMNS such as 4x8, got {args!r}")
    twist = None if options is None else parse_int(options, "twist")
    return twisted_torus(int(m.group(1)), int(m.group(2)), twist)


def _parse_drg(args: str, options: str | None) -> Topology:
    _no_options("drg", options)
    return drg(args)


register_family("circulant", _parse_circulant,
                "bidirectional circulant i <-> i +- a_j; without generators Thm 22's minimum diameter {a, a+1}",
                "circulant:16:3,4")
register_family("dcirculant", _parse_dcirculant, "directed circulant i -> i + a_j (mod N)", "dcirculant:16:1,7")
register_family("unitorus", _parse_unitorus, "unidirectional torus (product of directed rings)", "unitorus:4x4x8x8")
register_family("bipartite", _parse_bipartite, "complete bipartite digraph K_{D,D} (2D ranks, degree D)",
                "bipartite:4")
register_family("hamming", _parse_hamming, "Hamming graph H(D,Q): Q^D ranks, degree D(Q-1)", "hamming:2,3")
register_family("genkautz", _parse_genkautz, "generalized Kautz (Imase-Itoh) digraph u -> -D u - a mod N",
                "genkautz:4,1024")
register_family("debruijn", _parse_debruijn, "de Bruijn digraph B(D,K): D^K ranks, self-loops waste ports",
                "debruijn:4,2")
register_family("twistedtorus", _parse_twisted, "2D torus whose row wrap-around shifts columns by S",
                "twistedtorus:4x8:4")
register_family("drg", _parse_drg, "a degree-4 distance-regular graph of the paper's Table 7: "
                + ", ".join(DRG_NAMES), "drg:petersen-line")
