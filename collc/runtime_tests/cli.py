"""``collc bench``: parse nccl-tests/rccl-tests logs, launch them with a schedule, report.

Kept out of ``collc/cli.py`` so the bench subcommand is one import there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collc.errors import CollcError
from collc.inputs import MAX_LOG_BYTES, input_file
from collc.runtime_tests.parse import BenchLog, LogParseError, Row, parse_file_tests, path_per_size

__all__ = ["add_bench_parser", "run_bench", "format_log"]

_RED, _GREEN, _YELLOW, _RESET = "\033[31m", "\033[32m", "\033[33m", "\033[0m"


class BenchUsageError(CollcError):
    """Bad ``collc bench`` usage."""


def add_bench_parser(b: argparse.ArgumentParser) -> None:
    bsub = b.add_subparsers(dest="action", metavar="{parse,run,report}")
    bsub.required = True
    p = bsub.add_parser("parse", help="read nccl-tests/rccl-tests logs (text, -J JSON, rccl csv/json): rows per "
                                      "size and placement, and whether MSCCL ran")
    p.add_argument("logs", nargs="+", metavar="LOG")
    p.add_argument("--json", action="store_true", help="machine-readable output with stable keys")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    from collc.runtime_tests.launch import add_run_arguments
    add_run_arguments(bsub.add_parser("run", help="launch nccl-tests/rccl-tests with the schedule and a baseline "
                                                  "(--dry-run prints the exact commands and environment)"))
    from collc.runtime_tests.report import add_report_arguments
    add_report_arguments(bsub.add_parser("report", help="CSV, JSON and a busbw plot from a schedule run, its NCCL "
                                                        "baseline and collc's prediction"))


def _color(text: str, code: str, on: bool) -> str:
    return f"{code}{text}{_RESET}" if on else text


def _num(x: float) -> str:
    return f"{x:.2f}" if x < 1e6 else f"{x:.3g}"


def format_log(log: BenchLog, color: bool = False) -> list[str]:
    """The human-readable summary of one log."""
    hosts = f" on {len(log.hosts)} host(s)" if log.hosts else ""
    lines = [f"{log.path}: {log.tool}, {log.collective} ({log.collective_source}), "
             f"{log.nranks if log.nranks is not None else '?'} ranks{hosts}, "
             f"{'#wrong' if log.fmt == 'wrong' else log.fmt} format, {log.runs} table(s), {len(log.rows)} rows"]
    if log.versions:
        lines.append("  library: " + ", ".join(f"{k} {v}" for k, v in sorted(log.versions.items())))
    v = log.verdict
    code = {"ran": _GREEN, "not-ran": _RED}.get(v.status, _YELLOW)
    label = {"ran": "MSCCL RAN", "not-ran": "MSCCL DID NOT RUN (the XML was not used)"}.get(v.status,
                                                                                            "MSCCL: UNKNOWN")
    lines.append("  " + _color(f"{label}: {v.reason}", code, color))
    for e in v.evidence:
        lines.append(f"    evidence: {e}")
    paths = path_per_size(log)
    by_size: dict[int, dict[str, Row]] = {}
    for r in log.rows:
        by_size.setdefault(r.size, {})[r.placement] = r
    lines.append(f"  {'size':>12s} {'count':>11s} {'type':>6s} | {'out-of-place time/algbw/busbw/wrong':>36s} | "
                 f"{'in-place time/algbw/busbw/wrong':>36s} | path")
    for size in sorted(by_size):
        cells = []
        first: Row | None = None
        for placement in ("out-of-place", "in-place"):
            cell = by_size[size].get(placement)
            if cell is None:
                cells.append(f"{'-':>36s}")
                continue
            first = first or cell
            wrong = cell.wrong if cell.wrong is not None else (f"{cell.error:g}" if cell.error is not None
                                                               else "N/A")
            cells.append(f"{_num(cell.time_us):>10s} {_num(cell.algbw):>8s} {_num(cell.busbw):>8s} "
                         f"{str(wrong):>7s}")
        assert first is not None
        path = paths[size]
        if log.launches.get(size):
            path += f" ({log.launches[size]} launches)"
        lines.append(f"  {size:>12d} {first.count:>11d} {first.dtype:>6s} | {cells[0]} | {cells[1]} | {path}")
    bad = [r for r in log.rows if r.wrong]
    if bad:
        lines.append("  " + _color(f"DATA CHECK FAILED at {len(bad)} row(s): " + ", ".join(
            f"{r.size} B {r.placement} ({r.wrong} wrong)" for r in bad[:5]), _RED, color))
    for n in log.notes:
        lines.append(f"  note: {n}")
    return lines


def _cmd_parse(args: argparse.Namespace) -> int:
    logs: list[BenchLog] = []
    for raw in args.logs:
        p = Path(raw)
        input_file(p, MAX_LOG_BYTES, BenchUsageError)    # a regular file (no FIFO), bounded
        logs.extend(parse_file_tests(p))
    if args.json:
        print(json.dumps([lg.to_json() for lg in logs], indent=2, sort_keys=True))
        return 0
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    for lg in logs:
        for line in format_log(lg, color):
            print(line)
    failed = sum(lg.failed or any(r.wrong for r in lg.rows) for lg in logs)
    print(f"{len(logs)} test(s) in {len(args.logs)} file(s) parsed; {failed} with a failed data check")
    return 1 if failed else 0


def run_bench(args: argparse.Namespace) -> int:
    if args.action == "parse":
        return _cmd_parse(args)
    if args.action == "run":
        from collc.runtime_tests.launch import run_command
        return run_command(args)
    from collc.runtime_tests.report import report_command
    return report_command(args)


__all__ += ["LogParseError"]
