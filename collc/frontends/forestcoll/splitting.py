"""Switch removal by edge splitting (ForestColl section 4.3, appendix C.2, Theorems 6-8).

At switch ``w`` a split takes ``gamma`` units of ``(u, w)`` and of ``(w, t)`` and adds
``gamma`` units of a direct edge ``(u, t)`` (dropped when ``u == t``).  Theorem 8 gives
the largest ``gamma`` that keeps ``min_v F(s, v) >= N k``::

    gamma = min(c(u,w), c(w,t), min_v F(u, w; H1_v) - N k, min_v F(w, t; H2_v) - N k)

with ``H1_v`` = G_k plus infinite edges (u,s), (u,t), (v,w) and ``H2_v`` = G_k plus
infinite edges (w,s), (u,t), (v,t).  Before evaluating the formula we try the whole
``min(c(u,w), c(w,t))`` with one Theorem 1 test (N max-flows instead of 2N), since the
admissible amounts form an interval ``[0, gamma]``.  Before either, the whole switch
is split at once along the preference order below and kept if one Theorem 1 test on
the result admits it (the packing needs only ``min_v F(s, v) >= N k`` at the end): on
the paper's fabrics every switch goes in one test.

Switches go in increasing degree (NICs before the switches they feed); at a switch
the egress edges go in ascending order and, for each, the ingress edges whose tail is
farthest from ``t`` in the fabric without ``w`` come first (the paper's Fig. 13
preference for the other cluster, so an IB switch carries inter-box pairs; ties by
``(u - t) mod nodes``, which spreads each box's ingress over the other boxes instead of
draining one box first; ``u == t`` last).  Every unit of a logical edge remembers the physical path
it stands for (``paths``), so trees map back to links exactly.

>>> from collc.topology import parse_spec
>>> from collc.frontends.forestcoll.flow import Network, optimal
>>> net = Network.of(parse_spec("a100:2x8"))
>>> opt = optimal(net)
>>> logical = split_switches(net, opt.scaled(net), opt.k)
>>> sorted(logical.cap.items())[:3]
[((0, 7), 180), ((0, 8), 15), ((1, 0), 180)]
>>> logical.paths[(0, 8)]
[((0, 18, 34, 26, 8), 15)]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from collc.errors import ScheduleError
from collc.frontends.forestcoll.flow import Edge, FlowNet, Network, source_net

__all__ = ["Logical", "split_switches"]

Path = tuple[int, ...]
Units = list[tuple[Path, int]]   # physical paths with the units of capacity they carry


@dataclass
class Logical:
    """The switch-free graph on the ranks: capacities and their physical paths."""

    nranks: int
    cap: dict[Edge, int]
    paths: dict[Edge, Units]


def _take(units: Units, amount: int) -> Units:
    """Remove ``amount`` units from the front of ``units`` (in place) and return them."""
    out: Units = []
    while amount > 0:
        path, have = units[0]
        use = min(have, amount)
        out.append((path, use))
        amount -= use
        if use == have:
            units.pop(0)
        else:
            units[0] = (path, have - use)
    return out


def _join(first: Units, second: Units) -> Units:
    """Pair units of two equal-size lists into concatenated paths."""
    out: Units = []
    a, b = list(first), list(second)
    while a:
        (pa, na), (pb, nb) = a[0], b[0]
        use = min(na, nb)
        path = pa + pb[1:]
        if out and out[-1][0] == path:
            out[-1] = (path, out[-1][1] + use)
        else:
            out.append((path, use))
        a[0], b[0] = (pa, na - use), (pb, nb - use)
        if a[0][1] == 0:
            a.pop(0)
        if b[0][1] == 0:
            b.pop(0)
    return out


def _distances(net: Network, without: int, start: int) -> dict[int, int]:
    adj: dict[int, list[int]] = {}
    for a, b in net.cap:
        adj.setdefault(a, []).append(b)
    dist = {start: 0}
    todo = deque([start])
    while todo:
        u = todo.popleft()
        for v in adj.get(u, ()):
            if v != without and v not in dist:
                dist[v] = dist[u] + 1
                todo.append(v)
    return dist


class _Splitter:
    def __init__(self, net: Network, caps: dict[Edge, int], k: int) -> None:
        self.net = net
        self.k = k
        self.cap = {e: c for e, c in caps.items() if c > 0}
        self.paths: dict[Edge, Units] = {e: [((e[0], e[1]), c)] for e, c in self.cap.items()}
        self.s = net.nnodes
        self.need = net.nranks * k
        self.big = sum(self.cap.values()) + k * net.nranks + 1
        self.evaluations = 0   # Theorem 1 tests and gamma formulas evaluated (for benchmarks)
        g = source_net(net, self.cap, k)
        self.slack = [f - self.need for f in g.flows(self.s, range(net.nranks))]
        if min(self.slack) < 0:
            raise ScheduleError(f"forestcoll: the scaled fabric does not hold k={k} trees per root "
                                f"(rank {self.slack.index(min(self.slack))})")
        self.pending: tuple[int, dict[int, int]] | None = None

    def _net(self, extra: tuple[Edge, ...]) -> FlowNet:
        return source_net(self.net, self.cap, self.k, extra)

    def _flows_after(self, u: int, w: int, t: int, amount: int, ranks: list[int]) -> dict[int, int] | None:
        """``F(s, v) - N k`` after the split for ``ranks``, or None when one drops below 0."""
        cap = dict(self.cap)
        cap[(u, w)] -= amount
        cap[(w, t)] -= amount
        if u != t:
            cap[(u, t)] = cap.get((u, t), 0) + amount
        g = source_net(self.net, {e: c for e, c in cap.items() if c > 0}, self.k)
        out = {v: f - self.need for v, f in zip(ranks, g.flows(self.s, ranks))}
        return None if any(f < 0 for f in out.values()) else out

    def gamma(self, u: int, w: int, t: int) -> int:
        """Theorem 8's maximal split of (u, w), (w, t).

        ``slack[v]`` is a lower bound on ``F(s, v) - N k``: a split of g lowers every cut,
        hence every ``F(s, v)``, by at most g, so only ranks whose slack is below the
        amount need a max-flow to admit the whole ``min(c(u,w), c(w,t))``.
        """
        self.evaluations += 1
        most = min(self.cap[(u, w)], self.cap[(w, t)])
        tight = [v for v in range(self.net.nranks) if self.slack[v] < most]
        exact = self._flows_after(u, w, t, most, tight)
        if exact is not None:
            self.pending = (most, exact)
            return most
        s, n, big = self.s, self.net.nranks, self.big
        h1 = self._net(((u, s), (u, t)) + tuple((v, w) for v in range(n)))
        h1.put((u, s), big)
        h1.put((u, t), big + self.cap.get((u, t), 0))
        for v in range(n):
            if v in (u, t):
                continue
            h1.put((v, w), big + self.cap.get((v, w), 0))
            most = min(most, h1.flow(u, w) - self.need)
            h1.put((v, w), self.cap.get((v, w), 0))
            if most <= 0:
                return 0
        h2 = self._net(((w, s), (u, t)) + tuple((v, t) for v in range(n) if v != t))
        h2.put((w, s), big)
        h2.put((u, t), big + self.cap.get((u, t), 0))
        for v in range(n):
            if v != t and v != u:
                h2.put((v, t), big + self.cap.get((v, t), 0))
            most = min(most, h2.flow(w, t) - self.need)
            if v != t and v != u:
                h2.put((v, t), self.cap.get((v, t), 0))
            if most <= 0:
                return 0
        return max(most, 0)

    def split(self, u: int, w: int, t: int, amount: int) -> None:
        exact: dict[int, int] = {}
        if self.pending is not None and self.pending[0] == amount:
            exact = self.pending[1]
        self.pending = None
        self.slack = [exact[v] if v in exact else self.slack[v] - amount for v in range(self.net.nranks)]
        for e in ((u, w), (w, t)):
            self.cap[e] -= amount
        first = _take(self.paths[(u, w)], amount)
        second = _take(self.paths[(w, t)], amount)
        for e in ((u, w), (w, t)):
            if self.cap[e] == 0:
                del self.cap[e]
                del self.paths[e]
        if u == t:
            return   # a self-loop carries nothing
        self.cap[(u, t)] = self.cap.get((u, t), 0) + amount
        self.paths.setdefault((u, t), []).extend(_join(first, second))

    def splice(self, w: int) -> bool:
        """A switch between exactly two nodes a, b with c(a,w) = c(w,b) and c(b,w) = c(w,a)
        becomes direct edges: every cut keeps its value with w on the better side, so
        no F(s, v) drops and no max-flow is needed (a NIC or PCIe hop)."""
        ins = sorted(a for a, b in self.cap if b == w)
        outs = sorted(b for a, b in self.cap if a == w)
        if len(ins) != 2 or ins != outs:
            return False
        a, b = ins
        if self.cap[(a, w)] != self.cap[(w, b)] or self.cap[(b, w)] != self.cap[(w, a)]:
            return False
        for u, t in ((a, b), (b, a)):
            amount = self.cap[(u, w)]
            self.pending = None
            self.split(u, w, t, amount)
            self.slack = [x + amount for x in self.slack]   # the cuts did not drop (see above)
        return True

    def _order(self, w: int) -> dict[int, list[int]]:
        """For each egress (w, t): the ingress tails in the order splits try them."""
        far = {u: _distances(self.net, w, u) for u in sorted({a for a, b in self.cap if b == w})}
        ins = sorted(far)
        return {t: sorted(ins, key=lambda u: (u == t, -far[u].get(t, 1 << 30), (u - t) % self.net.nnodes))
                for t in sorted({b for a, b in self.cap if a == w})}

    def _batch(self, w: int, order: dict[int, list[int]]) -> bool:
        """Split all of w at once along the preference order (no u == t) if one Theorem 1
        test on the result admits it: the invariant min_v F(s, v) >= N k is all the
        packing needs, so a batch is as good as the same splits one by one."""
        left_in = {u: self.cap[(u, w)] for u in order[next(iter(order))]} if order else {}
        plan: list[tuple[int, int, int]] = []
        for t, tails in order.items():
            need = self.cap[(w, t)]
            for u in tails:
                if need == 0:
                    break
                take = min(need, left_in.get(u, 0))
                if take > 0 and u != t:
                    plan.append((u, t, take))
                    left_in[u] -= take
                    need -= take
        if not plan:
            return False
        cap = dict(self.cap)
        for u, t, a in plan:
            cap[(u, w)] -= a
            cap[(w, t)] -= a
            cap[(u, t)] = cap.get((u, t), 0) + a
        self.evaluations += 1
        g = source_net(self.net, {e: c for e, c in cap.items() if c > 0}, self.k)
        exact = [f - self.need for f in g.flows(self.s, range(self.net.nranks))]
        if min(exact) < 0:
            return False
        for u, t, a in plan:
            self.pending = None
            self.split(u, w, t, a)
        self.slack = exact
        return True

    def remove(self, w: int) -> None:
        if self.splice(w):
            return
        order = self._order(w)
        if not self._batch(w, order):
            for t, tails in order.items():
                for u in tails:
                    if (w, t) not in self.cap:
                        break
                    if (u, w) not in self.cap:
                        continue
                    g = self.gamma(u, w, t)
                    if g > 0:
                        self.split(u, w, t, g)
        else:
            for t, tails in order.items():   # what the batch left (only u == t pairs remained)
                for u in tails:
                    if (w, t) in self.cap and (u, w) in self.cap:
                        g = self.gamma(u, w, t)
                        if g > 0:
                            self.split(u, w, t, g)
        left = [e for e in self.cap if w in e]
        if left:   # pragma: no cover - Theorem 7 guarantees isolation
            raise ScheduleError(f"forestcoll: edge splitting left switch {w} with edges {sorted(left)[:4]}")


def split_switches(net: Network, caps: dict[Edge, int], k: int) -> Logical:
    """Remove every switch of ``net`` (capacities ``caps``, k trees per root)."""
    sp = _Splitter(net, caps, k)
    degree = {w: len({b for a, b in sp.cap if a == w} | {a for a, b in sp.cap if b == w})
              for w in range(net.nranks, net.nnodes)}
    for w in sorted(degree, key=lambda x: (degree[x], x)):
        sp.remove(w)
    return Logical(net.nranks, sp.cap, sp.paths)
