"""Timing a Program on a Topology: what ``collc simulate`` does, as library functions
(``collc compare`` and ``collc tune``, which build programs, are in :mod:`collc.tuning`).

Models (``ModelParams.model``):

* ``step``: the alpha-beta model of the papers on the program's recovered rounds
  (``collc.sim.lockstep``): per round alpha plus the busiest link's bytes/bandwidth.
* ``event``: the timed executor (``collc.sim.event``): threadblocks, dependencies,
  bounded FIFOs, the runtime's slicing, max-min fair sharing of links.

Protocols change two things, taken from NCCL's own tuning model for NVLink rings
(an assumption of ours, stated so that it can be disputed): the per-message latency
(Simple 1, LL128 1.9/3.4, LL 0.6/3.4 of ``alpha``) and the share of link bandwidth
that carries data (Simple 1, LL128 120/128, LL 1/2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collc.compiler.msccl.program import Program, Proto
from collc.errors import CollcError
from collc.inputs import INT64_MAX, MAX_SIZES, one_line
from collc.ir.collective import CollKind
from collc.sim.analysis import bus_bandwidth, lower_bounds
from collc.sim.lockstep import program_step_times
from collc.sim.routing import Router
from collc.topology import Topology, parse_spec

PROTO_ALPHA = {Proto.SIMPLE: 1.0, Proto.LL128: 1.9 / 3.4, Proto.LL: 0.6 / 3.4}
PROTO_BW = {Proto.SIMPLE: 1.0, Proto.LL128: 120 / 128, Proto.LL: 0.5}
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(i?)B?\Z", re.IGNORECASE)


class SimUsageError(CollcError):
    """Bad simulation parameters."""


def parse_size(text: str) -> int:
    """'4096', '64KiB', '1MB', '2G' -> bytes (K/M/G/T are powers of 1024, as nccl-tests reads them)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise SimUsageError(f"cannot read size {one_line(repr(text), 60)} (use e.g. 1048576, 64KiB, 1MiB)")
    power: int = "_KMGT".index(m.group(2).upper() or "_")
    if len(m.group(1).lstrip("0")) > 19:    # beyond int64 whatever the unit (and int() stays cheap)
        raise SimUsageError(f"size {one_line(text.strip(), 40)} is beyond int64 (at most {INT64_MAX} bytes)")
    value = int(m.group(1)) * (1 << (10 * power))
    if value > INT64_MAX:
        raise SimUsageError(f"size {text.strip()} is beyond int64 (at most {INT64_MAX} bytes)")
    return value


def parse_sizes(text: str) -> list[int]:
    """'1KiB:1GiB' -> powers of two from 1 KiB to 1 GiB; 'a,b,c' -> those sizes."""
    if ":" in text:
        lo_s, hi_s = text.split(":", 1)
        lo, hi = parse_size(lo_s), parse_size(hi_s)
        if lo < 1 or hi < lo:
            raise SimUsageError(f"size range {text!r} must go from a positive size up")
        out = []
        size = lo
        while size <= hi:
            out.append(size)
            size *= 2
        return out
    items = [x for x in text.split(",") if x.strip()]
    if len(items) > MAX_SIZES:
        raise SimUsageError(f"{len(items)} sizes: at most {MAX_SIZES} per run")
    sizes = sorted({parse_size(x) for x in items})
    if not sizes or sizes[0] < 1:
        raise SimUsageError(f"no positive sizes in {one_line(repr(text), 60)}")
    return sizes


#: Default cost of one port-channel request to the MSCCL++ proxy (us; ``collc.sim.plan_event``): an
#: assumption of ours, of the order a proxy thread needs to pop a FIFO trigger and post an RDMA work
#: request; ``--proxy-cost`` changes it.  MSCCL XML programs have no proxy and ignore it.
PROXY_US = 1.0


@dataclass(frozen=True)
class ModelParams:
    model: str = "event"
    alpha_us: float = 5.0
    link_bw: float | None = None       # GB/s for every link; None: the topology's own
    hop_latency_us: float = 0.0
    reduce_us_per_byte: float = 0.0
    proxy_us: float = PROXY_US         # MSCCL++ plans: per port-channel request

    def __post_init__(self) -> None:
        if self.model not in ("step", "event"):
            raise SimUsageError(f"unknown model {self.model!r} (step or event)")
        if self.alpha_us < 0 or self.hop_latency_us < 0 or self.reduce_us_per_byte < 0 or self.proxy_us < 0:
            raise SimUsageError("latencies and costs must be >= 0")
        if self.link_bw is not None and self.link_bw <= 0:
            raise SimUsageError("--link-bw must be positive")


@dataclass(frozen=True)
class Row:
    size: int
    time_us: float
    algbw: float
    busbw: float
    selected: bool    # would the runtime pick this file at this size (window, divisibility)?

    def to_json(self) -> dict[str, object]:
        return {"size": self.size, "time_us": round(self.time_us, 4), "algbw_GBps": round(self.algbw, 4),
                "busbw_GBps": round(self.busbw, 4), "selected": self.selected}


def time_program(program: Program, topology: Topology, sizes: Sequence[int], params: ModelParams,
                 progress: Callable[[int, int], None] | None = None) -> list[float]:
    """Completion time (us) of the program at each size under the chosen model.

    The protocol's data efficiency scales ``--link-bw`` when given; otherwise (links keep
    their own bandwidths) it is applied as the equivalent larger payload, which also
    shifts the runtime's slicing slightly: an approximation.
    """
    if topology.nranks != program.ngpus:
        raise SimUsageError(f"the program has {program.ngpus} ranks but {topology.name} has {topology.nranks}")
    router = Router(topology)
    alpha = params.alpha_us * PROTO_ALPHA[program.proto]
    eff = PROTO_BW[program.proto]
    if params.link_bw is None:
        scaled, bw = [s / eff for s in sizes], None
    else:
        scaled, bw = [float(s) for s in sizes], params.link_bw * eff
    if params.model == "step":
        times = program_step_times(program, topology, scaled, alpha, hop_latency_us=params.hop_latency_us,
                                   bandwidth=bw, router=router)
        if progress:
            progress(len(sizes), len(sizes))
        return times
    from collc.sim.event import simulate_program  # the event model is the heavier import

    results = simulate_program(program, topology, [max(1, round(x)) for x in scaled], alpha_us=alpha, link_bw=bw,
                               hop_latency_us=params.hop_latency_us,
                               reduce_us_per_byte=params.reduce_us_per_byte, router=router, progress=progress)
    return [r.time_us for r in results]


def selected(program: Program, size: int, typesize: int = 4) -> bool:
    """The runtime's selection test for a call of ``size`` bytes (docs/runtime-model.md)."""
    if size % typesize:
        return False
    count = size // typesize   # count x sizeMultiplier, since size is the collective's total
    if count % max(program.nchunksperloop, 1):
        return False
    lo = program.min_bytes or 0
    hi = program.max_bytes or 0
    return size >= lo and (hi == 0 or size <= hi)


def count_multiple(program: Program) -> int:
    """What the element count of a call must be a multiple of for the runtime to pick the file:
    the count times the size multiplier (``ngpus`` for allgather, reducescatter and alltoall, else
    1) must be a multiple of ``nchunksperloop`` (docs/runtime-model.md, "Selection and placement").
    The count is the call's own: sendcount for allgather, recvcount for reducescatter."""
    mult = program.ngpus if program.kind in (CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL) else 1
    loop = max(program.nchunksperloop, 1)
    return loop // math.gcd(loop, mult)


def rows_for(program: Program, sizes: Sequence[int], times: Sequence[float]) -> list[Row]:
    out = []
    for size, t in zip(sizes, times):
        algbw, busbw = bus_bandwidth(program.kind, program.ngpus, size, t)
        out.append(Row(size, t, algbw, busbw, selected(program, size)))
    return out


def human(size: int) -> str:
    """``8B``, ``1KiB``, ``8GiB``: the size as nccl-tests users write it."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size}B"


def bound_busbw(kind: CollKind, topology: Topology, sizes: Sequence[int], params: ModelParams) -> list[float]:
    """The busbw no schedule can beat (from ``lower_bounds``) at each size."""
    out = []
    for size in sizes:
        b = lower_bounds(kind, topology, size, params.alpha_us, params.link_bw)
        out.append(bus_bandwidth(kind, topology.nranks, size, b.total_us)[1])
    return out
