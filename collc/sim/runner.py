"""What ``collc simulate``, ``collc compare`` and ``collc tune`` do, as library functions.

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

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collc.compiler.limits import Dialect
from collc.compiler.program import Program, Proto
from collc.driver import compile_xml
from collc.errors import CollcError
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
        raise SimUsageError(f"cannot read size {text!r} (use e.g. 1048576, 64KiB, 1MiB)")
    power: int = "_KMGT".index(m.group(2).upper() or "_")
    return int(m.group(1)) * (1 << (10 * power))


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
    sizes = sorted({parse_size(x) for x in text.split(",") if x.strip()})
    if not sizes or sizes[0] < 1:
        raise SimUsageError(f"no positive sizes in {text!r}")
    return sizes


@dataclass(frozen=True)
class ModelParams:
    model: str = "event"
    alpha_us: float = 5.0
    link_bw: float | None = None       # GB/s for every link; None: the topology's own
    hop_latency_us: float = 0.0
    reduce_us_per_byte: float = 0.0

    def __post_init__(self) -> None:
        if self.model not in ("step", "event"):
            raise SimUsageError(f"unknown model {self.model!r} (step or event)")
        if self.alpha_us < 0 or self.hop_latency_us < 0 or self.reduce_us_per_byte < 0:
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
    """The runtime's selection test for a call of ``size`` bytes (msccl-runtime.md 1.5)."""
    if size % typesize:
        return False
    count = size // typesize   # count x sizeMultiplier, since size is the collective's total
    if count % max(program.nchunksperloop, 1):
        return False
    lo = program.min_bytes or 0
    hi = program.max_bytes or 0
    return size >= lo and (hi == 0 or size <= hi)


def rows_for(program: Program, sizes: Sequence[int], times: Sequence[float]) -> list[Row]:
    out = []
    for size, t in zip(sizes, times):
        algbw, busbw = bus_bandwidth(program.kind, program.ngpus, size, t)
        out.append(Row(size, t, algbw, busbw, selected(program, size)))
    return out


def human(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size}B"


# --------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class Candidate:
    algorithm: str
    params: tuple[tuple[str, str], ...] = ()
    chunks: int = 1
    instances: int = 1
    proto: Proto = Proto.SIMPLE
    topology: str = ""    # its own topology spec (same rank count), e.g. a baseline's fabric

    @property
    def label(self) -> str:
        return self._label() + (f"@{self.topology}" if self.topology else "")

    def _label(self) -> str:
        extra = [f"{k}={v}" for k, v in self.params]
        if self.chunks > 1:
            extra.append(f"chunks={self.chunks}")
        if self.instances > 1:
            extra.append(f"instances={self.instances}")
        if self.proto is not Proto.SIMPLE:
            extra.append(self.proto.value)
        return self.algorithm + (f"({','.join(extra)})" if extra else "")


@dataclass
class Comparison:
    topology: str
    kind: CollKind
    sizes: list[int]
    series: dict[str, list[Row]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    bound_busbw: list[float] = field(default_factory=list)

    def winners(self) -> list[str]:
        out = []
        for i in range(len(self.sizes)):
            best = max(self.series, key=lambda lab: (self.series[lab][i].busbw, lab))
            out.append(best)
        return out

    def to_json(self) -> dict[str, object]:
        return {"topology": self.topology, "collective": self.kind.value, "sizes": self.sizes,
                "series": {k: [r.to_json() for r in v] for k, v in self.series.items()},
                "winners": self.winners() if self.series else [], "failed": self.failed,
                "bound_busbw_GBps": [round(x, 4) for x in self.bound_busbw]}

    def table(self) -> str:
        labels = list(self.series)
        width = max([10] + [len(x) for x in labels])
        head = f"{'size':>8s}  " + "  ".join(f"{lab:>{width}s}" for lab in labels) + f"  {'bound':>8s}  winner"
        lines = [f"busbw in GB/s ({self.kind.value} on {self.topology})", head, "-" * len(head)]
        for i, size in enumerate(self.sizes):
            cells = "  ".join(f"{self.series[lab][i].busbw:>{width}.3f}" for lab in labels)
            lines.append(f"{human(size):>8s}  {cells}  {self.bound_busbw[i]:>8.3f}  {self.winners()[i]}")
        for lab, why in self.failed.items():
            lines.append(f"not compared: {lab}: {why}")
        return "\n".join(lines)


def compare(topology: Topology, kind: CollKind, candidates: Sequence[Candidate], sizes: Sequence[int],
            params: ModelParams, inplace: bool | None = None, root: int | None = None,
            progress: Callable[[str], None] | None = None) -> Comparison:
    """Build every candidate (checked) and simulate it over the sizes."""
    result = Comparison(topology.name, kind, list(sizes))
    for cand in candidates:
        if progress:
            progress(cand.label)
        try:
            own = parse_spec(cand.topology) if cand.topology else topology
            if own.nranks != topology.nranks:
                raise SimUsageError(f"{own.name} has {own.nranks} ranks, {topology.name} {topology.nranks}")
            # only the timing is wanted: from 1024 ranks on, check the program as per-rank
            # files (what such a job must use: one file cannot hold its ranks' XML nodes)
            built = compile_xml(own, cand.algorithm, kind, inplace=inplace, root=root, params=dict(cand.params),
                                chunks=cand.chunks, instances=cand.instances, proto=cand.proto,
                                shard=topology.nranks >= 1024)
        except CollcError as exc:
            result.failed[cand.label] = str(exc)
            continue
        if not built.report.ok:
            result.failed[cand.label] = built.report.errors()[0].message
            continue
        times = time_program(built.program, own, sizes, params)
        result.series[cand.label] = rows_for(built.program, sizes, times)
    if not result.series:
        raise SimUsageError("no candidate could be built: " + "; ".join(f"{k}: {v}" for k, v in result.failed.items()))
    result.bound_busbw = bound_busbw(kind, topology, sizes, params)
    return result


def bound_busbw(kind: CollKind, topology: Topology, sizes: Sequence[int], params: ModelParams) -> list[float]:
    """The busbw no schedule can beat (from ``lower_bounds``) at each size."""
    out = []
    for size in sizes:
        b = lower_bounds(kind, topology, size, params.alpha_us, params.link_bw)
        out.append(bus_bandwidth(kind, topology.nranks, size, b.total_us)[1])
    return out


def plot_busbw(comparison: Comparison, path: str | Path) -> None:
    """busbw against message size, log-x, one line per candidate, like the papers' figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for label, rows in comparison.series.items():
        ax.plot([r.size for r in rows], [r.busbw for r in rows], marker="o", markersize=3, label=label)
    ax.plot(comparison.sizes, comparison.bound_busbw, linestyle="--", color="grey", label="lower bound")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{comparison.kind.value} on {comparison.topology}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = Path(str(path) + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


# --------------------------------------------------------------------------- tune
@dataclass(frozen=True)
class Window:
    candidate: str
    min_bytes: int
    max_bytes: int          # 0: no upper limit
    sizes: tuple[int, ...]
    busbw: tuple[float, ...]
    file: str


def windows_from(comparison: Comparison) -> list[tuple[str, int, int, list[int]]]:
    """Runs of consecutive sizes with the same winner, tiling [0, inf) without overlap."""
    winners = comparison.winners()
    runs: list[tuple[str, list[int]]] = []
    for size, win in zip(comparison.sizes, winners):
        if runs and runs[-1][0] == win:
            runs[-1][1].append(size)
        else:
            runs.append((win, [size]))
    out = []
    for i, (win, sizes) in enumerate(runs):
        lo = 0 if i == 0 else sizes[0]
        hi = 0 if i == len(runs) - 1 else runs[i + 1][1][0] - 1
        out.append((win, lo, hi, sizes))
    return out


def tune(topology: Topology, kind: CollKind, candidates: Sequence[Candidate], sizes: Sequence[int],
         params: ModelParams, out: Path, dialect: Dialect = Dialect.EXECUTOR, inplace: bool | None = None,
         root: int | None = None, progress: Callable[[str], None] | None = None) -> list[Window]:
    """Pick the best candidate per size, write one checked XML per window and a manifest.

    ``out/msccl-algorithms/`` holds only the XMLs (point MSCCL_ALGO_DIR there);
    ``out/MANIFEST.json`` lists the windows and the predicted busbw.
    """
    comparison = compare(topology, kind, candidates, sizes, params, inplace, root, progress)
    by_label = {c.label: c for c in candidates}
    algo_dir = out / "msccl-algorithms"
    if algo_dir.exists() and any(p.suffix != ".xml" for p in algo_dir.iterdir()):
        raise SimUsageError(f"{algo_dir} holds files other than XML; choose another -o")
    texts: dict[str, str] = {}
    windows: list[Window] = []
    for n, (label, lo, hi, run) in enumerate(windows_from(comparison)):
        cand = by_label[label]
        built = compile_xml(topology, cand.algorithm, kind, inplace=inplace, root=root, params=dict(cand.params),
                            chunks=cand.chunks, instances=cand.instances, proto=cand.proto, dialect=dialect,
                            min_bytes=lo, max_bytes=hi, name=f"{cand.algorithm}-w{n}")
        if not built.report.ok:
            raise SimUsageError(f"window {human(lo)}..{human(hi) if hi else 'inf'} ({label}) fails its check at "
                                f"its largest size: {built.report.errors()[0].message}")
        fname = f"{n:02d}-{kind.value}-{re.sub(r'[^A-Za-z0-9_.=-]+', '_', label)}.xml"
        texts[fname] = built.text
        rows = comparison.series[label]
        busbw = tuple(r.busbw for r in rows if r.size in run)
        windows.append(Window(label, lo, hi, tuple(run), busbw, fname))
    algo_dir.mkdir(parents=True, exist_ok=True)
    for stale in algo_dir.glob("*.xml"):
        stale.unlink()
    for fname, text in texts.items():
        (algo_dir / fname).write_text(text, encoding="ascii")
    manifest = {"topology": topology.name, "collective": kind.value, "model": params.model,
                "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw,
                "windows": [{"file": f"msccl-algorithms/{w.file}", "candidate": w.candidate,
                             "minBytes": w.min_bytes, "maxBytes": w.max_bytes, "sizes": list(w.sizes),
                             "predicted_busbw_GBps": [round(x, 4) for x in w.busbw]} for w in windows],
                "not_compared": comparison.failed}
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return windows
