"""Compare and tune: build candidate schedules, time them, pick one per size window.

What ``collc compare`` and ``collc tune`` do, as library functions.  They sit above the
driver (they build and check programs) and the simulator (:mod:`collc.sim.runner`
times them), so the timing library never imports the compiler's driver.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collc.compiler.limits import Dialect
from collc.compiler.program import Proto
from collc.driver import compile_xml
from collc.errors import CollcError
from collc.inputs import output_dir
from collc.ir.collective import CollKind
from collc.outputs import discard, new_temp_dir, publish_dir, signals_blocked, write_file, write_into
from collc.sim.plot import busbw_figure, save_busbw_figure
from collc.sim.runner import ModelParams, Row, SimUsageError, bound_busbw, human, rows_for, time_program
from collc.topology import Topology, parse_spec


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


def plot_busbw(comparison: Comparison, path: str | Path) -> None:
    """busbw against message size, log-x, one line per candidate, like the papers' figures."""
    fig, ax = busbw_figure()
    for label, rows in comparison.series.items():
        ax.plot([r.size for r in rows], [r.busbw for r in rows], marker="o", markersize=3, label=label)
    ax.plot(comparison.sizes, comparison.bound_busbw, linestyle="--", color="grey", label="lower bound")
    save_busbw_figure(fig, ax, f"{comparison.kind.value} on {comparison.topology}", path)


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
    manifest = {"topology": topology.name, "collective": kind.value, "model": params.model,
                "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw,
                "windows": [{"file": f"msccl-algorithms/{w.file}", "candidate": w.candidate,
                             "minBytes": w.min_bytes, "maxBytes": w.max_bytes, "sizes": list(w.sizes),
                             "predicted_busbw_GBps": [round(x, 4) for x in w.busbw]} for w in windows],
                "not_compared": comparison.failed}
    _write_tuned(out, texts, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return windows


def _write_tuned(out: Path, texts: dict[str, str], manifest: str) -> None:
    """``out/msccl-algorithms/*.xml`` and ``out/MANIFEST.json``, each set replaced as a whole: the
    new XML directory is built under a hidden name and swapped in (``collc.outputs``)."""
    output_dir(out)
    if not out.exists():
        tmp = new_temp_dir(out)
        try:
            os.mkdir(tmp / "msccl-algorithms", 0o777)
            for fname, text in texts.items():
                write_into(tmp / "msccl-algorithms", fname, text)
            write_into(tmp, "MANIFEST.json", manifest)
        except BaseException:
            discard(tmp)
            raise
        publish_dir(tmp, out, replace=False)
        return
    algo_dir = out / "msccl-algorithms"
    tmp = new_temp_dir(algo_dir)
    try:
        for fname, text in texts.items():
            write_into(tmp, fname, text)
    except BaseException:
        discard(tmp)
        raise
    with signals_blocked():     # the XMLs and their manifest change together
        publish_dir(tmp, algo_dir, replace=True)
        write_file(out / "MANIFEST.json", manifest)
