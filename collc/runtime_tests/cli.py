"""``collc bench``: parse nccl-tests/rccl-tests logs, launch them with a schedule, report.

Kept out of ``collc/cli.py`` so the bench subcommand is one import there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collc.errors import CollcError
from collc.inputs import MAX_LOG_BYTES, input_file, one_line
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
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="color the verdicts (auto: on a terminal)")
    p.add_argument("--require-msccl", action="store_true",
                   help="exit 1 unless MSCCL ran in every log (the logs where it did not are named)")
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


#: How each table layout is named (the old wording "#wrong format" read like an error).
_LAYOUTS = {"wrong": "table with a #wrong column (nccl-tests >= 2.13)",
            "error": "table with an error column (nccl-tests < 2.13)",
            "json": "JSON results", "csv": "CSV results"}


def msccl_label(log: BenchLog) -> tuple[str, str]:
    """The verdict's headline and its color."""
    v = log.verdict
    if v.status == "ran":
        return "MSCCL RAN", _GREEN
    if v.status == "not-ran" and v.stock:
        return "STOCK NCCL RUN (no MSCCL configured)", _YELLOW
    if v.status == "not-ran":
        return "MSCCL DID NOT RUN (the XML was not used)", _RED
    return "MSCCL: UNKNOWN", _YELLOW


def format_failures(log: BenchLog, color: bool = False) -> list[str]:
    """Which rank/host failed, with which line, and whether MSCCL was loaded."""
    if not log.failures:
        return []
    lines = ["  " + _color(f"RUN FAILED ({len(log.failures)} failure line(s); MSCCL {log.msccl_state})", _RED, color)]
    for f in log.failures[:5]:
        where = ", ".join(x for x in (f"host {f.host}" if f.host else "",
                                      f"rank {','.join(map(str, f.ranks))}" if f.ranks else "") if x)
        lines.append(f"    {f.source}{' (' + where + ')' if where else ''}: {f.line}")
    for w in log.warns[:3]:
        lines.append(f"    NCCL WARN: {w[:300]}")
    return lines


def format_log(log: BenchLog, color: bool = False) -> list[str]:
    """The human-readable summary of one log."""
    hosts = f" on {len(log.hosts)} host(s)" if log.hosts else ""
    lines = [f"{log.path}: {log.tool}, {log.collective} ({log.collective_source}), "
             f"{log.nranks if log.nranks is not None else '?'} ranks{hosts}, "
             f"{_LAYOUTS.get(log.fmt, log.fmt)}, {log.runs} run(s), {len(log.rows)} rows"]
    if log.versions:
        lines.append("  library: " + ", ".join(f"{k} {v}" for k, v in sorted(log.versions.items())))
    v = log.verdict
    label, code = msccl_label(log)
    lines.append("  " + _color(f"{label}: {v.reason}", code, color))
    for e in v.evidence:
        lines.append(f"    evidence: {e}")
    lines += format_failures(log, color)
    if not log.rows:
        return lines
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


def _msccl_word(log: BenchLog) -> str:
    if log.verdict.status == "ran":
        return "MSCCL ran"
    if log.verdict.stock:
        return "stock NCCL (no MSCCL configured)"
    return "MSCCL did not run" if log.verdict.status == "not-ran" else "MSCCL unknown"


def summary_lines(logs: list[BenchLog], files: int) -> list[str]:
    """One line per test (collective, sizes, MSCCL ran or not, peak busbw) and a total line."""
    from collc.sim.runner import human

    out = ["summary:"]
    for lg in logs:
        sizes = lg.sizes
        span = f"{human(sizes[0])}..{human(sizes[-1])} ({len(sizes)} sizes)" if sizes else "no sizes"
        peak = max((r.busbw for r in lg.rows), default=None)
        state = "RUN FAILED, " if lg.run_failed else ""
        out.append(f"  {lg.path}: {lg.collective}, {span}, {state}{_msccl_word(lg)}, "
                   f"peak busbw {'-' if peak is None else f'{peak:.2f} GB/s'}")
    ran = sum(lg.verdict.status == "ran" for lg in logs)
    stock = sum(lg.verdict.stock for lg in logs)
    not_ran = sum(lg.verdict.status == "not-ran" for lg in logs) - stock
    failed = sum(lg.run_failed for lg in logs)
    bad = sum(lg.failed or any(r.wrong for r in lg.rows) for lg in logs)
    out.append(f"total: {len(logs)} test(s) in {files} file(s): MSCCL ran in {ran}, did not run in {not_ran}, "
               f"stock NCCL in {stock}, unknown in {len(logs) - ran - not_ran - stock}; {failed} failed run(s), "
               f"{bad} with a failed data check")
    return out


def _cmd_parse(args: argparse.Namespace) -> int:
    logs: list[BenchLog] = []
    for raw in args.logs:
        p = Path(raw)
        input_file(p, MAX_LOG_BYTES, BenchUsageError)    # a regular file (no FIFO), bounded
        logs.extend(parse_file_tests(p))
    data_failed = sum(lg.failed or any(r.wrong for r in lg.rows) for lg in logs)
    runs_failed = sum(lg.run_failed for lg in logs)
    missing = [lg.path for lg in logs if lg.verdict.status != "ran"] if args.require_msccl else []
    if args.json:
        print(json.dumps([lg.to_json() for lg in logs], indent=2, sort_keys=True))
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        for lg in logs:
            for line in format_log(lg, color):
                print(line)
        if len(logs) > 1:
            for line in summary_lines(logs, len(args.logs)):
                print(line)
        print(f"{len(logs)} test(s) in {len(args.logs)} file(s) parsed; {runs_failed} failed run(s); "
              f"{data_failed} with a failed data check")
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        print(one_line(f"collc: --require-msccl: MSCCL did not run in {len(missing)} of {len(logs)} test(s): {names}"),
              file=sys.stderr)
    return 1 if data_failed or runs_failed or missing else 0


def run_bench(args: argparse.Namespace) -> int:
    if args.action == "parse":
        return _cmd_parse(args)
    if args.action == "run":
        from collc.runtime_tests.launch import run_command
        return run_command(args)
    from collc.runtime_tests.report import report_command
    return report_command(args)


__all__ += ["LogParseError"]
