"""``collc bench report``: one table per size from a schedule run, its baseline and collc's prediction.

Per message size and placement the report gives the measured busbw of the schedule
run, of the MSCCL-off baseline and collc's simulated busbw for the XML the runtime
would select, and which path ran: ``MSCCL`` when the log shows MSCCL kernels at that
size (``MSCCL: Setup Kernel finished``) and an XML of the set matches the call
(collective, ngpus, placement, ``minBytes <= size <= maxBytes``, ``nchunksperloop``
divides the element count, the executor's rule); ``NCCL`` when no XML matches or the
log proves MSCCL did not run; ``MSCCL?`` when an XML matches but the log has no
``NCCL_DEBUG=INFO`` lines to prove it.  Written as CSV, JSON and a PNG plot of busbw
against size whose markers say which path ran.

>>> from collc.runtime_tests.report import Selection
>>> Selection("a.xml", "allreduce", 8, 8, True, False, 0, 0).matches("allreduce", 8, 1024, 4, "in-place")
True
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collc.compiler.msccl.program import Program
from collc.errors import CollcError
from collc.runtime_tests.parse import TYPE_SIZES, BenchLog, Row, parse_file

__all__ = ["Selection", "ReportRow", "build_report", "add_report_arguments", "report_command"]

_MULT = {"allgather": True, "reducescatter": True, "alltoall": True}


class ReportError(CollcError):
    """Bad ``collc bench report`` input."""


@dataclass(frozen=True)
class Selection:
    """The header fields the runtime selects on."""

    path: str
    coll: str
    ngpus: int
    nchunksperloop: int
    inplace: bool
    outofplace: bool
    min_bytes: int
    max_bytes: int

    @staticmethod
    def of(path: str, p: Program) -> Selection:
        out = bool(p.outofplace) if p.outofplace is not None else not p.inplace
        return Selection(path, p.coll, p.ngpus, p.nchunksperloop, bool(p.inplace), out, p.min_bytes or 0,
                         p.max_bytes or 0)

    def matches(self, coll: str, nranks: int, size: int, typesize: int, placement: str) -> bool:
        """The executor's test (docs/runtime-model.md) for a call of ``size`` bytes
        (the nccl-tests size column: count x typesize x sizeMultiplier)."""
        if coll != self.coll or nranks != self.ngpus or size % typesize:
            return False
        if not (self.inplace if placement == "in-place" else self.outofplace):
            return False
        if (size // typesize) % max(self.nchunksperloop, 1):
            return False
        return size >= self.min_bytes and (self.max_bytes == 0 or size <= self.max_bytes)


@dataclass(frozen=True)
class ReportRow:
    size: int
    placement: str
    xml: str | None            # the file the runtime selects (first in sorted path order)
    path: str                  # MSCCL, MSCCL?, NCCL
    busbw: float | None
    baseline_busbw: float | None
    predicted_busbw: float | None
    wrong: int | None
    baseline_wrong: int | None

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "placement": self.placement, "xml": self.xml, "path": self.path,
                "busbw": self.busbw, "baseline_busbw": self.baseline_busbw,
                "predicted_busbw": self.predicted_busbw, "wrong": self.wrong, "baseline_wrong": self.baseline_wrong}


def _programs(paths: list[str]) -> list[tuple[str, Program]]:
    from collc.backends.msccl_xml import read_xml
    from collc.backends.shards import is_shard_dir, read_shards

    out: list[tuple[str, Program]] = []
    for raw in paths:
        p = Path(raw)
        if is_shard_dir(p):
            out.append((str(p), read_shards(p).program))
        elif p.is_dir():
            out.extend((str(q), read_xml(q).program) for q in sorted(p.iterdir()) if q.suffix == ".xml")
        elif p.is_file():
            out.append((str(p), read_xml(p).program))
        else:
            raise ReportError(f"{p}: no such file or directory")
    return sorted(out, key=lambda x: x[0])   # the executor picks the first match in sorted path order


def build_report(run: BenchLog, baseline: BenchLog | None, programs: list[tuple[str, Program]],
                 predicted: dict[str, dict[int, float]] | None = None) -> list[ReportRow]:
    """Rows per size and placement; ``predicted[xml][size]`` is collc's busbw for that file."""
    sels = [(Selection.of(path, p), p) for path, p in programs]
    n = run.nranks or (sels[0][1].ngpus if sels else 0)
    base: dict[tuple[int, str], Row] = {}
    if baseline is not None:
        base = {(r.size, r.placement): r for r in baseline.rows}
    out: list[ReportRow] = []
    for r in sorted(run.rows, key=lambda x: (x.size, x.placement != "out-of-place")):
        ts = TYPE_SIZES.get(r.dtype, 4)
        xml = next((s.path for s, _ in sels if s.matches(run.collective, n, r.size, ts, r.placement)), None)
        launched = run.launches.get(r.size, 0) > 0
        if xml is None:
            path = "NCCL"
        elif launched:
            path = "MSCCL"
        elif run.verdict.status == "not-ran" or (run.verdict.status == "ran" and not launched):
            path = "NCCL"
        else:
            path = "MSCCL?"
        b = base.get((r.size, r.placement))
        pred = predicted.get(xml, {}).get(r.size) if (predicted and xml) else None
        out.append(ReportRow(r.size, r.placement, xml, path, r.busbw, b.busbw if b else None, pred, r.wrong,
                             b.wrong if b else None))
    return out


def to_csv(rows: list[ReportRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["size", "placement", "path", "xml", "busbw_GBps", "baseline_busbw_GBps", "predicted_busbw_GBps",
                "wrong", "baseline_wrong"])
    for r in rows:
        w.writerow([r.size, r.placement, r.path, r.xml or "", _cell(r.busbw), _cell(r.baseline_busbw),
                    _cell(r.predicted_busbw), "" if r.wrong is None else r.wrong,
                    "" if r.baseline_wrong is None else r.baseline_wrong])
    return buf.getvalue()


def _cell(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def _f(x: float | None) -> float:
    return float("nan") if x is None else x


def plot(rows: list[ReportRow], title: str, path: str | Path) -> None:
    """busbw against size: ours (filled where MSCCL ran, hollow where NCCL ran), baseline, prediction."""
    from collc.sim.plot import busbw_figure, save_busbw_figure

    fig, ax = busbw_figure()
    for placement, color in (("out-of-place", "tab:blue"), ("in-place", "tab:orange")):
        rs = [r for r in rows if r.placement == placement and r.busbw is not None]
        if not rs:
            continue
        ax.plot([r.size for r in rs], [_f(r.busbw) for r in rs], color=color, label=f"ours ({placement})")
        ms = [r for r in rs if r.path == "MSCCL"]
        unsure = [r for r in rs if r.path == "MSCCL?"]
        nc = [r for r in rs if r.path == "NCCL"]
        ax.scatter([r.size for r in ms], [_f(r.busbw) for r in ms], color=color, marker="o", s=18, zorder=3)
        ax.scatter([r.size for r in unsure], [_f(r.busbw) for r in unsure], color=color, marker="^", s=18, zorder=3)
        ax.scatter([r.size for r in nc], [_f(r.busbw) for r in nc], facecolors="none", edgecolors=color, marker="o",
                   s=18, zorder=3)
        bs = [r for r in rs if r.baseline_busbw is not None]
        if bs:
            ax.plot([r.size for r in bs], [_f(r.baseline_busbw) for r in bs], color=color, linestyle=":",
                    label=f"NCCL baseline ({placement})")
        ps = [r for r in rs if r.predicted_busbw is not None]
        if ps:
            ax.plot([r.size for r in ps], [_f(r.predicted_busbw) for r in ps], color=color, linestyle="--",
                    label=f"collc prediction ({placement})")
    save_busbw_figure(fig, ax, title + "  (filled: MSCCL ran, hollow: NCCL, triangle: not proven)", path,
                      legend_size=7, title_size=9)


def add_report_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("run", metavar="SCHEDULE_LOG", help="the schedule run's log (collc bench run: schedule.log)")
    a.add_argument("--baseline", default=None, metavar="LOG", help="the MSCCL-off run's log")
    a.add_argument("--xml", action="append", default=[], metavar="PATH", help="the schedule set that was loaded")
    a.add_argument("--topology", default=None, help="predict with collc's simulator on this topology")
    a.add_argument("--model", choices=["event", "step"], default="step",
                   help="collc's cost model for the prediction (default: step)")
    a.add_argument("--alpha", type=float, default=5.0, help="latency per message in us for the prediction")
    a.add_argument("-o", "--output", required=True, help="directory: report.csv, report.json, busbw.png")
    a.add_argument("--html", default=None, metavar="PATH",
                   help="also write the measured busbw beside the prediction as one self-contained HTML page "
                        "(outside -o; docs/show.md)")


#: What ``collc bench report -o OUT`` writes (an existing OUT holding anything else is refused).
REPORT_FILES = ("report.csv", "report.json", "busbw.png")


def report_command(args: argparse.Namespace) -> int:
    from collc.inputs import output_dir, show
    from collc.outputs import discard, new_temp_dir, publish_dir, signals_blocked, write_into

    output_dir(args.output, "-o", ReportError)      # before the parsing and the simulation
    html_path = getattr(args, "html", None)
    if html_path:
        from collc.inputs import output_file
        output_file(html_path, "--html", ReportError)
    with signals_blocked():   # a signal inside matplotlib's C extension init would end in a traceback
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
        import collc.backends.msccl_xml  # noqa: F401  (lxml)
    run = parse_file(args.run)
    if not run.rows:      # a failed run: nothing to report, say why (exit 1, like a failed check)
        from collc.runtime_tests.cli import format_failures
        for line in format_failures(run):
            print(line)
        print(f"collc: {args.run}: the run failed before any result row; no report written", file=sys.stderr)
        return 1
    baseline = parse_file(args.baseline) if args.baseline else None
    programs = _programs(args.xml)
    predicted: dict[str, dict[int, float]] = {}
    if args.topology:
        from collc.sim.runner import ModelParams, rows_for, time_program
        from collc.topology import parse_spec
        topo = parse_spec(args.topology)
        sizes = run.sizes
        for path, prog in programs:
            times = time_program(prog, topo, sizes, ModelParams(args.model, args.alpha))
            predicted[path] = {r.size: r.busbw for r in rows_for(prog, sizes, times)}
    rows = build_report(run, baseline, programs, predicted)
    out = output_dir(args.output, "-o", ReportError)
    if out.is_dir():     # replaced as a whole below: it must hold nothing but an earlier report
        extra = sorted(q.name for q in out.iterdir() if q.name not in REPORT_FILES)
        if extra:
            raise ReportError(f"-o {show(out)} holds {show(extra[0])}, not a report file; choose another -o")
    doc = {"run": args.run, "baseline": args.baseline, "collective": run.collective, "nranks": run.nranks,
           "verdict": run.verdict.to_json(), "run_failed": run.run_failed,
           "failures": [f.to_json() for f in run.failures], "xml": [p for p, _ in programs],
           "topology": args.topology, "rows": [r.to_json() for r in rows]}
    # the three files are built in a hidden directory next to OUT and renamed into place together:
    # an interrupt (SIGINT/SIGTERM/SIGHUP) removes it and leaves OUT as it was
    tmp = new_temp_dir(out)
    try:
        write_into(tmp, "report.csv", to_csv(rows))
        write_into(tmp, "report.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
        plot(rows, f"{run.collective} on {run.nranks} ranks", tmp / "busbw.png")
    except BaseException:
        discard(tmp)
        raise
    publish_dir(tmp, out, replace=True)
    if html_path:
        from collc.outputs import write_file
        from collc.show.build import report_page
        facts = [("run", args.run), ("baseline", args.baseline or "(none)"), ("xml", ", ".join(p for p, _ in programs)
                 or "(none)"), ("topology", args.topology or "(none: no prediction)"),
                 ("prediction model", f"{args.model}, alpha {args.alpha:g} us"),
                 ("MSCCL verdict", f"{run.verdict.status}: {run.verdict.reason}")]
        topo_obj = None
        if args.topology:
            from collc.topology import parse_spec
            topo_obj = parse_spec(args.topology)
        write_file(html_path, report_page(rows, f"{run.collective} on {run.nranks} ranks: measured and predicted",
                                          facts, topo_obj, run.collective, run.nranks or 0), encoding="utf-8")
    ran = sum(r.path == "MSCCL" for r in rows)
    print(f"{len(rows)} rows ({ran} where MSCCL ran); wrote {out}/report.csv, report.json, busbw.png")
    print(f"MSCCL verdict: {run.verdict.status}: {run.verdict.reason}")
    return 0
