"""Multi-box GPU fabrics of the ForestColl paper (Zhao et al., arXiv 2402.06787, section 5.1).

Two families with per-link bandwidths, switch nodes and parallel links, as the
paper's schedule generator models its testbeds (see ``docs/forestcoll.md``):

* ``a100:NxM`` -- N boxes of M A100 GPUs.  Each box has one NVSwitch (300 GB/s each
  way per GPU); with N >= 2 each GPU also has its own NIC (a switch node, 25 GB/s each
  way) and the NICs of even GPUs hang off IB switch 0, those of odd GPUs off IB switch 1
  (the two NIC rails; 25 GB/s each way).  Ranks ``box*M + gpu``; switch nodes after
  the ranks: the N NVSwitches, then the NICs in rank order, then the 2 IB switches.
* ``mi250:N`` -- N boxes of 16 MI250 GCDs joined inside a box by xGMI links of 50 GB/s
  with the multiplicities of :data:`MI250_XGMI` (7 links per GCD; the two GCDs of one
  package share 4), and with N >= 2 one IB switch reached by every GCD at 16 GB/s each
  way.  ``mi250:A+B+...`` is the mixed form: box ``i`` uses GCDs ``0 .. A_i - 1`` only
  (``mi250:8+8`` is the paper's 8+8 setting, the left half of each box).  Ranks are
  numbered box by box; the IB switch is the one switch node.

* ``h100:NxM`` -- as ``a100`` with DGX H100 figures: NVLink4 NVSwitch, 450 GB/s per GPU each
  way (900 GB/s bidirectional), and 400 Gb/s NICs (50 GB/s each way).
* ``mi300x:N`` -- N boxes of 8 MI300X, fully connected inside a box by one 64 GB/s xGMI link per
  pair (7 per GPU, AMD's 896 GB/s aggregate bidirectional), and from 2 boxes a 400 Gb/s NIC per
  GPU on the two rails as in ``a100``.

The spec grammar's machine aliases stand for these (``dgx-a100[:N]`` = ``a100:Nx8``,
``dgx-h100[:N]`` = ``h100:Nx8``, ``mi300x`` = ``mi300x:1``; ``collc list topologies``).

Each box is one host (``Topology.hosts``); NVSwitch links are ``nvlink``, xGMI links ``xgmi``,
NIC and IB switch links ``net`` (docs/algorithms.md "Hosts and link kinds").

All links are bidirectional with equal bandwidth both ways, so both fabrics are
Eulerian (ingress = egress at every node), as ForestColl requires.

>>> t = a100([2, 8])
>>> t.name, t.nranks, t.nswitches, t.route(0, 2), t.route(0, 10)
('a100:2x8', 16, 20, (0, 16, 2), (0, 18, 34, 28, 10))
>>> m = mi250([16, 16])
>>> m.name, m.nranks, m.link(0, 1).multiplicity, m.link(0, 1).bandwidth, m.link(0, 32).bandwidth
('mi250:2', 32, 4, 50.0, 16.0)
>>> mi250([8, 8]).name
'mi250:8+8'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from collc.errors import TopologyError
from collc.topology.model import Link, Topology
from collc.topology.spec import register_family

__all__ = ["a100", "h100", "mi300x", "mi250", "MI250_XGMI", "NVLINK_BW", "A100_NIC_BW", "XGMI_BW", "MI250_IB_BW"]

NVLINK_BW = 300.0     # GB/s per GPU to its box's NVSwitch, each way
A100_NIC_BW = 25.0    # GB/s per NIC, each way
XGMI_BW = 50.0        # GB/s per xGMI link, each way
MI250_IB_BW = 16.0    # GB/s per GCD to the IB switch, each way
H100_NVLINK_BW = 450.0   # GB/s per H100 to its box's NVSwitch, each way (NVLink4, 900 GB/s bidirectional)
NIC_400G_BW = 50.0       # GB/s per 400 Gb/s NIC (ConnectX-7), each way
MI300X_XGMI_BW = 64.0    # GB/s per xGMI link, each way (7 per GPU: 896 GB/s bidirectional in all)
MI300X_GPUS = 8
MAX_BOXES = 512

#: xGMI links inside one MI250 box: (gcd, gcd, number of parallel links), each pair once.
MI250_XGMI: tuple[tuple[int, int, int], ...] = (
    (0, 1, 4), (0, 4, 2), (0, 8, 1), (1, 5, 1), (1, 9, 1), (1, 10, 1), (2, 3, 4), (2, 6, 1), (2, 9, 1),
    (2, 10, 1), (3, 7, 2), (3, 11, 1), (4, 5, 4), (4, 6, 1), (5, 6, 1), (5, 7, 1), (6, 7, 4), (8, 9, 4),
    (8, 12, 2), (9, 13, 1), (10, 11, 4), (10, 14, 1), (11, 15, 2), (12, 13, 4), (12, 14, 1), (13, 14, 1),
    (13, 15, 1), (14, 15, 4),
)


#: A Hamiltonian path of one box over xGMI links (the ring baseline goes box to box through IB).
MI250_PATH = (0, 4, 5, 1, 9, 8, 12, 13, 14, 15, 11, 10, 2, 3, 7, 6)


def _both(a: int, b: int, bw: float, mult: int = 1, kind: str | None = None) -> list[Link]:
    return [Link(a, b, bw, 0.0, mult, kind), Link(b, a, bw, 0.0, mult, kind)]


def a100(dims: Sequence[int]) -> Topology:
    """``dims = [boxes, gpus per box]``; see the module docstring for the numbering."""
    return _switch_boxes("a100", dims, NVLINK_BW, A100_NIC_BW)


def h100(dims: Sequence[int]) -> Topology:
    """DGX H100 boxes: as :func:`a100` with NVLink4 (18 links, 450 GB/s per GPU each way) and
    a 400 Gb/s NIC per GPU (50 GB/s each way).

    >>> t = h100([2, 8])
    >>> t.name, t.nranks, t.nswitches, t.link(0, 16).bandwidth, t.link(0, 18).bandwidth
    ('h100:2x8', 16, 20, 450.0, 50.0)
    """
    return _switch_boxes("h100", dims, H100_NVLINK_BW, NIC_400G_BW)


def _switch_boxes(family: str, dims: Sequence[int], nvswitch_bw: float, nic_bw: float) -> Topology:
    """Boxes of GPUs on one NVSwitch each and, from 2 boxes on, a NIC per GPU on two IB rails."""
    if len(dims) != 2 or any(not isinstance(d, int) or isinstance(d, bool) for d in dims):
        raise TopologyError(f"{family} needs two integers BOXESxGPUS, got {dims!r}")
    nbox, per = dims
    if not 1 <= nbox <= MAX_BOXES or not 2 <= per <= 64:
        raise TopologyError(f"{family}:{nbox}x{per}: boxes must be in 1..{MAX_BOXES} and GPUs per box in 2..64")
    n = nbox * per
    links: list[Link] = []
    for box in range(nbox):
        for g in range(per):
            links += _both(box * per + g, n + box, nvswitch_bw, kind="nvlink")
    nsw = nbox
    if nbox > 1:
        links += _rails(n, per, n + nbox, nic_bw)
        nsw = nbox + n + 2
    return Topology(f"{family}:{nbox}x{per}", n, tuple(links), nswitches=nsw,
                    params=(("boxes", str(nbox)), ("gpus", str(per))), cycle=_a100_cycle(nbox, per),
                    hosts=tuple(r // per for r in range(n)))


def _rails(n: int, per: int, nic0: int, nic_bw: float) -> list[Link]:
    """A NIC (switch node ``nic0 + rank``) per rank, those of even GPUs on IB switch
    ``nic0 + n``, of odd GPUs on ``nic0 + n + 1`` (the two rails)."""
    links: list[Link] = []
    ib0 = nic0 + n
    for r in range(n):
        links += _both(r, nic0 + r, nic_bw, kind="net")
        links += _both(nic0 + r, ib0 + (r % per) % 2, nic_bw, kind="net")
    return links


def mi300x(nbox: int) -> Topology:
    """``nbox`` boxes of 8 MI300X, each box fully connected by xGMI (7 links per GPU, one per
    peer, 64 GB/s each way: AMD's 896 GB/s aggregate bidirectional peer bandwidth); from 2
    boxes on a 400 Gb/s NIC per GPU (50 GB/s each way) on two IB rails as in :func:`a100`.
    Switch nodes after the ranks: the NICs in rank order, then the 2 IB switches.

    >>> t = mi300x(2)
    >>> t.name, t.nranks, t.nswitches, t.link(0, 7).bandwidth, t.route(0, 10)
    ('mi300x:2', 16, 18, 64.0, (0, 16, 32, 26, 10))
    """
    if isinstance(nbox, bool) or not 1 <= nbox <= MAX_BOXES:
        raise TopologyError(f"mi300x boxes must be in 1..{MAX_BOXES}, got {nbox!r}")
    per = MI300X_GPUS
    n = nbox * per
    links: list[Link] = []
    for box in range(nbox):
        for a in range(per):
            for b in range(a + 1, per):
                links += _both(box * per + a, box * per + b, MI300X_XGMI_BW, kind="xgmi")
    nsw = 0
    if nbox > 1:
        links += _rails(n, per, n, NIC_400G_BW)
        nsw = n + 2
    return Topology(f"mi300x:{nbox}", n, tuple(links), nswitches=nsw, params=(("boxes", str(nbox)),),
                    cycle=_a100_cycle(nbox, per), hosts=tuple(r // per for r in range(n)))


def _a100_cycle(nbox: int, per: int) -> tuple[int, ...] | None:
    """A ring for ``ring``: through each box over the NVSwitch, box to box between GPUs of
    the same NIC rail (alternately ascending and descending; with an odd box count the
    last box ends on an even GPU so that it returns to GPU 0 on rail 0)."""
    if nbox == 1:
        return tuple(range(per))
    order: list[int] = []
    for box in range(nbox):
        gpus = list(range(per)) if box % 2 == 0 else list(range(per - 1, -1, -1))
        if box == nbox - 1 and box % 2 == 0:
            gpus = [0] + list(range(per - 1, 0, -1)) if (per - 1) % 2 else gpus
            if gpus[-1] % 2:
                last_even = max(g for g in range(1, per) if g % 2 == 0)
                gpus = [0] + [g for g in range(1, per) if g != last_even] + [last_even]
        order += [box * per + g for g in gpus]
    return tuple(order)


def mi250(boxes: Sequence[int]) -> Topology:
    """``boxes[i]`` = GCDs used in box ``i`` (1..16, the first ones of the box)."""
    if not boxes or any(not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= 16 for b in boxes):
        raise TopologyError(f"mi250 boxes must each use 1..16 GCDs, got {list(boxes)!r}")
    if len(boxes) > MAX_BOXES:
        raise TopologyError(f"mi250: at most {MAX_BOXES} boxes, got {len(boxes)}")
    if sum(boxes) < 2:
        raise TopologyError("mi250 needs at least 2 GCDs")
    n = sum(boxes)
    links: list[Link] = []
    base = 0
    for used in boxes:
        for a, b, mult in MI250_XGMI:
            if a < used and b < used:
                links += _both(base + a, base + b, XGMI_BW, mult, "xgmi")
        base += used
    if len(boxes) > 1:
        for r in range(n):
            links += _both(r, n, MI250_IB_BW, kind="net")
    uniform = all(b == 16 for b in boxes)
    args = str(len(boxes)) if uniform else "+".join(str(b) for b in boxes)
    cycle = None
    if len(boxes) > 1:   # inside a box along xGMI links where it can, box to box through IB
        cycle = tuple(first + g for first, used in zip([sum(boxes[:i]) for i in range(len(boxes))], boxes)
                      for g in MI250_PATH if g < used)
    hosts = tuple(box for box, used in enumerate(boxes) for _ in range(used))
    return Topology(f"mi250:{args}", n, tuple(links), nswitches=1 if len(boxes) > 1 else 0,
                    params=(("boxes", args),), cycle=cycle, hosts=hosts)


def _boxes_parser(family: str, build: Callable[[Sequence[int]], Topology]) -> Callable[[str, str | None], Topology]:
    """The spec parser of a ``FAMILY:BOXESxGPUS`` fabric of NVSwitch boxes on rails (a100, h100)."""
    def parse(args: str, options: str | None) -> Topology:
        if options is not None:
            raise TopologyError(f"{family} takes no options")
        if not re.fullmatch(r"[0-9]+x[0-9]+", args):
            raise TopologyError(f"{family} arguments must be BOXESxGPUS such as 2x8, got {args!r}")
        return build([int(x) for x in args.split("x")])
    return parse


_parse_a100 = _boxes_parser("a100", a100)
_parse_h100 = _boxes_parser("h100", h100)


def _parse_mi300x(args: str, options: str | None) -> Topology:
    if options is not None:
        raise TopologyError("mi300x takes no options")
    if not re.fullmatch(r"[0-9]{1,6}", args):
        raise TopologyError(f"mi300x arguments must be a box count such as 2, got {args!r}")
    return mi300x(int(args))


def _parse_mi250(args: str, options: str | None) -> Topology:
    if options is not None:
        raise TopologyError("mi250 takes no options")
    if re.fullmatch(r"[0-9]+", args):
        return mi250([16] * int(args))
    if re.fullmatch(r"[0-9]+(\+[0-9]+)+", args):
        return mi250([int(x) for x in args.split("+")])
    raise TopologyError(f"mi250 arguments must be a box count such as 2, or GCDs per box such as 8+8, got {args!r}")


register_family("a100", _parse_a100, "N boxes of M A100s: NVSwitch 300 GB/s, a 25 GB/s NIC per GPU on 2 IB rails",
                "a100:2x8")
register_family("h100", _parse_h100, "N boxes of M H100s: NVSwitch 450 GB/s, a 50 GB/s NIC per GPU on 2 IB rails",
                "h100:2x8")
register_family("mi300x", _parse_mi300x, "N boxes of 8 MI300X, xGMI all-to-all 64 GB/s per link; from 2 boxes a "
                "50 GB/s NIC per GPU on 2 IB rails", "mi300x:2")
register_family("mi250", _parse_mi250, "N boxes of 16 MI250 GCDs (xGMI 50 GB/s links, 16 GB/s per GCD to IB); "
                "A+B uses the first A, B GCDs", "mi250:2")
