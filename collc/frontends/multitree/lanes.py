"""MultiTree's threadblock lanes: one tb per link, or fused tbs for large tori.

Part of the MultiTree family (docs/multitree.md).  :func:`link_runs` cuts each
link's transfers, in step order, into consecutive runs that each fit one tb (one
lane per run); :func:`link_tbs_nodes` predicts the parser nodes of a rank under
one tb per link, peer and run, with the lowering's own constants
(``collc.compiler``); :class:`FusedTbs` plans the lanes and tb pair hints under
which a rank's receive and the send that forwards it share a tb.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from collc.limits import LIMITS, Dialect, connection_steps_per_tb, parser_nodes
from collc.frontends.multitree.trees import Trees, _grid_dims, neighbour_order
from collc.ir.schedule import Transfer
from collc.topology import Topology

__all__ = ["Edge3", "TB_MODES", "RUN_STEPS", "link_runs", "link_run_lanes", "runs_needed", "link_tbs_nodes",
           "turn_order", "FusedTbs"]

Ints = npt.NDArray[np.int64]

#: Transfers of one link that one tb holds in ``threadblocks=link``: the lowering's own share of
#: the executor's and RCCL's 64 steps per tb (the rest is room for dependency nops).
RUN_STEPS = connection_steps_per_tb(LIMITS[Dialect.EXECUTOR].max_steps_per_tb)


def runs_needed(most: int) -> int:
    """Runs (lanes) that a link of ``most`` transfers is cut into."""
    return max(1, -(-most // RUN_STEPS))


def link_runs(transfers: Sequence[Transfer]) -> list[Transfer]:
    """The transfers with lanes such that every link's transfers, in step order, form
    consecutive runs of near-equal length, run ``k`` on lane ``k``.

    A link carries one transfer per step and phase, so a large torus has more per link
    (about 2T: 128 on 16x16) than a tb holds (:data:`RUN_STEPS`); spreading them by
    chunk over channels would make them share the link.  In runs, and with the
    Schedule's ``ordered_sends`` (each run's first send waits for the previous run's
    last), the link keeps the paper's order and is never shared.  Local transfers keep
    lane 0.

    >>> from collc.ir.collective import Buffer
    >>> moves = [Transfer(s, 0, 1, Buffer.OUTPUT, range(s, s + 1), Buffer.OUTPUT, range(s, s + 1))
    ...          for s in range(100)]
    >>> lanes = [t.lane for t in link_runs(moves)]     # 100 transfers, at most 48 per run
    >>> [lanes.count(k) for k in range(3)], lanes == sorted(lanes)
    ([34, 33, 33], True)
    """
    per_link: dict[tuple[int, int], list[int]] = {}
    for i, t in enumerate(transfers):
        if not t.is_local:
            per_link.setdefault((t.src, t.dst), []).append(i)
    runs = runs_needed(max(map(len, per_link.values()), default=0))
    out = list(transfers)
    if runs == 1:
        return out
    keys = list(map(Transfer.sort_key, transfers))
    for idx in per_link.values():
        idx.sort(key=keys.__getitem__)
        for k, i in enumerate(idx):
            lane = k * runs // len(idx)
            if lane != out[i].lane:     # a transfer is a frozen value: rebuild only those that move
                out[i] = out[i].on_lane(lane)
    return out

def link_run_lanes(cols: Ints) -> Ints:
    """:func:`link_runs` on a Schedule's columns (:data:`collc.ir.schedule.COLUMNS`, rows in the
    order the transfers were made): the lane of every row.

    >>> from collc.ir.schedule import COLUMNS
    >>> cols = np.full((len(COLUMNS), 100), -1, dtype=np.int64)
    >>> cols[:10] = 0
    >>> cols[0] = cols[8] = cols[9] = np.arange(100)[::-1]       # made last step first
    >>> cols[2], cols[7] = 1, 1
    >>> lanes = link_run_lanes(cols)
    >>> [int((lanes == k).sum()) for k in range(3)], bool((lanes[::-1] == np.sort(lanes)).all())
    ([34, 33, 33], True)
    """
    step, src, dst, lane, sfirst, dfirst = cols[0], cols[1], cols[2], cols[6], cols[8], cols[9]
    out: Ints = lane.copy()
    remote = np.flatnonzero(src != dst)
    if not len(remote):
        return out
    _, link, per_link = np.unique(src[remote] * (int(dst.max()) + 1) + dst[remote], return_inverse=True,
                                  return_counts=True)
    runs = runs_needed(int(per_link.max()))
    if runs == 1:
        return out
    # a link's transfers in Schedule order (Transfer.sort_key, ties in the order made)
    order = np.lexsort((remote, dfirst[remote], sfirst[remote], lane[remote], step[remote], link))
    first = np.cumsum(per_link) - per_link
    k = np.empty(len(remote), dtype=np.int64)
    k[order] = np.arange(len(remote), dtype=np.int64) - first[link[order]]
    out[remote] = k * runs // per_link[link]
    return out


# ---------------------------------------------------------------------- fused threadblocks
#: A transfer of one phase: (tree root, sender, receiver).
Edge3 = tuple[int, int, int]

TB_MODES = ("auto", "link", "fused")


def link_tbs_nodes(n: int, rs: Trees | None, ag: Trees | None, gpus_per_file: int = 1) -> int:
    """The most parser nodes a rank needs with one tb per link and peer (``threadblocks=link``).

    Per rank: a step per send and receive, ``1/64`` of them for dependency nops, and a
    tb per peer, direction and run (:func:`link_runs`); plus the
    ``<algo>`` and the file's ``gpus_per_file`` ``<gpu>`` nodes (:func:`parser_nodes`).
    A prediction (within 3%): when the lowered program refutes it, the driver builds
    again with ``threadblocks=fused`` (the registration's ``budget_fallback``).
    """
    pair: Counter[tuple[int, int]] = Counter()    # (sender, receiver) -> transfers
    for trees, link in ((rs, itemgetter(1, 0)), (ag, itemgetter(0, 1))):
        if trees is not None:
            for edges in trees.edges:
                pair.update(map(link, edges))     # counted in C: two million edges on 32x32
    groups = runs_needed(max(pair.values(), default=0))
    ops = [0] * n
    conns = [0] * n
    for (a, b), k in pair.items():
        ops[a] += k
        ops[b] += k
        conns[a] += 1
        conns[b] += 1
    return max(parser_nodes(gpus_per_file, conns[v] * groups, o + o // 64) for v, o in enumerate(ops))


def turn_order(topology: Topology) -> list[list[int]]:
    """Per rank, its neighbours in the cyclic order that defines the fused tbs' turns.

    On a grid every ``-1`` neighbour, then every ``+1`` neighbour (N, W, S, E on a
    2-D torus), so that a turn of half the degree goes straight through; elsewhere
    :func:`neighbour_order`.
    """
    nb = neighbour_order(topology)
    dims = _grid_dims(topology)
    if dims is None:
        return nb
    return [order[0:2 * len(dims):2] + order[1:2 * len(dims):2] + order[2 * len(dims):]
            if len(order) >= 2 * len(dims) else order for order in nb]


class FusedTbs:
    """Lanes and tb pairs under which most forwarding ranks fuse a receive with a send.

    A rank ``v`` forwards tree ``r``'s chunk from ``a`` to ``b``: in reduce-scatter
    from its last child to its parent (``rrs``), in allgather from its parent to its
    first child (``rcs``).  The two transfers land in one tb, and can fuse, when both
    use a lane of *turn* ``k``, ``b`` being the ``k``-th neighbour after ``a`` in
    ``v``'s :func:`turn_order`: every lane of turn ``k`` pairs each neighbour with
    the ``k``-th after it, on every rank (the schedule's ``tb_pairs``).

    1. ``forwards``: chained forwards share a transfer, so a forward is kept only
       when its incoming transfer has no turn yet or already the same one.
    2. ``allot``: turns get lanes in proportion to their forwards (two lanes per
       turn on average), so that straight-through turns, the most common on tori,
       do not crowd their channels; a tree's forwards of one turn share one of its
       lanes.
    3. ``lanes``: every other transfer goes to the least loaded lane of its link.
    """

    def __init__(self, order: Sequence[Sequence[int]]) -> None:
        self.order = order
        self.index = [{u: i for i, u in enumerate(o)} for o in order]
        self.turns = max(len(o) for o in order) - 1
        self.turn_of: list[dict[Edge3, int]] = []
        self.fused = 0
        self.lanes_of_turn: list[list[int]] = []

    def forwards(self, trees: Trees, reduce: bool) -> int:
        """Step 1 for one phase's trees; returns the number of forwards kept."""
        turn_of: dict[Edge3, int] = {}
        kept = 0
        for r, edges in enumerate(trees.edges):
            first: dict[int, tuple[int, int]] = {}    # node -> (t, child) of its earliest child edge
            tie: set[int] = set()
            for p, c, t in edges:
                cur = first.get(p)
                if cur is None or t < cur[0]:
                    first[p] = (t, c)
                    tie.discard(p)
                elif t == cur[0]:
                    tie.add(p)
            # allgather: top-down (edges come parents first); reduce-scatter: bottom-up
            for p, v, _ in (reversed(edges) if reduce else edges):
                if v not in first or v in tie:
                    continue
                c = first[v][1]
                a, b = (c, p) if reduce else (p, c)            # v receives from a, sends to b
                ia, ib = self.index[v].get(a), self.index[v].get(b)
                if ia is None or ib is None:
                    continue
                turn = (ib - ia) % len(self.order[v])
                e_in, e_out = (r, a, v), (r, v, b)
                if turn_of.get(e_in, turn) != turn or e_out in turn_of:
                    continue
                turn_of[e_in] = turn_of[e_out] = turn
                kept += 1
        self.turn_of.append(turn_of)
        self.fused += kept
        return kept

    def allot(self) -> int:
        """Step 2: lanes per turn (largest remainders, at least one each); returns the lane count."""
        demand = [0] * (self.turns + 1)
        for turn_of in self.turn_of:
            for turn in turn_of.values():
                demand[turn] += 1
        total = 2 * self.turns
        weight = sum(demand) or 1
        share = [total * d / weight for d in demand[1:]]
        count = [max(1, int(x)) for x in share]
        for k in sorted(range(self.turns), key=lambda k: (count[k] - share[k], k)):
            if sum(count) >= total:
                break
            count[k] += 1
        self.lanes_of_turn = [[]]
        start = 0
        for c in count:
            self.lanes_of_turn.append(list(range(start, start + c)))
            start += c
        return start

    def lanes(self, trees: Trees, phase: int, reduce: bool, load: dict[tuple[int, int], list[int]]
              ) -> dict[Edge3, int]:
        """Step 3 for one phase (``phase`` indexes the ``forwards`` calls); ``load`` counts
        transfers per link and lane over the phases."""
        nlanes = sum(len(x) for x in self.lanes_of_turn)
        turn_get = self.turn_of[phase].get
        of_turn = self.lanes_of_turn
        out: dict[Edge3, int] = {}
        for r, edges in enumerate(trees.edges):
            mix = (r * 2654435761 >> 11) & 0xFFFF      # decorrelates the lane from r % channel groups
            for p, c, _ in edges:
                link = (c, p) if reduce else (p, c)
                e = (r, *link)
                counts = load.get(link)
                if counts is None:
                    counts = load[link] = [0] * nlanes
                turn = turn_get(e)
                if turn is not None:
                    choices = of_turn[turn]
                    lane = choices[mix % len(choices)]
                else:
                    lane = counts.index(min(counts))
                out[e] = lane
                counts[lane] += 1
        return out

    def pairs(self) -> list[tuple[int, int, int, int]]:
        """``tb_pairs``: on every rank, lane ``l`` of turn ``k`` pairs neighbour ``i`` with ``i + k``."""
        return [(v, lane, o[i], o[(i + k) % len(o)])
                for v, o in enumerate(self.order) for k in range(1, len(o))
                for lane in self.lanes_of_turn[k] for i in range(len(o))]


