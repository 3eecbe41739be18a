"""The topology finder: the Pareto frontier of (T_L, beta) topologies for N nodes of degree d.

Paper: Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications" (arXiv 2202.03356), section 5.4, App. F, G; ``docs/direct-connect.md``.

Bases (Table 9, Table 7) are instantiated for every size dividing N and every
degree up to d; expansions are applied bottom-up with their closed-form costs
(Table 3): line graph ``(dN, d, T+1, beta + 1/N)``, degree ``G*m``
``(mN, md, T+1, beta + (m-1)/(mN))``, power ``G^m`` ``(N^m, md, mT, beta N/(N-1)
(1 - N^-m))``, product ``G□H`` of BW-optimal graphs ``(N N', d + d', T + T',
optimal)`` and, for bidirectional targets, uni-to-bi ``Bi(G)`` of reverse-symmetric
graphs (App. F).  Generalized Kautz at the target size fills gaps (its cost from
the BFB LP).  A Pareto filter per (size, degree, kind) keeps the search small; the
frontier does not depend on (alpha, B, M).  Allreduce time of a pick is
``2 (T_L alpha + beta M / B)``.

Recipes name each candidate and are topology specs (``L3(C16(3,4))``; grammar in
:func:`parse_recipe`).  ``find:N:D[:K][,bi]`` is the K-th frontier row (1 = lowest
T_L; without K the best pick at alpha = 10 us, B = 100 Gbps, M = 1 MiB).

>>> f = find(12, 4, bidirectional=True)
>>> [(c.recipe, c.steps, c.beta) for c in f]
[('C12(2,3)', 2, Fraction(11, 12))]
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from collc.errors import TopologyError
from collc.inputs import MAX_MODEL_VALUE
from collc.topology import Topology, generators
from collc.topology import direct_connect as dc
from collc.topology.spec import register_family

__all__ = ["Candidate", "frontier_lines", "find", "parse_find", "parse_recipe", "recipe_topology", "allreduce_time_us", "best", "cache_dir",
           "DEFAULT_ALPHA_US", "DEFAULT_GBPS", "DEFAULT_BYTES", "MAX_NODES", "MAX_DEGREE"]

DEFAULT_ALPHA_US = 10.0
DEFAULT_GBPS = 100.0
DEFAULT_BYTES = 1 << 20
CACHE_VERSION = 1
#: Sizes up to which the finder instantiates small generative bases (directed circulants, GK).
SMALL_BASE = 64
#: Largest --nodes and --degree.  Each degree up to D adds generalized-Kautz bases whose cost is a BFB
#: linear program: the first search (cached after) at degree 8 takes up to 35 s (4096 nodes), at degree
#: 16 four minutes (2520 nodes); the paper's machines have 4 to 8 ports per node.
MAX_NODES = 4096
MAX_DEGREE = 8


@dataclass(frozen=True)
class Candidate:
    """One topology: ``steps`` = T_L / alpha of an allgather, ``beta`` = T_B / (M / B)."""

    recipe: str
    n: int
    d: int
    steps: int
    beta: Fraction
    kind: str            # "bi" (bidirectional), "rs" (reverse-symmetric digraph), "uni"
    loops: bool = False  # self-loops (no line graph or degree expansion)

    @property
    def bw_optimal(self) -> bool:
        return self.beta == Fraction(self.n - 1, self.n)

    def to_json(self) -> dict[str, object]:
        return {"recipe": self.recipe, "n": self.n, "d": self.d, "steps": self.steps,
                "beta": f"{self.beta.numerator}/{self.beta.denominator}", "kind": self.kind, "loops": self.loops}

    @staticmethod
    def from_json(o: dict[str, object]) -> Candidate:
        return Candidate(str(o["recipe"]), int(str(o["n"])), int(str(o["d"])), int(str(o["steps"])),
                         Fraction(str(o["beta"])), str(o["kind"]), bool(o["loops"]))


def _short(value: int) -> str:
    """An integer for a message, cut short: a 4000-digit one would fill it."""
    text = str(value)    # argparse's int() already refuses more than 4300 digits
    return text if len(text) <= 20 else f"{text[:12]}... ({len(text.lstrip('-'))} digits)"


def allreduce_time_us(c: Candidate, alpha_us: float, gbps: float, size_bytes: float) -> float:
    """``2 (T_L + beta M / B)`` (RS + AG), alpha in us, B in Gbit/s, M in bytes."""
    return 2 * (c.steps * alpha_us + float(c.beta) * size_bytes * 8 / (gbps * 1e3))


def lower_bound_us(n: int, d: int, alpha_us: float, gbps: float, size_bytes: float) -> float:
    """Moore-optimal T_L and BW-optimal beta together (Def 11, Thm 6)."""
    steps, reach, power = 0, 1, 1
    while reach < n:
        steps += 1
        power *= d
        reach += power
    return 2 * (steps * alpha_us + (n - 1) / n * size_bytes * 8 / (gbps * 1e3))


def best(frontier: list[Candidate], alpha_us: float, gbps: float, sizes: list[float]) -> Candidate:
    return min(frontier, key=lambda c: (sum(allreduce_time_us(c, alpha_us, gbps, m) for m in sizes), c.steps))


# ---------------------------------------------------------------------- bases
def _divisors(n: int) -> list[int]:
    return [k for k in range(2, n + 1) if n % k == 0]


def _bfb(t: Topology) -> tuple[int, Fraction]:
    from collc.frontends.bfb import bfb_allgather

    r = bfb_allgather(t, with_pieces=False)
    return r.diameter, r.beta


def _best_directed_circulant(n: int) -> tuple[int, int, int, Fraction] | None:
    """The BW-optimal degree-2 directed circulant of least diameter (BFB-checked)."""
    found: list[tuple[int, int, int]] = []
    for a, b in itertools.combinations(range(1, n), 2):
        if math.gcd(n, a, b) == 1:
            found.append((dc.dcirculant(n, (a, b)).diameter(), a, b))
    for diam, a, b in sorted(found):
        steps, beta = _bfb(dc.dcirculant(n, (a, b)))
        if beta == Fraction(n - 1, n):
            return a, b, steps, beta
    return None


def _bases(n: int, k: int) -> list[Candidate]:
    opt = Fraction(n - 1, n)
    out: list[Candidate] = []
    if n == k + 1:
        out.append(Candidate(f"K{n}", n, k, 1, opt, "bi"))
    if n == 2 * k:
        out.append(Candidate(f"K{k},{k}", n, k, 2, opt, "bi"))
    for dims in range(2, 12):
        q = round(n ** (1 / dims))
        for qq in (q - 1, q, q + 1):
            if qq >= 2 and qq ** dims == n and dims * (qq - 1) == k:
                out.append(Candidate(f"H({dims},{qq})", n, k, dims, opt, "bi"))
    if k == 1:
        out.append(Candidate(f"UR{n}", n, 1, n - 1, opt, "rs"))
    if k == 2 and n >= 3:
        out.append(Candidate(f"BR{n}", n, 2, n // 2, opt, "bi"))
    if k == 4 and n >= 6 and 2 * (dc.min_diameter_generators(n)[1]) != n:   # simple graphs only
        a, b = dc.min_diameter_generators(n)
        # Thm 22 gives the diameter; Conjecture 1 (proved for d = 4) BW-optimality
        out.append(Candidate(f"C{n}({a},{b})", n, 4, dc.circulant(n, (a, b)).diameter(), opt, "bi"))
    if k == 2 and 4 <= n <= SMALL_BASE // 2:
        found = _best_directed_circulant(n)
        if found is not None:
            a, b, steps, beta = found
            out.append(Candidate(f"DC{n}({a},{b})", n, 2, steps, beta, "rs"))
    if k >= 2 and n > k + 1 and n <= SMALL_BASE:
        steps, beta = _bfb(dc.genkautz(k, n))
        out.append(Candidate(f"GK({k},{n})", n, k, steps, beta, "uni", bool(dc.genkautz(k, n).param("selfloops"))))
    if k == 4:
        for name, (size, diam) in _DRG.items():
            if size == n:
                out.append(Candidate(f"DRG({name})", n, 4, diam, opt, "bi"))
    return out


_DRG = {"octahedron": (6, 2), "paley9": (9, 2), "k55-matching": (10, 3), "heawood-distance3": (14, 3),
        "petersen-line": (15, 3), "q4": (16, 4), "heawood-line": (21, 3), "pg23-incidence": (26, 3),
        "ag24-incidence": (32, 4), "odd4": (35, 3), "tutte8-line": (45, 4), "doubled-odd4": (70, 7),
        "gq33-incidence": (80, 4)}


# ---------------------------------------------------------------------- search
def _pareto(cands: list[Candidate]) -> list[Candidate]:
    # ties go to the simplest recipe: fewest expansion operators, then the shortest text
    cands = sorted(cands, key=lambda c: (c.steps, c.beta, _ops(c.recipe), len(c.recipe), c.recipe))
    out: list[Candidate] = []
    for c in cands:
        if out and c.beta >= out[-1].beta:
            continue        # dominated (no fewer steps and no better beta)
        out.append(c)
    return out


def _ops(recipe: str) -> int:
    return sum(recipe.count(x) for x in ("L", "*", "^", "□", "Bi("))


def _wrap(recipe: str) -> str:
    return recipe if re.fullmatch(r"[A-Za-z0-9,()]+", recipe) else f"({recipe})"


def _line(recipe: str) -> str:
    m = re.fullmatch(r"L([0-9]*)\((.*)\)", recipe)
    if m and _balanced(m.group(2)):
        return f"L{int(m.group(1) or 1) + 1}({m.group(2)})"
    return f"L({recipe})"


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _search(target: int, dmax: int, bidirectional: bool) -> list[Candidate]:
    sizes = [1] + _divisors(target)
    table: dict[tuple[int, int, str], list[Candidate]] = {}

    def add(c: Candidate) -> None:
        if target % c.n == 0 and c.d <= dmax:
            table.setdefault((c.n, c.d, c.kind), []).append(c)

    for n in sizes[1:]:
        for k in range(1, dmax + 1):
            for c in _bases(n, k):
                add(c)
    if not bidirectional and dmax >= 2 and target > SMALL_BASE:
        steps, beta = _bfb(dc.genkautz(dmax, target))
        add(Candidate(f"GK({dmax},{target})", target, dmax, steps, beta, "uni",
                      bool(dc.genkautz(dmax, target).param("selfloops"))))
    for n in sizes[1:]:
        for k in range(1, dmax + 1):
            for kind in ("bi", "rs", "uni"):
                key = (n, k, kind)
                if key not in table:
                    continue
                table[key] = front = _pareto(table[key])
                for c in front:
                    r = _wrap(c.recipe)
                    if not c.loops and k >= 2 and (not bidirectional or 2 * k <= dmax):
                        add(Candidate(_line(c.recipe), n * k, k, c.steps + 1, c.beta + Fraction(1, n),
                                      "uni" if kind == "uni" else "rs"))
                    for m in range(2, dmax // k + 1):
                        if not c.loops:
                            add(Candidate(f"{r}*{m}", n * m, k * m, c.steps + 1,
                                          c.beta + Fraction(m - 1, m * n), kind))
                        if n ** m <= target:
                            add(Candidate(f"{r}^{m}", n ** m, k * m, m * c.steps,
                                          c.beta * n / (n - 1) * (1 - Fraction(1, n ** m)), kind, c.loops))
                    if kind == "rs" and 2 * k <= dmax:
                        add(Candidate(f"Bi({c.recipe})", n, 2 * k, c.steps, c.beta, "bi"))
                    if c.bw_optimal:
                        # products with BW-optimal partners of smaller or equal (size, degree, recipe)
                        for (n2, k2, kind2), front2 in list(table.items()):
                            if (n2, k2) > (n, k) or k + k2 > dmax or target % (n * n2) or n * n2 > target:
                                continue
                            for c2 in front2:
                                if c2.bw_optimal and ((n2, k2) != (n, k) or c2.recipe <= c.recipe):
                                    both = "bi" if kind == kind2 == "bi" else ("rs" if "uni" not in (kind, kind2)
                                                                               else "uni")
                                    nn = n * n2
                                    add(Candidate(f"{r}□{_wrap(c2.recipe)}", nn, k + k2, c.steps + c2.steps,
                                                  Fraction(nn - 1, nn), both))
    final = [c for (n, k, kind), cs in table.items() if n == target and k == dmax
             and (kind == "bi" or not bidirectional) for c in cs]
    return _pareto(final)


def cache_dir() -> Path:
    """``$COLLC_CACHE_DIR``, else ``$XDG_CACHE_HOME/collc``, else ``~/.cache/collc``."""
    env = os.environ.get("COLLC_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "collc" if xdg else Path.home() / ".cache" / "collc"


def find(n: int, d: int, bidirectional: bool = False, use_cache: bool = True) -> list[Candidate]:
    """The Pareto frontier for ``n`` nodes of degree ``d``, lowest T_L first; cached on disk."""
    if n < 2 or d < 1:
        raise TopologyError(f"the finder needs --nodes >= 2 and --degree >= 1, got {_short(n)} and {_short(d)}")
    if n > MAX_NODES:
        raise TopologyError(f"the finder searches up to {MAX_NODES} nodes, got {_short(n)}")
    if d > n - 1:   # every base and expansion keeps d <= n - 1 (no self-loops or parallel links count)
        raise TopologyError(f"--degree {_short(d)} is more than --nodes - 1 = {n - 1}: no topology of {n} nodes "
                            f"has that many neighbours per node")
    if d > MAX_DEGREE:
        raise TopologyError(f"the finder searches degrees up to {MAX_DEGREE}, got {_short(d)} (the search grows "
                            f"with the degree: degree 16 takes minutes)")
    if bidirectional and d % 2:
        raise TopologyError(f"a bidirectional topology needs an even degree, got {d}")
    path = cache_dir() / "finder" / f"v{CACHE_VERSION}-{n}-{d}-{'bi' if bidirectional else 'uni'}.json"
    if use_cache and path.is_file():
        try:
            data = json.loads(path.read_text())
            return [Candidate.from_json(o) for o in data]
        except (OSError, ValueError, KeyError, TypeError):
            pass   # a damaged cache entry is recomputed
    front = _search(n, d, bidirectional)
    if not front:
        raise TopologyError(f"the finder knows no topology with {n} nodes of degree {d}"
                            f"{' (bidirectional)' if bidirectional else ''}")
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps([c.to_json() for c in front], indent=1))
            tmp.replace(path)
        except OSError:
            pass   # the cache is an optimisation only
    return front


def frontier_lines(n: int, d: int, bidirectional: bool, alpha_us: float, gbps: float, sizes: list[float],
                   use_cache: bool = True) -> list[str]:
    """The table ``collc topology find`` prints; ``*`` marks the best pick for the sizes."""
    if not (0 <= alpha_us <= MAX_MODEL_VALUE and 0 < gbps <= MAX_MODEL_VALUE) or not sizes \
            or any(not 0 < m < math.inf for m in sizes):   # NaN fails every comparison
        raise TopologyError(f"--alpha must be in 0..{MAX_MODEL_VALUE:g} us, --bw in (0, {MAX_MODEL_VALUE:g}] "
                            f"Gbit/s and every --size > 0, got --alpha {alpha_us:g} --bw {gbps:g}")
    front = find(n, d, bidirectional, use_cache)
    pick = best(front, alpha_us, gbps, sizes)
    what = "allreduce (us)" if len(sizes) == 1 else f"sum of {len(sizes)} allreduces (us)"
    lines = [f"Pareto frontier: {n} nodes, degree {d}{', bidirectional' if bidirectional else ''} "
             f"(alpha {alpha_us:g} us, B {gbps:g} Gbit/s)",
             f"  {'row':>3s}  {'recipe':28s} {'T_L':>5s} {'beta':>10s}  {'BW-opt':6s} {what:>18s}  spec"]
    for i, c in enumerate(front, start=1):
        t = sum(allreduce_time_us(c, alpha_us, gbps, m) for m in sizes)
        mark = "*" if c is pick else " "
        spec = f"find:{n}:{d}:{i}{',bi' if bidirectional else ''}"
        lines.append(f"{mark} {i:>3d}  {c.recipe:28s} {c.steps:>4d}a {float(c.beta):>10.5f}  "
                     f"{'yes' if c.bw_optimal else 'no':6s} {t:>18.1f}  {spec}")
    bound = sum(lower_bound_us(n, d, alpha_us, gbps, m) for m in sizes)
    lines.append(f"  lower bound (Moore-optimal T_L, BW-optimal beta): {bound:.1f} us; * = best pick")
    return lines


# ---------------------------------------------------------------------- recipes as topologies
_TOKEN = re.compile(r"\s*(K[0-9]+,[0-9]+|K[0-9]+|H\([0-9]+,[0-9]+\)|UR[0-9]+|BR[0-9]+|C[0-9]+\([0-9]+(?:,[0-9]+)*\)|"
                    r"DC[0-9]+\([0-9]+(?:,[0-9]+)*\)|GK\([0-9]+,[0-9]+\)|B\([0-9]+,[0-9]+\)|DRG\([a-z0-9-]+\)|"
                    r"L[0-9]*\(|Bi\(|T\([0-9x]+\)|UT\([0-9x]+\)|\(|\)|\*[0-9]+|\^[0-9]+|□|&)")


def parse_recipe(text: str) -> Topology:
    """Build a recipe: bases ``K5``, ``K4,4`` (bipartite), ``H(2,3)``, ``UR8`` / ``BR8`` (uni /
    bidirectional ring), ``C16(3,4)``, ``DC16(1,7)`` (directed circulant), ``GK(4,1024)``,
    ``B(4,2)``, ``T(4x4)`` / ``UT(4x4x8x8)`` (bidirectional / unidirectional torus), ``DRG(name)``;
    operators ``L(X)`` / ``L3(X)`` line graph, ``X*m`` degree, ``X^m`` power, ``X□Y`` (or ``X&Y``)
    product, ``Bi(X)`` uni-to-bi."""
    # imported here: every command imports this module (it registers the spec families), and
    # expansions with bfb cost a tenth of a build's start-up
    from collc.frontends import expansions as ex

    pos = 0
    tokens: list[str] = []
    s = text.strip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m or not m.group(1):
            raise TopologyError(f"bad recipe {text!r} at {s[pos:pos + 12]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    at = [0]

    def peek() -> str | None:
        return tokens[at[0]] if at[0] < len(tokens) else None

    def take() -> str:
        tok = peek()
        if tok is None:
            raise TopologyError(f"bad recipe {text!r}: it ends too early")
        at[0] += 1
        return tok

    def expect_close() -> None:
        if take() != ")":
            raise TopologyError(f"bad recipe {text!r}: missing ')'")

    def product() -> Topology:
        t = postfix()
        while peek() in ("□", "&"):
            take()
            t = ex.cartesian_product(t, postfix())
        return t

    def postfix() -> Topology:
        t = atom()
        while (tok := peek()) is not None and tok[0] in "*^":
            take()
            m = int(tok[1:])
            if tok[0] == "*":
                t = ex.degree_expansion(t, m)
            else:
                if m < 2:
                    raise TopologyError("a Cartesian power needs m >= 2")
                base = t
                for _ in range(m - 1):
                    t = ex.cartesian_product(t, base)
        return t

    def atom() -> Topology:
        tok = take()
        if tok == "(":
            t = product()
            expect_close()
            return t
        if tok.startswith("L") and tok.endswith("("):
            times = int(tok[1:-1] or 1)
            t = product()
            expect_close()
            for _ in range(times):
                t = ex.line_graph(t)
            return t
        if tok == "Bi(":
            t = product()
            expect_close()
            return ex.uni_to_bi(t)
        return _base(tok)

    t = product()
    if peek() is not None:
        raise TopologyError(f"bad recipe {text!r}: unexpected {peek()!r}")
    return Topology(s, t.nranks, t.links, params=(("recipe", s),) + tuple(p for p in t.params if p[0] == "ports"))


def _nums(tok: str) -> list[int]:
    return [int(x) for x in re.findall(r"[0-9]+", tok)]


def _base(tok: str) -> Topology:
    if re.fullmatch(r"K[0-9]+,[0-9]+", tok):
        a, b = _nums(tok)
        if a != b:
            raise TopologyError(f"only balanced complete bipartite graphs K_d,d are supported, got {tok}")
        return dc.bipartite(a)
    if tok.startswith("DRG("):
        return dc.drg(tok[4:-1])
    kinds = {"K": lambda v: generators.complete(v[0]), "H(": lambda v: dc.hamming(v[0], v[1]),
             "UR": lambda v: generators.ring(v[0], False), "BR": lambda v: generators.ring(v[0]),
             "DC": lambda v: dc.dcirculant(v[0], tuple(v[1:])), "C": lambda v: dc.circulant(v[0], tuple(v[1:])),
             "GK(": lambda v: dc.genkautz(v[0], v[1]), "B(": lambda v: dc.debruijn(v[0], v[1]),
             "T(": lambda v: generators.torus(v), "UT(": lambda v: dc.uni_torus(v)}
    for prefix in ("UT(", "T(", "DC", "GK(", "H(", "B(", "UR", "BR", "C", "K"):
        if tok.startswith(prefix):
            return kinds[prefix](_nums(tok))
    raise TopologyError(f"unknown recipe base {tok!r}")  # pragma: no cover - the tokenizer filters


def recipe_topology(text: str) -> Topology:
    return parse_recipe(text)


def parse_find(args: str, options: str | None) -> Topology:
    """``find:N:D[:ROW][,bi]`` as a topology (named by the spec, recipe in params)."""
    m = re.fullmatch(r"([0-9]+)", args)
    if not m or options is None:
        raise TopologyError(f"find needs NODES:DEGREE[:ROW][,bi], e.g. find:1024:4:2, got find:{args}")
    parts = options.split(":")
    deg_text = parts[0]
    rest = parts[1] if len(parts) > 1 else ""
    if len(parts) > 2 or not re.fullmatch(r"[0-9]+", deg_text):
        raise TopologyError(f"find needs NODES:DEGREE[:ROW][,bi], got find:{args}:{options}")
    flags = rest.split(",") if rest else []
    bi = "bi" in flags
    rows = [f for f in flags if f != "bi"]
    if len(rows) > 1 or (rows and not re.fullmatch(r"[0-9]+", rows[0])):
        raise TopologyError(f"find: bad row {rest!r} (a 1-based frontier row, optionally ',bi')")
    front = find(int(args), int(deg_text), bi)
    if rows:
        k = int(rows[0])
        if not 1 <= k <= len(front):
            raise TopologyError(f"find:{args}:{deg_text} has {len(front)} frontier rows, got row {k}")
        pick = front[k - 1]
    else:
        pick = best(front, DEFAULT_ALPHA_US, DEFAULT_GBPS, [DEFAULT_BYTES])
    t = parse_recipe(pick.recipe)
    return Topology(f"find:{args}:{options}", t.nranks, t.links, params=t.params)


# ---------------------------------------------------------------------- spec families
# The finder's picks and recipes are topology specs (``find:1024:4:2``, ``L3(C16(3,4))``).  They
# are registered here, where the finder lives, not in collc.topology: building them costs
# candidate graphs with BFB, a frontend.  collc.frontends imports this module, so the driver, the
# CLI and every frontend have them.
def _parse_find(args: str, options: str | None) -> Topology:
    return parse_find(args, options)


def _parse_recipe(args: str, options: str | None) -> Topology:
    text = args if options is None else f"{args}:{options}"
    t = parse_recipe(text)
    return Topology(f"recipe:{text}", t.nranks, t.links, params=t.params)


register_family("find", _parse_find, "the topology finder's pick for NODES:DEGREE (1-based frontier ROW, "
                "',bi' for bidirectional; no ROW: best at 10 us, 100 Gbps, 1 MiB)", "find:12:4:1,bi")
register_family("recipe", _parse_recipe, "an expansion recipe such as L3(C16(3,4)) (also accepted bare)",
                "recipe:L(K5)")
