"""ForestColl allgather, reduce-scatter and allreduce: throughput-optimal tree packings.

Zhao et al., "ForestColl: Efficient Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787 v1).  Collectives: allgather (out-trees),
reducescatter (the same trees reversed into in-trees; on the transpose where links
are one-way) and allreduce (reduce-scatter then allgather on the same forest).
Topology: any Eulerian, strongly connected fabric, switch nodes allowed (``a100:NxM``,
``mi250:N``, ``mi250:8+8``, ``switch:8``, tori, ...).  Cost model (section 2,
eq. (1)): allgather time ``M / (N x*)`` with ``1/x* = max_S |S & V_c| / B+(S)`` over
cuts ``S`` missing some rank; algbw ``N x*`` (354.13 GB/s on ``mi250:2``).
Family page: docs/forestcoll.md (what is computed, the lowering, the check values and their tests).

Pipeline (section 4): the optimality search (:func:`flow.optimal`, Theorem 1,
Proposition 3) gives x*, k trees per root and the capacity scale U; the fixed-k
search (:func:`flow.fixed_k`, Algorithm 3) gives U_k for a chosen k; switches are
removed by edge splitting (:mod:`.splitting`, Theorem 8); the trees are packed with
multiplicities (:mod:`.packing`, Bérczi-Frank with Theorem 12's max-flow), shortened
through spare capacity (:func:`.packing.shorten`, ours) and mapped back to physical paths.  A tree of multiplicity m carries m chunks of its root's
shard (a rank's input is k chunks); an edge ``p -> c`` of it is one transfer of those
m chunks at step ``depth(p)``.  Trees that share a connection share its threadblocks
(the lowering puts a connection's transfers in one tb in step order).

Parameter ``k``: ``auto`` (default) takes, among k = 1..``maxk`` (the optimal k when
it is in that range, else the fixed-k search), the best model algbw, preferring a k
with ``N k <= 32`` (the channels): trees that share a lane share its threadblocks and
pipeline worse in the event model (on mi250:2 at 1 GiB k=1 models 320.00 GB/s and
simulates 305.4 with a lane per tree, 241.1 on 16 shared lanes; k=3, 96 trees, models
342.86 and simulates 160.8).  When the optimal k is not
taken, ``--report`` prints the throughput given up (the paper's practice, section 4.5).
``opt`` forces the optimal k; an integer forces that k.  ``allreduce=lp`` builds allreduce
from appendix E's LP instead of reduce-scatter + allgather (:mod:`.lp`: unequal roots, each
link split between in- and out-trees; equal to RS+AG in the model on a100:2x8 and mi250:2,
above it on mi250:8+8, docs/forestcoll.md; its two forests get lanes together from
:func:`lp_lanes`).  ``lanes`` and ``pieces`` (0 = auto) set
the channels the trees spread over and the pipelining pieces of each tree chunk.  When
the caller passes the ``--chunks`` and ``--instances`` the schedule will be lowered with
(the driver does, through the registry's ``@chunks`` / ``@instances`` options), the
automatic choice gives every tree a lane of its own and :func:`best_pieces` pieces
(``P = sqrt(2 G / alpha)``, the minimum of a fill/drain against per-message estimate) as
far as the file that will be emitted allows
(:func:`lane_per_tree`): mi250:2 at k=1, 32 lanes and 39 pieces, simulates 305.4 of
320.00 GB/s at 1 GiB.  Where a lane per tree does not fit, :func:`shared_lanes` puts the
fewest trees per tb that the runtime's tbs allow, and :func:`pick_pieces` the pieces of the
best :func:`predicted` fraction; for allgather :func:`tree_pieces` then gives each tree the
most pieces its own tbs hold (the trees alone in theirs keep 48), and where 3 or more trees
share a tb on 17 lanes and up a hop takes two steps of the tbs' order (a100:8x8: 89.8% -> 93.5%
of the model at 1 GiB).  Below 90% (:func:`shared_prediction` on shared lanes) the build warns
(:class:`LayoutWarning`, one line from ``collc build``) naming the limit that binds.  Otherwise (the counts unknown) :func:`plan_lanes` keeps room for
``--chunks`` up to 3 and ``--instances 2``.

>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> from collc.topology import parse_spec
>>> s = build_schedule("forestcoll", parse_spec("a100:2x8"), CollKind.ALLGATHER, params={"k": "1"})
>>> s.collective.chunk_factor, s.nsteps, dict(s.provenance.params)["lanes"]
(10, 17, '16')
>>> f = forest(parse_spec("mi250:2"), "auto", 4)
>>> f.opt.k, round(float(f.algbw), 2), round(float(f.best.algbw(f.net)), 2)
(1, 320.0, 354.13)
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from collc.limits import parser_nodes
from collc.errors import CollcWarning, ScheduleError
from collc.frontends.common import I, O, S, Builder, prefix_copy
from collc.frontends.forestcoll.flow import Network, Optimum, fixed_k, optimal
from collc.frontends.forestcoll.lp import LPForest, lp_forest
from collc.frontends.forestcoll.packing import Tree, check_forest, link_loads, map_back, pack_trees, shorten
from collc.frontends.forestcoll.splitting import Logical, split_switches
from collc.frontends.registry import CHUNKS, FILE_GPUS, INSTANCES, Algorithm, Options, Param, register
from collc.ir.collective import CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

__all__ = ["Forest", "forest", "applies", "build", "best_pieces", "fill_drain", "lane_per_tree", "shared_lanes",
           "layout", "messages", "predicted", "pick_pieces", "LayoutWarning", "lp_lanes", "lp_allreduce_forest",
           "tree_pieces", "shared_prediction", "own_tbs", "REFERENCE"]

REFERENCE = ("Zhao et al., ForestColl: Efficient Collective Communications on Heterogeneous Network Fabrics "
             "(arXiv 2402.06787), sections 4.1-4.5, Algorithms 1-5, Theorems 1, 8, 12, 14")
DEFAULT_MAXK = 4


@dataclass(frozen=True)
class Forest:
    """The trees of one (topology, k) with everything the report states."""

    net: Network
    best: Optimum              # the optimum (x*, optimal k, U)
    opt: Optimum               # the chosen k and its U_k
    trees: tuple[Tree, ...]
    logical: Logical
    loads: dict[tuple[int, int], int]      # trees crossing each physical link
    scaled: dict[tuple[int, int], int]     # floor(U b(e)): the trees each link may carry
    seconds: tuple[tuple[str, float], ...] = ()   # CPU time of each stage: search, split, pack, map

    @property
    def algbw(self) -> Fraction:
        """Model allgather algbw of the chosen k: N k / U_k (GB/s)."""
        return self.opt.algbw(self.net)

    @property
    def k(self) -> int:
        return self.opt.k


def applies(topology: Topology, kind: CollKind) -> str | None:
    """None when ForestColl applies, else the reason (validation errors name the node)."""
    if kind not in (CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE):
        return f"forestcoll does not implement {kind.value}"
    try:
        Network.of(topology)
    except ScheduleError as exc:
        return str(exc)
    return None


@lru_cache(maxsize=16)
def forest(topology: Topology, k: str = "auto", maxk: int = DEFAULT_MAXK) -> Forest:
    """Search, split, pack and map back; ``k`` is ``auto``, ``opt`` or an integer."""
    t0 = time.process_time()
    net = Network.of(topology)
    best = optimal(net)
    if k == "opt":
        chosen = best
    elif k == "auto":
        if maxk < 1:
            raise ScheduleError(f"forestcoll: maxk must be at least 1, got {maxk}")
        # the best model algbw among k <= maxk, preferring a k small enough that the trees
        # fit the channels (N k <= 32): crowded lanes pipeline worse (docs/forestcoll.md)
        cands = [best if j == best.k else fixed_k(net, j) for j in range(1, maxk + 1)]
        own_lane = [o for o in cands if net.nranks * o.k <= MAX_CHANNELS]
        chosen = max(own_lane or cands, key=lambda o: (o.x_star, -o.k))
    else:
        try:
            want = int(k)
        except ValueError:
            raise ScheduleError(f"forestcoll: k={k!r} must be auto, opt or a positive integer") from None
        if want < 1:
            raise ScheduleError(f"forestcoll: k={k!r} must be auto, opt or a positive integer")
        chosen = best if want == best.k else fixed_k(net, want)
    scaled = chosen.scaled(net)
    if chosen is not best:
        inn = [0] * net.nnodes
        out = [0] * net.nnodes
        for (a, b), c in scaled.items():
            out[a] += c
            inn[b] += c
        bad = next((v for v in range(net.nnodes) if inn[v] != out[v]), None)
        if bad is not None:
            raise ScheduleError(f"forestcoll: k={chosen.k}: floor(U b) is not Eulerian at node {bad}; edge "
                                f"splitting needs a bidirectional fabric (use k=opt)")
    t1 = time.process_time()
    logical = split_switches(net, scaled, chosen.k)
    t2 = time.process_time()
    trees = shorten(pack_trees(logical, chosen.k), logical)
    t3 = time.process_time()
    check_forest(trees, net.nranks, chosen.k)
    loads = link_loads(map_back(trees, logical))
    over = next((e for e, load in sorted(loads.items()) if load > scaled.get(e, 0)), None)
    if over is not None:   # pragma: no cover - splitting and packing guarantee it
        raise ScheduleError(f"forestcoll: link {over} carries {loads[over]} trees, above {scaled.get(over, 0)}")
    seconds = (("search", t1 - t0), ("split", t2 - t1), ("pack", t3 - t2), ("map", time.process_time() - t3))
    return Forest(net, best, chosen, tuple(trees), logical, loads, scaled, seconds)


@lru_cache(maxsize=4)
def lp_allreduce_forest(topology: Topology) -> LPForest:
    """The forest of ``allreduce=lp`` (appendix E's LP, rounded and packed; cached)."""
    return lp_forest(Network.of(topology))


def _options(opts: Options) -> tuple[str, int]:
    k, maxk = opts.get("k", "auto"), opts.get("maxk", DEFAULT_MAXK)
    if not isinstance(k, str) or not isinstance(maxk, int):
        raise ScheduleError(f"forestcoll: bad parameters k={k!r}, maxk={maxk!r}")
    return k, maxk


def _offsets(trees: tuple[Tree, ...]) -> list[int]:
    """First chunk (within its root's k) of each tree."""
    nxt: dict[int, int] = {}
    out = []
    for t in trees:
        out.append(nxt.get(t.root, 0))
        nxt[t.root] = out[-1] + t.mult
    return out


def build(topology: Topology, request: Collective, opts: Options) -> Schedule:
    # the registry has checked `applies`; the forest / digraph construction below checks it again
    k_text, maxk = _options(opts)
    method = opts.get("allreduce", "rsag")
    if method not in ("rsag", "lp"):
        raise ScheduleError(f"forestcoll: allreduce={method!r} must be rsag or lp")
    n, kind = request.nranks, request.kind
    lpf = None
    if method == "lp":
        if kind is not CollKind.ALLREDUCE:
            raise ScheduleError(f"forestcoll: allreduce=lp builds allreduce, not {kind.value}")
        lpf = lp_allreduce_forest(topology)
        ag, rs, per_root = lpf.bcast, lpf.reduce, lpf.roots
        k = max(per_root)
    else:
        fo = forest(topology, k_text, maxk)
        k = fo.k
        per_root = (k,) * n
        ag = fo.trees
        rs = ag
        if kind is not CollKind.ALLGATHER and not fo.net.bidirectional:
            rs = forest(topology.transpose(), str(k), maxk).trees   # out-trees there, in-trees here
    offs_ag, offs_rs = _offsets(ag), _offsets(rs)
    lanes_opt, pieces_opt = opts.get("lanes", 0), opts.get("pieces", 0)
    if not isinstance(lanes_opt, int) or not isinstance(pieces_opt, int) or lanes_opt < 0 or pieces_opt < 0:
        raise ScheduleError(f"forestcoll: lanes and pieces must be integers >= 0 (0 = auto), got "
                            f"{lanes_opt!r}, {pieces_opt!r}")
    reduces = kind is not CollKind.ALLGATHER
    rail = rail_of(topology)
    both = kind is CollKind.ALLREDUCE
    ag_plan = rs_plan = None
    warn_on: tuple[list[int], int, int, float] | None = None    # the layout to warn about, once the pieces are known
    chunks, instances, file_gpus = opts.get(CHUNKS), opts.get(INSTANCES), opts.get(FILE_GPUS, n)
    # the lowering's counts (chunks, instances, gpus per file), when the driver passed them
    counts = ((chunks, instances, file_gpus) if isinstance(chunks, int) and isinstance(instances, int)
              and isinstance(file_gpus, int) else None)
    if lanes_opt == 0 and counts is not None:
        c_, i_, f_ = counts
        # the lowering's counts are known: a lane per tree where it fits, else shared lanes within
        # the runtime's tbs and steps, and the pieces of the best predicted fraction (the LP's forest
        # has no physical paths for the estimate: 3 pieces per hop, as plan_lanes)
        want = pieces_opt or max(MIN_PIECES, min(MAX_PIECES, PIECES_PER_HOP * max(t.height for t in ag + rs)))
        if lpf is None:
            ag_got = plan_and_prediction(fo, ag, n, c_, i_, f_, both, reduces, rail, pieces_opt)
            rs_got = ag_got if rs is ag else plan_and_prediction(fo, rs, n, c_, i_, f_, both, True,
                                                                 rail, pieces_opt)
            if ag_got is not None and rs_got is not None:
                got = min(ag_got[1], rs_got[1])
                ag_plan, rs_plan = (ag_got[0], got), (rs_got[0], got)
                # the prediction is fitted to allgather (docs/forestcoll.md): warn there only
                if kind is CollKind.ALLGATHER and not pieces_opt:
                    warn_on = min(ag_got, rs_got, key=lambda g: g[3])
        else:
            joint = lp_lanes(ag, rs, n, want, c_, i_, f_)
            if joint is not None:
                ag_plan, rs_plan = (joint[0], joint[2]), (joint[1], joint[2])
        if pieces_opt and any(p is None or p[1] < pieces_opt for p in (ag_plan, rs_plan)):
            ag_plan = None      # the pieces the user asked for, on the budgeted lanes
    if ag_plan is not None and rs_plan is not None:
        (ag_lanes, ag_pieces), (rs_lanes, rs_pieces) = ag_plan, rs_plan
    else:
        # the lowering copies every tb and channel once per instance (1 when the count is unknown)
        copies = instances if isinstance(instances, int) else 1
        ag_lanes, ag_pieces = plan_lanes(ag, n, lanes_opt, pieces_opt, both, reduces, rail, copies)
        rs_lanes, rs_pieces = ((ag_lanes, ag_pieces) if rs is ag else
                               plan_lanes(rs, n, lanes_opt, pieces_opt, both, True, rail, copies))
    pieces = min(ag_pieces, rs_pieces)
    params = dict(opts)
    params.update(trees_per_root=k, lanes=max(ag_lanes) + 1, pieces=pieces)
    cuts = None
    # ag_plan is set only where the counts are known
    ag_sharing = sharing(ag, ag_lanes) if kind is CollKind.ALLGATHER and ag_plan is not None else 1
    if ag_sharing >= 2 and counts is not None and lpf is None and not pieces_opt:
        # shared lanes: pieces per tree, the finest where a tree's tbs have room (tree_pieces)
        c_, i_, f_ = counts
        fine = min(CONN_STEPS // c_, MAX_OFFSET_CHUNKS // (n * k * c_ * i_))
        cuts = tree_pieces(ag, ag_lanes, fine, c_, n, f_)
        if cuts is not None and sum(c * t.mult for c, t in zip(cuts, ag)) > pieces * sum(t.mult for t in ag):
            pieces = fine
            params.update(pieces=pieces, coarsest=min(cuts), finest=max(cuts))
        else:
            cuts = None
        if warn_on is not None:
            warn_on = warn_on[:3] + (shared_prediction(fo, ag, cuts or [pieces] * len(ag)),)
    if warn_on is not None and warn_on[3] < GOAL and counts is not None:
        known = counts
        _warn_layout(topology, fo, warn_on[3], k_text, maxk, pieces, max(warn_on[0]) + 1, warn_on[2],
                     lambda alt: plan_and_prediction(alt, alt.trees, n, *known, both, reduces, rail),
                     None if cuts is None else (min(cuts), max(cuts)))
    stretch = 1
    if ag_sharing >= STRETCH_SHARING and max(ag_lanes) + 1 > MAX_CHANNELS // 2:
        stretch = 2
        params.update(stretch=stretch)
    if lpf is not None:
        params.update(trees_per_root=",".join(map(str, per_root)), lanes=max(ag_lanes + rs_lanes) + 1)
    kk = k * pieces    # chunks per rank block: each tree's m chunks, cut into `pieces` transfers
    # where each root's block starts (blocks of k_v pieces' chunks: equal but for the LP's roots)
    base = [0] * n
    for v in range(1, n):
        base[v] = base[v - 1] + per_root[v - 1] * pieces
    whole = base[-1] + per_root[-1] * pieces

    def blocks(t: Tree, off: int, cut: int = 0) -> list[tuple[range, range]]:
        """(chunks within the root's block, absolute chunks) of each piece of tree t, cut into
        ``cut`` pieces (a divisor of ``pieces``; 0: ``pieces``)."""
        out = []
        size = t.mult * (pieces // (cut or pieces))
        for j in range(cut or pieces):
            lo = off * pieces + j * size
            out.append((range(lo, lo + size), range(base[t.root] + lo, base[t.root] + lo + size)))
        return out

    height = max(t.height for t in rs)
    if kind is CollKind.ALLGATHER:
        b = Builder(Collective(kind, n, kk, request.inplace))
        if not request.inplace:
            for r in range(n):
                b.move(0, r, r, I, range(kk), O, range(r * kk, (r + 1) * kk))
        for i, (t, off) in enumerate(zip(ag, offs_ag)):
            depth = t.depths()
            cut = cuts[i] if cuts is not None else pieces
            for j, (rel, dst) in enumerate(blocks(t, off, cut)):
                for p, c in t.edges:
                    own = p == t.root and not request.inplace
                    b.move((depth[p] * stretch + j) * (pieces // cut), p, c, I if own else O, rel if own else dst, O, dst, lane=ag_lanes[i])
    elif kind is CollKind.REDUCESCATTER:
        b = Builder(Collective(kind, n, kk, request.inplace))
        start = 0
        if not request.inplace:
            b.scratch = n * kk
            for r in range(n):
                b.move(0, r, r, I, range(n * kk), S, range(n * kk))
                b.move(0, r, r, I, range(r * kk, (r + 1) * kk), O, range(kk))
            start = 1
        work = I if request.inplace else S
        for i, (t, off) in enumerate(zip(rs, offs_rs)):
            depth = t.depths()
            for j, (rel, idx) in enumerate(blocks(t, off)):
                for p, c in t.edges:
                    to_root = p == t.root and not request.inplace
                    b.move(start + height - depth[c] + j, c, p, work, idx, O if to_root else work,
                           rel if to_root else idx, reduce=True, lane=rs_lanes[i])
    elif kind is CollKind.ALLREDUCE:
        b = Builder(Collective(kind, n, whole, request.inplace))
        start = prefix_copy(b, I, O, whole, range(n))
        for i, (t, off) in enumerate(zip(rs, offs_rs)):
            depth = t.depths()
            for j, (_, idx) in enumerate(blocks(t, off)):
                for p, c in t.edges:
                    b.move(start + height - depth[c] + j, c, p, O, idx, O, idx, reduce=True, lane=rs_lanes[i])
        # On the same forest a root's piece j is reduced at step height - 1 + j and broadcast from
        # height + j.  A transpose forest (one-way links) cuts a root's block into other pieces, so
        # a chunk may be reduced late in one and sent early in the other: its allgather then starts
        # once every piece is reduced.
        # The LP's two forests cut a root's block differently too, but its broadcast pieces
        # start as soon as their own chunks are reduced (the step after the last one is).
        ag_start = start + height + (0 if rs is ag else pieces - 1)
        done: dict[int, int] = {}
        if lpf is not None:
            for t, off in zip(rs, offs_rs):
                for j, (_, idx) in enumerate(blocks(t, off)):
                    done.update((x, start + height - 1 + j) for x in idx)
        for i, (t, off) in enumerate(zip(ag, offs_ag)):
            depth = t.depths()
            for j, (_, idx) in enumerate(blocks(t, off)):
                first = ag_start + j if lpf is None else max(done[x] for x in idx) + 1
                for p, c in t.edges:
                    b.move(first + depth[p], p, c, O, idx, O, idx, lane=ag_lanes[i])
    else:  # pragma: no cover - applies() filters
        raise ScheduleError(f"forestcoll does not implement {kind.value}")
    return b.schedule("forestcoll", params, topology.name, REFERENCE)


MAX_CHANNELS = 32     # the executor's channels
# Trees that share a tb are sent in step order (depth of the edge + piece).  A tall tree's pieces
# reach a deep edge later than one step a hop where 3 or more trees share tbs, and the tb then waits
# for them while the others' pieces are ready: with 2 steps a hop (``stretch``) a100:8x8 (31 lanes,
# 3 trees a tb, trees of height 14) goes from 89.8% to 92.8% of its model at 1 GiB (16 pieces for
# all), and with pieces per tree (tree_pieces) from 92.6% to 93.5%.  Measured to
# lose elsewhere (mi250:2 k=2 on 10 lanes, 83.9% -> 79.7%; mi250:8+8 k=4, 2 a tb, 32 pieces: 91.1% ->
# 90.5%), so it is taken on 17 lanes and up with 3 or more trees a tb only (docs/forestcoll.md).
STRETCH_SHARING = 3
MAX_LANES = 16        # lanes by default: half the channels, room for --instances 2
TB_BUDGET = 64        # RCCL's tbs per GPU
MAX_NODES = 4095      # the runtime parser's XML nodes per rank
MAX_OFFSET_CHUNKS = 32767   # chunks a buffer may hold (the runtime's int16 offsets, collc/limits.py)
STEP_BUDGET = 21      # of the 64 steps per tb: room for --chunks up to 3 on top of the pieces
MAX_PIECES = 48
# pieces per transfer: 3 per hop of the tallest tree, at least 8 (the event model at 1 GiB: on a100:2x8,
# height 8, 10 pieces give 98.7% of the model, 48 pieces 92% (5 us per message); on mi250:2 with a lane
# per tree (lanes=32), height 12, the algbw still rises up to 48 pieces: 85.4% at 21, 91.9% at 48)
PIECES_PER_HOP = 3
MIN_PIECES = 8


def rail_of(topology: Topology) -> Callable[[int, int], int | None] | None:
    """The NIC rail of a transfer ``a -> b`` on a fabric with rails (``a100:NxM``: the two
    IB switches of even and odd GPUs), None for a transfer inside a box; None overall on
    fabrics without rails."""
    if not topology.name.startswith("a100:") or topology.param("gpus") is None:
        return None
    per = int(topology.param("gpus") or 1)
    return lambda a, b: None if a // per == b // per else (a % per) % 2


def plan_lanes(trees: tuple[Tree, ...], n: int, lanes: int = 0, pieces: int = 0,
               both_ways: bool = False, reduces: bool = False,
               rail: Callable[[int, int], int | None] | None = None,
               instances: int = 1) -> tuple[list[int], int]:
    """A lane (hence channel) per tree where the limits allow, and the pieces per transfer.

    Trees on one lane that share a connection share its tbs, in step order; trees on
    separate lanes pipeline independently.  The lowering repeats every tb and channel
    once per ``--instances``, so with ``lanes = 0`` the most lanes (up to 16, which
    leaves channels for ``--instances 2``, and up to 32 / ``instances``) whose tbs times
    ``instances`` fit ``TB_BUDGET`` per rank are used; trees go greedily (most chunks first) to the lane where they share the fewest
    connections.  With ``pieces = 0`` each transfer is cut into 3 pieces per hop of the
    tallest tree (at least 8, at most 48) as far as ``STEP_BUDGET`` (21) steps per tb
    allow, counting a paired tb's receives and sends, which leaves room for ``--chunks``
    up to 3 within the runtime's 64 steps per tb.  ``both_ways``: the tree is used as
    in-tree and out-tree (allreduce); ``reduces``: a received piece may lower to up to 3
    steps (receive, reduce, nop).  ``rail``: a tree whose box-to-box transfers all use NIC
    rail r goes to a lane (hence, without channel groups, a channel) of parity r, because
    the runtimes map channels to NICs (the authors' lowering does the same).
    """
    order = sorted(range(len(trees)), key=lambda i: (-trees[i].mult, i))
    parity: list[int | None] = []
    for t in trees:
        rails = {rail(p, c) for p, c in t.edges} - {None} if rail is not None else set()
        parity.append(rails.pop() if len(rails) == 1 else None)

    def assign(nl: int) -> tuple[list[int], dict[tuple[int, int, int, int], int]]:
        lane_of = [0] * len(trees)
        conns: dict[tuple[int, int, int, int], int] = {}   # (lane, rank, peer, dir) -> transfers
        size = [0] * nl
        for i in order:
            t = trees[i]
            keys = [(p, c) for p, c in t.edges]
            allowed = [ln for ln in range(nl) if parity[i] is None or nl < 2 or ln % 2 == parity[i]]
            best = min(allowed, key=lambda ln: (sum(conns.get((ln, p, c, 0), 0) for p, c in keys), size[ln], ln))
            lane_of[i] = best
            size[best] += 1
            for p, c in keys:
                ends = ((best, p, c, 0), (best, c, p, 1))
                for key in ends + (((best, c, p, 0), (best, p, c, 1)) if both_ways else ()):
                    conns[key] = conns.get(key, 0) + 1
        return lane_of, conns

    def tbs(conns: dict[tuple[int, int, int, int], int]) -> int:
        """tbs per rank: one per (lane, peer, direction) and a local one."""
        per = [1] * n
        for _, rank, _, _ in conns:
            per[rank] += 1
        return max(per)

    nl = lanes or min(MAX_LANES, MAX_CHANNELS // max(1, instances), len(trees))
    lane_of, conns = assign(nl)
    while not lanes and nl > 1 and tbs(conns) * instances > TB_BUDGET:
        nl -= 1
        lane_of, conns = assign(nl)
    # a tb may pair a receive peer with a send peer (the lowering does unless told not
    # to): budget for the busiest receive plus the busiest send of a rank's lane
    most: dict[tuple[int, int, int], int] = {}
    for (lane, rank, _, way), count in conns.items():
        most[(lane, rank, way)] = max(most.get((lane, rank, way), 0), count)
    busiest = max((most.get((lane, rank, 0), 0) + most.get((lane, rank, 1), 0)
                   for lane, rank, _ in most), default=1)
    fill = max(MIN_PIECES, PIECES_PER_HOP * max(t.height for t in trees))   # the pipeline's depth
    return lane_of, pieces or max(1, min(MAX_PIECES, fill, STEP_BUDGET // (busiest * (3 if reduces else 1))))


ALPHA_US = 5.0            # software cost of one message (collc's event model; NCCL's ~5 us per step)
REF_BYTES = 1 << 30       # the message size the pieces are chosen for: large messages (1 GiB)
CONN_STEPS = 48           # steps of one connection per tb: 3/4 of the runtime's 64 (nops on top)
LP_TB_STEPS = 64          # the runtime's steps per tb, for lp_lanes' measured 2 steps per transfer


def best_pieces(fo: Forest, size: int = REF_BYTES, alpha_us: float = ALPHA_US) -> int:
    """Pieces per tree chunk that minimise ``T(P) = T* + P alpha + 2 G / P`` (so ``P = sqrt(2 G / alpha)``).

    Every piece costs its sender ``alpha``; fewer, larger pieces leave the links that the
    forest fills to ``U b(e)`` (the tight ones, which need the whole model time T*) idle
    longer while the pipeline fills and drains, since a piece is stored and forwarded whole.
    For a tight link e, its fill is the earliest arrival of any of its trees (the
    store-and-forward of one piece over the hops from the root, at each hop's link bandwidth)
    and its drain the longest way on from it; ``G / P`` is the largest fill plus drain over
    the tight links.  The factor 2: during fill and drain a piece shares its links with the
    trees already flowing, about half of them on average.  ``size`` is the message size
    the estimate is made at (1 GiB: the pieces matter for large messages only).

    >>> from collc.topology import parse_spec
    >>> best_pieces(forest(parse_spec("mi250:2"))), best_pieces(forest(parse_spec("a100:2x8")))
    (39, 25)
    """
    return max(1, round(math.sqrt(2 * fill_drain(fo, size) / alpha_us)))


def fill_drain(fo: Forest, size: int = REF_BYTES) -> float:
    """G of :func:`best_pieces`: the largest fill plus drain (us) over the tight links of one
    piece the size of a whole tree chunk, at ``size``."""
    net = fo.net
    unit_bytes = size / (net.nranks * fo.k)
    gbps = {e: float(c * net.unit) for e, c in net.cap.items()}
    fill: dict[tuple[int, int], float] = {}
    drain: dict[tuple[int, int], float] = {}
    for t, used in zip(fo.trees, map_back(list(fo.trees), fo.logical)):
        units = iter(used)
        path_of: dict[tuple[int, int], tuple[int, ...]] = {}
        for e in t.edges:           # map_back lists each edge's units in edge order
            need, first = t.mult, None
            while need > 0:
                path, got = next(units)
                first = first or path
                need -= got
            assert first is not None
            path_of[e] = first
        hop = {e: unit_bytes * t.mult / (1e3 * min(gbps[lk] for lk in zip(p, p[1:]))) for e, p in path_of.items()}
        reach = {t.root: 0.0}
        for p, c in t.edges:
            reach[c] = reach[p] + hop[(p, c)]
        below: dict[int, float] = {}
        for p, c in reversed(t.edges):      # children before parents
            below[p] = max(below.get(p, 0.0), hop[(p, c)] + below.get(c, 0.0))
        for (p, c), path in path_of.items():
            for lk in zip(path, path[1:]):
                if fo.loads.get(lk) == fo.scaled.get(lk):
                    fill[lk] = min(fill.get(lk, reach[p]), reach[p])
                    drain[lk] = max(drain.get(lk, 0.0), below.get(c, 0.0))
    return max((fill[lk] + drain[lk] for lk in fill), default=0.0)


def lane_per_tree(trees: tuple[Tree, ...], n: int, pieces: int, chunks: int, instances: int, file_gpus: int,
                  both_ways: bool = False, reduces: bool = False,
                  rail: Callable[[int, int], int | None] | None = None) -> tuple[list[int], int] | None:
    """A lane (channel) of its own for every tree, and up to ``pieces`` pieces, if the file
    lowered with ``chunks`` and ``instances`` fits: lanes x instances <= 32 channels,
    tbs x instances <= ``TB_BUDGET`` per rank (RCCL's 64), a connection's steps within
    ``CONN_STEPS`` of a tb and a rank's steps within the parser's 4095 nodes; the pieces are
    lowered until they fit, None when not even one piece does.  ``rail`` as in
    :func:`plan_lanes`: a tree on one NIC rail gets a lane of that parity."""
    parity: list[int | None] = []
    for t in trees:
        rails = {rail(p, c) for p, c in t.edges} - {None} if rail is not None else set()
        parity.append(rails.pop() if len(rails) == 1 else None)
    need = [sum(1 for r in parity if r == w) for w in (0, 1)]
    nl = len(trees)
    while (nl + 1) // 2 < need[0] or nl // 2 < need[1]:
        nl += 1
    if nl * instances > MAX_CHANNELS:
        return None
    free = {0: list(range(0, nl, 2)), 1: list(range(1, nl, 2))}
    lane_of = [0] * len(trees)
    for i in sorted(range(len(trees)), key=lambda i: (parity[i] is None, i)):
        w = parity[i]
        side = w if w is not None else (0 if len(free[0]) >= len(free[1]) else 1)
        lane_of[i] = free[side].pop(0)
    conns: dict[tuple[int, int, int, int], int] = {}
    for i, t in enumerate(trees):
        for p, c in t.edges:
            ends = ((lane_of[i], p, c, 0), (lane_of[i], c, p, 1))
            for key in ends + (((lane_of[i], c, p, 0), (lane_of[i], p, c, 1)) if both_ways else ()):
                conns[key] = conns.get(key, 0) + 1
    tbs = [1] * n
    ops = [0] * n
    for (_, rank, _, _), count in conns.items():
        tbs[rank] += 1
        ops[rank] += count
    if max(tbs) * instances > TB_BUDGET:
        return None
    factor = chunks * (3 if reduces else 1)
    pieces = min(pieces, CONN_STEPS // (max(conns.values(), default=1) * factor))
    # the parser's nodes: <algo>, the file's <gpu>s, the tbs and the steps (local copies: 2 per instance)
    while pieces >= 1 and parser_nodes(file_gpus, max(tbs) * instances,
                                       instances * (max(ops) * pieces * factor + 2)) > MAX_NODES:
        pieces -= 1
    return (lane_of, pieces) if pieces >= 1 else None


SLICE_BYTES = 1 << 21      # a step's chunks travel in messages of at most 2 MiB (Simple protocol's slice)


def messages(trees: tuple[Tree, ...], chunks_per_piece: int, pieces: int, size: int = REF_BYTES) -> int:
    """Messages the largest tree sends per hop at ``size`` when cut into ``pieces``: a step of m
    chunks goes as ceil(m / mac) messages of at most 2 MiB (mac = 2 MiB // chunk, at most 71).
    ``chunks_per_piece`` is N k (the chunks one piece of every tree makes)."""
    most = max((t.mult for t in trees), default=1)
    mac = max(1, min(71, SLICE_BYTES // max(1, -(-size // (chunks_per_piece * pieces)))))   # the model's ceil
    return pieces * -(-most // mac)


def predicted(fo: Forest, trees: tuple[Tree, ...], pieces: int, sharing: float = 1, g: float | None = None,
              alpha_us: float = ALPHA_US) -> float:
    """Predicted fraction of the model algbw at 1 GiB in the event model:
    ``T* / (T* + c (G / P + alpha M / 2))`` with G the fill and drain of one whole-chunk piece
    (:func:`fill_drain`), M the messages per hop (:func:`messages`) and c the most trees that
    share one tb (their pieces and messages queue behind each other).  Fitted to the event
    model at 1 GiB: within about 2% with a lane per tree (c = 1); on shared lanes it errs
    low (mi250:2 k=2: 72% predicted, 84% simulated), so a warning is never missed there
    (docs/forestcoll.md, "Pipelining that follows the packing")."""
    t_star = REF_BYTES / (float(fo.algbw) * 1e3)
    gg = fill_drain(fo) if g is None else g
    extra = sharing * (gg / pieces + alpha_us * messages(trees, fo.net.nranks * fo.k, pieces) / 2)
    return t_star / (t_star + extra)


def pick_pieces(fo: Forest, trees: tuple[Tree, ...], cap: int, sharing: int = 1) -> int:
    """The pieces (1..``cap``) of the best :func:`predicted` fraction: with multiplicities the
    message count is not monotone in P (a100:2x8, k=4: 32 pieces send one 2 MiB message a
    step, 25 send two), so every P is tried."""
    g = fill_drain(fo)
    return max(range(1, max(1, cap) + 1), key=lambda p: (predicted(fo, trees, p, sharing, g), -p))


def shared_prediction(fo: Forest, trees: tuple[Tree, ...], cuts: list[int]) -> float:
    """:func:`predicted` for an allgather on shared lanes: the pieces are the chunk-weighted mean
    of the trees' (:func:`tree_pieces`), and c, the queueing factor, is ``SHARED_QUEUE`` (2)
    times the square root of the spread of the multiplicities (the chunk-weighted mean
    multiplicity over the plain mean, 1 when all are 1): the runtime gives each tb's message an
    equal share of a link, so trees of more chunks fall behind.  How many trees share a tb acts
    through the pieces it leaves them, not on top of it: the c that the event model needs is
    1.3 to 2.6 on all seven shared cases of benchmarks/forestcoll_pipelining.py whether 1.1 or
    6.2 trees share a transfer's tb on average, where the most trees in a tb (the former c)
    erred low by up to 42 points.  Within 1.5 points of the event model at 1 GiB on six of them
    (a100:8x8 90.4 predicted, 93.5 simulated; mi250:8+8 k=4 91.4 and 90.6, k=13 87.2 and 87.0;
    mi250:2 k=2/3/4 83.1/78.1/74.6 and 83.9/79.6/75.5), low on mi250:2 k=opt (58.6 and 67.9);
    docs/forestcoll.md."""
    mults = [t.mult for t in trees]
    spread = (sum(m * m for m in mults) / sum(mults)) / (sum(mults) / len(mults))
    eff = max(1, round(sum(c * m for c, m in zip(cuts, mults)) / sum(mults)))
    return predicted(fo, trees, eff, SHARED_QUEUE * math.sqrt(spread))


SHARED_QUEUE = 2.0     # queueing factor of shared lanes (shared_prediction), fitted to the event model


def tree_pieces(trees: tuple[Tree, ...], lane_of: list[int], pieces: int, chunks: int, n: int,
                file_gpus: int) -> list[int] | None:
    """Pieces of each tree (divisors of ``pieces``) for an allgather on shared lanes: every tree
    starts at ``pieces``; while a tb's steps (its trees' pieces, a piece of c chunks ceil(c / 71)
    steps, times ``chunks``) pass ``CONN_STEPS``, its tree of the most pieces is cut coarser (the
    next divisor down).  So trees alone in their tbs keep the fine pieces that a shared tb cannot
    hold.  None when not even one piece each fits, or the steps pass the parser's nodes.

    On mi250:8+8 at k=4 (31 trees, 20 lanes, 2 trees in 6 of its tbs) 25 trees keep 48 pieces
    and 6 take 24: 90.6% of the model at 1 GiB, against 89.3% with 24 pieces for all
    (docs/forestcoll.md, "Pipelining that follows the packing").
    """
    if pieces < 1:
        return None
    divs = [d for d in range(1, pieces + 1) if pieces % d == 0]
    cut = [pieces] * len(trees)
    keys: dict[tuple[int, int, int, int], list[int]] = {}
    mine: list[list[tuple[int, int, int, int]]] = [[] for _ in trees]
    for i, t in enumerate(trees):
        for p, c in t.edges:
            for key in ((lane_of[i], p, c, 0), (lane_of[i], c, p, 1)):
                keys.setdefault(key, []).append(i)
                mine[i].append(key)

    def steps(i: int) -> int:
        return cut[i] * -(-(trees[i].mult * (pieces // cut[i])) // MAX_CNT) * chunks

    # the busiest tb first (a heap of step totals, stale entries skipped), its finest tree cut
    total = {key: sum(steps(i) for i in on) for key, on in keys.items()}
    heap = [(-v, tuple(-x for x in key), key) for key, v in total.items()]
    heapq.heapify(heap)
    while heap:
        neg, _, key = heap[0]
        if -neg != total[key]:
            heapq.heappop(heap)
            continue
        if -neg <= CONN_STEPS:
            break
        i = max(keys[key], key=lambda i: (cut[i], steps(i), -i))
        if cut[i] == 1:
            return None
        before = steps(i)
        cut[i] = divs[divs.index(cut[i]) - 1]
        for k in mine[i]:
            total[k] += steps(i) - before
            heapq.heappush(heap, (-total[k], tuple(-x for x in k), k))
    tbs = [1] * n
    ops = [2] * n          # the local copies
    for (_, rank, _, _), v in total.items():
        tbs[rank] += 1
        ops[rank] += v
    worst = max(range(n), key=lambda r: tbs[r] + ops[r])
    return cut if parser_nodes(file_gpus, tbs[worst], ops[worst]) <= MAX_NODES else None


MAX_CNT = 71     # chunks of one step (the runtime's limit): a piece of a tree of multiplicity m is ceil(m / 71) steps


def _trees_per_connection(trees: tuple[Tree, ...], lane_of: list[int], both_ways: bool) -> list[int]:
    """How many trees use each (lane, sender, receiver) connection, hence share its tb."""
    count: dict[tuple[int, int, int], int] = {}
    for t, ln in zip(trees, lane_of):
        for p, c in t.edges:
            for key in ((ln, p, c), (ln, c, p)) if both_ways else ((ln, p, c),):
                count[key] = count.get(key, 0) + 1
    return list(count.values())


def mean_sharing(trees: tuple[Tree, ...], lane_of: list[int], both_ways: bool = False) -> float:
    """Trees per tb, averaged over the transfers: how many others a transfer queues with."""
    count = _trees_per_connection(trees, lane_of, both_ways)
    return sum(c * c for c in count) / max(1, sum(count))


def sharing(trees: tuple[Tree, ...], lane_of: list[int], both_ways: bool = False) -> int:
    """The most trees that share one connection (hence one tb) on one lane."""
    return max(_trees_per_connection(trees, lane_of, both_ways), default=1)


GOAL = 0.9     # the fraction of its model algbw a file should reach at 1 GiB in the event model


class LayoutWarning(CollcWarning):
    """The layout that fits the runtime's limits is predicted below ``GOAL`` (``collc build``
    prints it as one ``collc: warning:`` line)."""


def plan_and_prediction(fo: Forest, trees: tuple[Tree, ...], n: int, chunks: int, instances: int, file_gpus: int,
                        both_ways: bool, reduces: bool, rail: Callable[[int, int], int | None] | None,
                        pieces: int = 0) -> tuple[list[int], int, int, float] | None:
    """Lanes, pieces (``pieces``, or :func:`pick_pieces` within what fits), the most trees per
    tb and the :func:`predicted` fraction of one forest's layout; None when nothing fits."""
    plan = layout(trees, n, pieces or MAX_PIECES, chunks, instances, file_gpus, both_ways, reduces, rail)
    if plan is None:
        return None
    share = sharing(trees, plan[0], both_ways)
    got = min(plan[1], pieces or pick_pieces(fo, trees, plan[1], share))
    return plan[0], got, share, predicted(fo, trees, got, share)


def own_tbs(trees: tuple[Tree, ...], n: int) -> int:
    """The tbs the busiest rank would need if no two trees shared one: a tb per (tree, peer,
    direction), and the local one (what binds where :func:`lane_per_tree` does not fit)."""
    seen: list[set[tuple[int, int, int]]] = [set() for _ in range(n)]
    for i, t in enumerate(trees):
        for p, c in t.edges:
            seen[p].add((i, c, 0))
            seen[c].add((i, p, 1))
    return 1 + max(len(s) for s in seen)


def _warn_layout(topology: Topology, fo: Forest, frac: float, k_text: str, maxk: int, pieces: int, lanes: int,
                 share: int, alt_plan: Callable[[Forest], tuple[list[int], int, int, float] | None],
                 cut: tuple[int, int] | None = None) -> None:
    """One ``LayoutWarning``: the prediction, what bounds it, and k=auto's choice when that is
    another k predicted at ``GOAL`` or above."""
    import warnings

    hint = ""
    if k_text != "auto":
        alt = forest(topology, "auto", maxk)
        got = alt_plan(alt) if alt.k != fo.k else None
        if got is not None and got[3] >= GOAL:
            hint = (f"; k=auto (k={alt.k}) is predicted at {got[3] * 100:.0f}% of {float(alt.algbw):.2f} GB/s, "
                    f"{got[3] * float(alt.algbw):.2f} against {frac * float(fo.algbw):.2f} here")
    need = own_tbs(fo.trees, fo.net.nranks)
    binds = (f"a tb per tree and connection needs {need} tbs on a rank, above the {TB_BUDGET} allowed"
             if need > TB_BUDGET else f"a lane per tree needs {len(fo.trees)} channels, above the {MAX_CHANNELS}")
    warnings.warn(LayoutWarning(
        f"forestcoll: k={fo.k} is predicted at {math.floor(frac * 100)}% of its model algbw {float(fo.algbw):.2f} GB/s at "
        f"1 GiB ({len(fo.trees)} trees on {lanes} lanes, up to {share} per tb, "
        f"{pieces if cut is None else f'{cut[0]} to {cut[1]}'} pieces): "
        f"{binds}, so trees share tbs, whose {CONN_STEPS} steps bound the pieces{hint}"), stacklevel=3)


def layout(trees: tuple[Tree, ...], n: int, pieces: int, chunks: int, instances: int, file_gpus: int,
           both_ways: bool = False, reduces: bool = False,
           rail: Callable[[int, int], int | None] | None = None) -> tuple[list[int], int] | None:
    """:func:`lane_per_tree` where it fits, else :func:`shared_lanes` for one instance (None when
    neither fits: with ``--instances 2`` and up the budgeted :func:`plan_lanes` stays, as before)."""
    return (lane_per_tree(trees, n, pieces, chunks, instances, file_gpus, both_ways, reduces, rail)
            or (shared_lanes(trees, n, pieces, chunks, instances, file_gpus, both_ways, reduces, rail)
                if instances == 1 else None))


def shared_lanes(trees: tuple[Tree, ...], n: int, pieces: int, chunks: int, instances: int, file_gpus: int,
                 both_ways: bool = False, reduces: bool = False,
                 rail: Callable[[int, int], int | None] | None = None) -> tuple[list[int], int] | None:
    """Lanes shared by several trees, with the lowering's counts known, for forests of more
    trees than lanes or tbs allow one each (k > 1, k = opt).

    Trees that share a connection on a lane share its tb, whose steps (transfers x pieces x
    chunks, x3 for reductions) must fit ``CONN_STEPS``; every (lane, peer, direction) of a rank
    is a tb, ``TB_BUDGET`` per rank.  Trees go greedily (most chunks first) to the lane where the
    busiest of their connections would carry the fewest trees, then where they add the fewest
    tbs; among lane counts whose tbs fit, the one that allows the most pieces wins (then the
    most lanes).  So the pieces are limited by the tbs a rank may have, not by
    :func:`plan_lanes`' budget for unknown counts (21 steps): mi250:2 at k=2 goes from 8 lanes
    and 2 pieces to 16 lanes and 9 (docs/forestcoll.md)."""
    parity: list[int | None] = []
    for t in trees:
        rails = {rail(p, c) for p, c in t.edges} - {None} if rail is not None else set()
        parity.append(rails.pop() if len(rails) == 1 else None)
    order = sorted(range(len(trees)), key=lambda i: (-trees[i].mult, i))
    keys: list[list[tuple[int, int, int]]] = []
    for t in trees:
        ks: list[tuple[int, int, int]] = []
        for p, c in t.edges:
            ks += [(p, c, 0), (c, p, 1)]
            if both_ways:
                ks += [(c, p, 0), (p, c, 1)]
        keys.append(ks)
    factor = chunks * (3 if reduces else 1)
    budget = TB_BUDGET // instances
    weight = [-(-t.mult // MAX_CNT) for t in trees]    # transfers of a piece (cap_counts cuts above 71 chunks)

    def attempt(nl: int, cap: int, spread: bool) -> tuple[list[int], int] | None:
        conns: list[dict[tuple[int, int, int], int]] = [{} for _ in range(nl)]
        tbs = [1] * n
        size = [0] * nl
        lane_of = [0] * len(trees)
        for i in order:
            allowed = [ln for ln in range(nl) if parity[i] is None or nl < 2 or ln % 2 == parity[i]]

            def cost(ln: int) -> tuple[int, int, int, int]:
                have = conns[ln]
                most = max(have.get(k, 0) for k in keys[i]) + weight[i]
                if most > cap:
                    return (1, 0, 0, ln)
                new: dict[int, int] = {}
                for k in keys[i]:
                    if k not in have:
                        new[k[0]] = new.get(k[0], 0) + 1
                if any(tbs[r] + c > budget for r, c in new.items()):
                    return (1, 0, 0, ln)
                fresh = sum(new.values())
                return (0, most, fresh, ln) if spread else (0, fresh, size[ln], ln)

            best_cost, best = min((cost(ln), ln) for ln in allowed)
            if best_cost[0]:
                return None
            lane_of[i] = best
            size[best] += 1
            for k in keys[i]:
                if k not in conns[best]:
                    tbs[k[0]] += 1
                conns[best][k] = conns[best].get(k, 0) + weight[i]
        ops = [0] * n
        for lane in conns:
            for (rank, _, _), c in lane.items():
                ops[rank] += c
        got = min(pieces, CONN_STEPS // (cap * factor))
        while got >= 1 and parser_nodes(file_gpus, max(tbs) * instances,
                                        instances * (max(ops) * got * factor + 2)) > MAX_NODES:
            got -= 1
        return (lane_of, got) if got >= 1 else None

    # the fewest trees per tb (hence the most pieces) whose tbs fit, on as many lanes as the
    # channels allow; each tree goes where it adds the fewest tbs (trees that meet the same
    # peers share a lane), then to the emptiest lane
    top = min(len(trees), MAX_CHANNELS // instances)

    def plans(cap: int, first: bool = False) -> list[tuple[list[int], int]]:
        out = []
        for nl in sorted({min(top, x) for x in (32, 16, 8)}, reverse=True):
            for spread in (False, True):
                if (p := attempt(nl, cap, spread)) is not None:
                    out.append(p)
                    if first:
                        return out
        return out

    # the least cap with a layout, by bisection (a larger cap only relaxes the greedy's test)
    per_conn: dict[tuple[int, int, int], int] = {}
    for i in range(len(trees)):
        for k in keys[i]:
            per_conn[k] = per_conn.get(k, 0) + weight[i]
    lo, hi = -(-max(per_conn.values(), default=1) // top), CONN_STEPS // factor   # every lane takes its share
    if lo > hi or not plans(hi, True):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if plans(mid, True):
            hi = mid
        else:
            lo = mid + 1
    found = plans(hi)
    # the same pieces: the layout whose transfers share their tbs with the fewest others
    return min(found, key=lambda p: mean_sharing(trees, p[0], both_ways))


def lp_lanes(bcast: tuple[Tree, ...], reduce: tuple[Tree, ...], n: int, pieces: int, chunks: int, instances: int,
             file_gpus: int) -> tuple[list[int], list[int], int] | None:
    """Lanes for the two forests of ``allreduce=lp`` together, and up to ``pieces`` pieces.

    The LP's trees are one-way (a broadcast edge ``p -> c`` only sends down, a reduce edge
    only up), so a lane's tbs on a rank are its distinct (peer, direction) pairs over both
    forests, counted together against ``TB_BUDGET`` (RCCL's 64) and the lanes against the 32
    channels, each times ``instances``.  The 49 trees of mi250:8+8 do not fit a lane each:
    they go greedily (most chunks first) to the lane where they share a connection with the
    fewest transfers already on it (those serialise in its tb), then add the fewest tbs, then
    the emptiest, on the most lanes (up to 32) whose tbs fit (12 there, 63 tbs).  The
    pieces are lowered to a power of two until a connection's steps fit ``LP_TB_STEPS`` and a
    rank's the parser's nodes, as in :func:`lane_per_tree`; None when not even one piece fits.
    On mi250:8+8 at 1 GiB (event model): 75.74 GB/s, against 27.79 on the budgeted lanes with
    1 piece and 39.67 for the default allreduce (RS+AG); docs/forestcoll.md.
    """
    trees = [(t, False) for t in bcast] + [(t, True) for t in reduce]
    order = sorted(range(len(trees)), key=lambda i: (-trees[i][0].mult, i))

    def keys(i: int) -> list[tuple[int, int, int]]:
        t, up = trees[i]
        out = []
        for p, c in t.edges:
            a, z = (c, p) if up else (p, c)           # data a -> z
            out += [(a, z, 0), (z, a, 1)]
        return out

    def assign(nl: int) -> tuple[list[int], dict[tuple[int, int, int, int], int]]:
        lane_of = [0] * len(trees)
        conns: dict[tuple[int, int, int, int], int] = {}
        size = [0] * nl
        for i in order:
            ks = keys(i)
            best = min(range(nl), key=lambda ln: (max(conns.get((ln,) + k, 0) for k in ks),
                                                  sum((ln,) + k not in conns for k in ks), size[ln], ln))
            lane_of[i] = best
            size[best] += 1
            for k in ks:
                conns[(best,) + k] = conns.get((best,) + k, 0) + 1
        return lane_of, conns

    nl = min(len(trees), MAX_CHANNELS // instances)
    while nl >= 1:
        lane_of, conns = assign(nl)
        tbs = [1] * n
        ops = [0] * n
        for (_, rank, _, _), count in conns.items():
            tbs[rank] += 1
            ops[rank] += count
        if max(tbs) * instances <= TB_BUDGET:
            break
        nl -= 1
    if nl < 1:
        return None
    # under 2 steps per transfer on the busiest tb once fused (mi250:8+8, 12 lanes, 8 pieces:
    # 4 transfers a piece on the busiest connection, 54 steps), so the runtime's 64 steps per tb
    # hold 2 per transfer, where plan_lanes budgets 3 within 48
    factor = chunks * 2
    got = min(pieces, LP_TB_STEPS // (max(conns.values(), default=1) * factor))
    # a power of two: the LP's roots hold sum(roots) x pieces chunks (64 x P on mi250:8+8), and
    # the runtime takes the file only for sizes the chunk count divides
    got = 1 << (got.bit_length() - 1) if got >= 1 else 0
    while got >= 1 and parser_nodes(file_gpus, max(tbs) * instances,
                                    instances * (max(ops) * got * factor + 2)) > MAX_NODES:
        got //= 2
    if got < 1:
        return None
    return lane_of[:len(bcast)], lane_of[len(bcast):], got


def _cut_text(fo: Forest) -> str:
    cut = sorted(v for v in fo.best.cut if v < fo.net.nranks)
    out = sum(c for (a, b), c in fo.net.cap.items() if a in fo.best.cut and b not in fo.best.cut) * fo.net.unit
    rest = sorted(set(range(fo.net.nranks)) - set(cut))
    shown = (f"ranks {{{','.join(map(str, cut))}}}" if len(cut) <= len(rest) else
             f"every rank but {{{','.join(map(str, rest))}}}")
    return f"S* holds {shown} ({len(cut)} of {fo.net.nranks}), B+(S*) = {float(out):g} GB/s"


def report_lines(fo: Forest) -> list[str]:
    net, best, opt = fo.net, fo.best, fo.opt
    per_root: dict[int, list[int]] = {}
    for t in fo.trees:
        per_root.setdefault(t.root, []).append(t.mult)
    counts = sorted({len(v) for v in per_root.values()})
    lines = [
        f"forestcoll: optimal allgather algbw {float(best.algbw(net)):.2f} GB/s "
        f"(x* = {best.x_star * net.unit} GB/s per root, k = {best.k}, U = {best.U / net.unit})",
        f"forestcoll: bottleneck cut {_cut_text(fo)}",
        f"forestcoll: chosen k = {opt.k}, U = {opt.U / net.unit}, model algbw {float(fo.algbw):.2f} GB/s "
        f"(allreduce {float(fo.algbw) / 2:.2f})",
    ]
    if opt.x_star < best.x_star:
        lost = 1 - fo.algbw / best.algbw(net)
        lines.append(f"forestcoll: k = {opt.k} gives up {float(lost) * 100:.2f}% of the optimum "
                     f"(optimal k = {best.k})")
    lines.append(f"forestcoll: {len(fo.trees)} distinct trees ({sum(t.mult for t in fo.trees)} with multiplicity), "
                 f"{counts[0]}..{counts[-1]} per root, heights "
                 f"{min(t.height for t in fo.trees)}-{max(t.height for t in fo.trees)}")
    worst = max(fo.loads[e] / fo.scaled[e] for e in fo.loads)
    lines.append(f"forestcoll: busiest physical link carries {float(worst) * 100:.0f}% of its U b(e) trees")
    return lines


def _report(topology: Topology, schedule: Schedule) -> list[str]:
    opts = dict(schedule.provenance.params)
    fo = forest(topology, opts.get("k", "auto"), int(opts.get("maxk", DEFAULT_MAXK)))
    lines = report_lines(fo)
    if opts.get("allreduce") == "lp":
        lpf = lp_allreduce_forest(topology)
        lines.append(f"forestcoll: allreduce=lp: LP optimum {lpf.lp.value:.2f} GB/s (reduce-scatter + allgather "
                     f"{float(fo.best.algbw(fo.net)) / 2:.2f}); rounded to {sum(lpf.roots)} trees of "
                     f"{lpf.y:.4g} GB/s, model algbw {lpf.algbw:.2f}; trees per root "
                     f"{','.join(map(str, lpf.roots))}")
    return lines


register(Algorithm(
    name="forestcoll",
    collectives=frozenset({CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE}),
    topologies="any Eulerian, strongly connected fabric, switches allowed (a100:NxM, mi250:N, mi250:8+8, "
               "switch, torus, ...)",
    summary="throughput-optimal spanning-tree packing with switch removal (ForestColl); allgather algbw N x*, "
            "354.13 GB/s on mi250:2",
    reference=REFERENCE,
    build=build, applies=lambda t, r, o: applies(t, r.kind),
    params=(Param("k", str, "auto", "trees per root: auto (the best model algbw among k <= maxk, preferring "
                  "N k <= 32), opt, or an integer (fixed-k search)"),
            Param("maxk", int, DEFAULT_MAXK, "largest k that k=auto considers"),
            Param("lanes", int, 0, "channels the trees spread over (0 = auto: a lane per tree when the file "
                  "lowered with --chunks/--instances fits, else lanes shared by the fewest trees per tb that fit "
                  "64 tbs per rank)"),
            Param("pieces", int, 0, "transfers each tree chunk is cut into for pipelining (0 = auto: the best "
                  "predicted event-model fraction at 1 GiB within 48 steps per tb, per tree on shared lanes; a "
                  "one-line warning when it is below 90%, see docs/forestcoll.md)"),
            Param("allreduce", str, "rsag", "allreduce: rsag (reduce-scatter then allgather on one forest) or lp "
                  "(appendix E's LP: unequal roots, each link split between in- and out-trees; docs/forestcoll.md)")),
    example="collc build --topology mi250:2 --algorithm forestcoll --collective allgather --report -o fc.xml",
    report=_report,
    pair_tbs=False,
))
