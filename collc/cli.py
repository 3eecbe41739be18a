"""The ``collc`` command line: a thin driver over the library (DESIGN 3, 4.17).

``main(argv)`` runs in-process and returns the exit code: 0 success, 1 a check
failed, 2 bad usage or bad input (one line on stderr, no traceback, no output
file left behind).
"""

from __future__ import annotations

if __name__ == "__main__":
    # run as a program: until main() installs its handlers, a signal ends the process with one line and
    # 128 + the signal (the imports below take a second; a KeyboardInterrupt there would print a traceback)
    from collc._startup import exit_on_signal
    exit_on_signal()

import argparse
import importlib
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collc.limits import LIMITS, Dialect  # noqa: E402
from collc.compiler.msccl.program import Proto  # noqa: E402
from collc.errors import CollcError, UsageError  # noqa: E402
from collc.inputs import (MAX_CANDIDATES, MAX_CHUNKS, MIN_LINK_BW, bounded_int, check_build_ranks,  # noqa: E402
                          check_bytes, finite, one_line, output_dir, output_file, plot_file, show)
from collc.ir.collective import CollKind  # noqa: E402
from collc.outputs import Interrupted, interrupt_handlers  # noqa: E402

if TYPE_CHECKING:
    from collc.check.plan.releases import Release
    from collc.frontends.registry import Algorithm
    from collc.check.plan.report import PlanReport
    from collc.check import Report
    from collc.sim.runner import ModelParams
    from collc.topology import Topology
    from collc.tuning import Candidate

# The heavier modules (the compiler, the checker, numpy, tqdm, lxml, matplotlib) are imported by
# the commands that use them, so that `collc --help` and argument errors answer at once.

EXAMPLES = {
    "list": "collc list algorithms",
    "topology": "collc topology show torus:4x4 --json",
    "build": "collc build --topology ring:8 --algorithm ring --collective allreduce -o ring8.xml",
    "check": "collc check ring8.xml ../msccl-corpus/rccl/msccl-algorithms/*.xml",
    "simulate": "collc simulate ring8.xml --topology ring:8 --sizes 1KiB:1GiB --json",
    "compare": "collc compare --topology torus:4x4 --collective allreduce --algorithm ring "
               "--algorithm recursive-halving-doubling --plot cmp.png",
    "tune": "collc tune --topology switch:8 --collective allreduce --algorithm ring --algorithm direct "
            "--protocols Simple,LL -o tuned",
    "bench": "collc bench parse all_reduce.log --json; collc bench run --xml algos/ --runtime executor --dry-run",
    "show": "collc show ring8.xml --topology ring:8 --size 64MiB -o ring8.html",
}


MSCCLPP_VERSION_HELP = ("MSCCL++ releases to check plans against: all (default), or a comma list of 0.8, 0.9, 0.10"
                        " (the executor differs: docs/mscclpp.md, 'Port channels and releases')")
DIALECT_HELP = "the runtime that reads the file: executor (MSCCL executor, default), rccl, legacy"
LAYOUT_HELP = ("the job's process groups: tp consecutive blocks, dp stride-tp, pp stride tp*dp (product = ranks); "
               "--group tp|dp|pp picks one dimension (docs/groups.md)")
INPLACE_HELP = "in-place buffers (default: the collective's usual placement)"
GROUP_HELP = ("the ranks of --topology that form the communicator, in communicator order: 0-7, 0,8,16, "
              "stride:S[:O], host:H, rail:L (the same as SPEC@G; docs/groups.md)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prints "collc: "; name the subcommand only ("collc: build: ...")
        sub = self.prog.removeprefix("collc").strip()
        message = _suggest_choice(message, self.prog)
        raise UsageError(f"{sub}: {message}" if sub else message)


def _suggest_choice(message: str, prog: str) -> str:
    """argparse's "invalid choice: 'X' (choose from ...)" with the nearest choices first, and the
    full list only where it is short (else the --help that shows it)."""
    from collc.errors import nearest

    m = re.match(r"(.*invalid choice: )'(.*)' \(choose from (.*)\)$", message, re.S)
    if m is None:
        return message
    given, choices = m.group(2), [c.strip().strip("'\"") for c in m.group(3).split(",")]
    close = nearest(given, choices)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = f"choose from {', '.join(choices)}" if len(", ".join(choices)) <= 120 else f"see `{prog} --help`"
    return f"{m.group(1)}{given!r}{hint} ({listing})"


def _version() -> str:
    """The installed package's version, else the checkout's ``collc.__version__`` (the same)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("collc")
    except PackageNotFoundError:
        import collc
        return collc.__version__


class _Version(argparse.Action):
    """``--version``, looked up only when asked (importlib.metadata costs start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help="print collc's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"collc {_version()}")
        parser.exit()


def _parser(bench: bool = True) -> argparse.ArgumentParser:
    """The argument parser; ``bench=False`` leaves the bench subcommand's own arguments out
    (they import the runtime-test modules, a fifth of the start-up, for one command)."""
    p = _Parser(prog="collc", description="Compile a topology plus an algorithm into a verified MSCCL XML.",
                epilog="examples:\n  " + "\n  ".join(EXAMPLES.values()),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", metavar="{list,topology,build,check,simulate,compare,tune,bench,show}",
                           help="the command; `collc COMMAND --help` for its options")
    sub.required = True

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, epilog=f"example:\n  {EXAMPLES[name]}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    def layout_args(a: argparse.ArgumentParser) -> None:
        a.add_argument("--layout", default=None, metavar="tp=T,dp=D[,pp=P]", help=LAYOUT_HELP)
        a.add_argument("--groups", default=None, metavar="G;G;...",
                       help="explicit groups of --topology that do not overlap, in the --group grammar, ';' between "
                            "them (instead of --layout; docs/groups.md)")

    lst = cmd("list", "list algorithms, topology families and aliases, or collectives")
    lst.add_argument("what", nargs="?", choices=["algorithms", "topologies", "collectives"], default="algorithms",
                     help="what to list (default: algorithms)")
    lst.add_argument("--topology", default=None, metavar="SPEC",
                     help="with algorithms: only those that apply on this topology (see --why)")
    lst.add_argument("--group", default=None, metavar="G", help=GROUP_HELP)
    lst.add_argument("--collective", default=None, metavar="NAME",
                     help="with algorithms: only those implementing this collective (applying, with --topology)")
    shown = lst.add_mutually_exclusive_group()
    shown.add_argument("--applicable", action="store_true",
                       help="with --topology: only what applies (the default with --topology)")
    shown.add_argument("--why", "--all", dest="why", action="store_true",
                       help="with --topology: every algorithm and collective, and the reason where it does not apply")
    lst.add_argument("--long", action="store_true",
                     help="with algorithms: summary, topologies, parameters and an example for each")
    lst.add_argument("--dialect", choices=[d.value for d in Dialect], default=None,
                     help="with --topology: also build each applying algorithm (checked) for this runtime, so "
                          "that only what fits its limits (threadblocks, channels, parser nodes) is listed, "
                          "exactly as `collc build --dialect` decides; without it, the algorithms' own rules")

    top = cmd("topology", "inspect a topology spec")
    tsub = top.add_subparsers(dest="action", metavar="{show,import,find}", help="what to do with the topology")
    tsub.required = True
    show = tsub.add_parser("show", help="summarize a topology (or print its JSON file form)")
    show.add_argument("spec", help="a spec such as torus:4x4 or dgx-h100:2 (`collc list topologies`), or a "
                      ".yaml/.json file")
    show.add_argument("--json", action="store_true", help="print the round-trippable JSON file format")
    imp = tsub.add_parser("import", help="NCCL topology XML (one per node) or nvidia-smi/rocm-smi text -> YAML")
    imp.add_argument("files", nargs="+", metavar="FILE",
                     help="NCCL topology XML files (one per node) or nvidia-smi topo -m / rocm-smi text")
    imp.add_argument("-o", "--output", default=None, help="write the topology file here (.yaml or .json)")
    fnd = tsub.add_parser("find", help="Pareto frontier of direct-connect topologies (T_L, beta) for N nodes, "
                          "degree d", epilog="example:\n  collc topology find --nodes 1024 --degree 4",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    fnd.add_argument("--nodes", type=int, required=True, help="number of nodes N")
    fnd.add_argument("--degree", type=int, required=True, help="links per node d (each way)")
    fnd.add_argument("--bidirectional", action="store_true", help="only topologies of bidirectional links")
    fnd.add_argument("--alpha", type=float, default=10.0, help="us per communication step (default 10)")
    fnd.add_argument("--bw", type=float, default=100.0, help="node egress bandwidth B in Gbit/s (default 100)")
    fnd.add_argument("--size", default="1MiB", help="allreduce size, or a comma list (buckets) summed (default 1MiB)")
    fnd.add_argument("--no-cache", action="store_true", help="search again instead of reading the cache")

    b = cmd("build", "build, lower, check and write an MSCCL XML")
    b.add_argument("--topology", required=True, help="spec such as ring:8, torus:4x4, switch:8, or a .yaml/.json")
    b.add_argument("--group", default=None, metavar="G", help=GROUP_HELP)
    layout_args(b)
    b.add_argument("--algorithm", required=True, help="see `collc list algorithms`")
    b.add_argument("--collective", required=True, help="allreduce, allgather, reducescatter, alltoall, ...")
    b.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="algorithm parameter")
    b.add_argument("--root", type=int, default=None, help="root rank for broadcast/reduce (default 0)")
    b.add_argument("--chunks", type=int, default=1, help="pipelining: split every chunk into P parts")
    b.add_argument("--instances", type=int, default=1, help="replicate the schedule on K channel sets")
    b.add_argument("--protocol", choices=[x.value for x in Proto], default="Simple",
                   help="the runtime protocol the file asks for (default Simple; LL, LL128 for small messages)")
    b.add_argument("--dialect", choices=[d.value for d in Dialect], default="executor", help=DIALECT_HELP)
    b.add_argument("--backend", choices=["msccl", "mscclpp"], default="msccl",
                   help="msccl: MSCCL XML (default); mscclpp: an MSCCL++ execution plan (JSON)")
    b.add_argument("--register", default=None, metavar="PY",
                   help="with --backend mscclpp: also write a Python module registering the plans of -o's "
                        "directory with the MSCCL++ v0.9+ plan registry")
    place = b.add_mutually_exclusive_group()
    place.add_argument("--inplace", dest="inplace", action="store_true", default=None, help=INPLACE_HELP)
    place.add_argument("--outofplace", dest="inplace", action="store_false", help="out-of-place buffers")
    b.add_argument("--min-bytes", default="0", help="smallest message size this file is selected for")
    b.add_argument("--max-bytes", default="0", help="largest message size (0: no limit)")
    b.add_argument("--shard-per-rank", action="store_true",
                   help="write a directory with one file per rank plus a launcher wrapper (needed above 1024 ranks)")
    b.add_argument("--report", action="store_true",
                   help="also print steps, per-step link utilisation and the algorithm's own figures")
    b.add_argument("--timings", action="store_true",
                   help="also print seconds per stage and lowering pass, and the peak memory of the build")
    b.add_argument("--jobs", default=None, metavar="N",
                   help="worker processes for the per-rank lowering and printing (default: the usable cores); "
                        "the output is the same for any N")
    b.add_argument("--ranks", default=None, metavar="A-B|auto",
                   help="with --shard-per-rank: write only ranks A..B into -o (one node of a job; see README); "
                        "auto: this task's share from SLURM_PROCID/SLURM_NTASKS or OMPI_COMM_WORLD_RANK/SIZE")
    b.add_argument("--dump-ir", default=None, metavar="PASS[,PASS]",
                   help="write the IR after these lowering passes as text into --dump-dir")
    b.add_argument("--dump-dir", default=None, metavar="DIR", help="directory for --dump-ir (created)")
    b.add_argument("-o", "--output", required=True, help="output XML path")
    b.add_argument("--mscclpp-version", default="all", help=MSCCLPP_VERSION_HELP)

    c = cmd("check", "check MSCCL XML files or MSCCL++ JSON plans: reader rules, limits, executor simulation")
    c.add_argument("paths", nargs="+", help="XML files, MSCCL++ JSON plans, or directories of them")
    c.add_argument("--dialect", choices=[d.value for d in Dialect], default="executor", help=DIALECT_HELP)
    c.add_argument("--root", type=int, default=None, help="root to check broadcast/reduce files against")
    c.add_argument("--data", choices=["auto", "exact", "numeric"], default="auto",
                   help="data check: exact symbolic sets, or random 64-bit sums for huge programs (auto: by size)")
    c.add_argument("--json", action="store_true", help="machine-readable output with stable keys")
    c.add_argument("--jobs", default=None, metavar="N",
                   help="worker processes that read and check a shard directory's per-rank files (default: "
                        "the usable cores); the report is the same for any N")
    c.add_argument("--mscclpp-version", default="all", help=MSCCLPP_VERSION_HELP)
    c.add_argument("--topology", default=None, metavar="SPEC",
                   help="MSCCL++ plans: judge channel placement on this fabric's hosts (a memory channel needs "
                        "CUDA IPC: one host or NVLink domain); MSCCL XML files ignore it")

    def model_args(a: argparse.ArgumentParser) -> None:
        a.add_argument("--topology", required=True, help="the fabric to time it on (same ranks as the program)")
        a.add_argument("--group", default=None, metavar="G", help=GROUP_HELP)
        a.add_argument("--sizes", default="1KiB:1GiB", help="LO:HI (powers of two) or a,b,c (default 1KiB:1GiB)")
        a.add_argument("--model", choices=["event", "step"], default="event",
                       help="event: timed executor with link sharing (default); step: alpha-beta per round")
        a.add_argument("--alpha", type=float, default=5.0, help="latency per message in us (default 5)")
        a.add_argument("--link-bw", type=float, default=None, help="GB/s for every link (default: the topology's)")
        a.add_argument("--hop-latency", type=float, default=0.0, help="extra us per link crossed")
        a.add_argument("--reduce-cost", type=float, default=0.0, help="us per byte reduced")
        a.add_argument("--proxy-cost", type=float, default=None, metavar="US",
                       help="MSCCL++ plans: us the proxy spends per port-channel request (default 1; "
                            "docs/simulation.md)")
        a.add_argument("--json", action="store_true", help="machine-readable output with stable keys")

    sim = cmd("simulate", "predict time, algbw and busbw of an XML (or shard directory) per message size")
    sim.add_argument("path", nargs="?", default=None,
                     help="an XML file, a shard directory or an MSCCL++ JSON plan (with --layout/--groups: optional, "
                          "the file every group of its size runs)")
    model_args(sim)
    layout_args(sim)
    sim.add_argument("--algorithm", default=None, help="with --layout/--groups and no FILE: build each group's own file")
    sim.add_argument("--collective", default=None, help="with --algorithm: the collective")
    sim.add_argument("--dialect", choices=[d.value for d in Dialect], default="executor", help=DIALECT_HELP)
    sim.add_argument("--plot", default=None, metavar="PNG", help="write busbw against size")
    sim.add_argument("--mscclpp-version", default="all", help=MSCCLPP_VERSION_HELP)
    sim.epilog = (f"{sim.epilog}\n\nThe `selected` column says whether the runtime would pick this file for a "
                  f"call of that size:\ninside its [minBytes, maxBytes] window and with an element count the file "
                  f"divides\n(docs/runtime-model.md); 'no' rows are what it would do if chosen, for sizes the "
                  f"runtime\ngives to another file or NCCL.")

    def candidate_args(a: argparse.ArgumentParser) -> None:
        a.add_argument("--collective", required=True, help="allreduce, allgather, ... (`collc list collectives`)")
        a.add_argument("--algorithm", action="append", default=None,
                       help="repeat; NAME or NAME:key=value,key=value for parameters; @SPEC runs it on its own "
                            "topology (same ranks) (default: every algorithm that applies to the collective on "
                            "the topology)")
        a.add_argument("--root", type=int, default=None, help="root rank for broadcast/reduce (default 0)")
        place = a.add_mutually_exclusive_group()
        place.add_argument("--inplace", dest="inplace", action="store_true", default=None, help=INPLACE_HELP)
        place.add_argument("--outofplace", dest="inplace", action="store_false", help="out-of-place buffers")
        a.add_argument("--backend", choices=["msccl", "mscclpp"], default="msccl",
                       help="msccl: MSCCL XML programs (default); mscclpp: MSCCL++ execution plans, timed with port "
                            "channels and the proxy (docs/simulation.md)")

    cmpr = cmd("compare", "build algorithms on one topology and compare predicted busbw per size")
    model_args(cmpr)
    candidate_args(cmpr)
    cplot = cmpr.add_mutually_exclusive_group()
    cplot.add_argument("--plot", default=None, metavar="PNG",
                       help="also draw busbw against size into this .png/.pdf/.svg (no plot without it)")
    cplot.add_argument("--no-plot", action="store_true", help="no plot (the default; kept for older scripts)")
    cmpr.add_argument("--html", default=None, metavar="PATH",
                      help="also write the comparison as one self-contained HTML page (docs/show.md)")

    tn = cmd("tune", "pick the best candidate per size window and write one checked XML per window")
    model_args(tn)
    layout_args(tn)
    candidate_args(tn)
    tn.add_argument("--chunks", default="1", help="comma-separated pipelining choices (default 1)")
    tn.add_argument("--instances", default="1", help="comma-separated instance counts (default 1)")
    tn.add_argument("--protocols", default="Simple", help="comma-separated: Simple,LL,LL128")
    tn.add_argument("--dialect", choices=[d.value for d in Dialect], default="executor", help=DIALECT_HELP)
    tn.add_argument("-o", "--output", required=True, help="directory: msccl-algorithms/*.xml and MANIFEST.json")
    tn.add_argument("--html", default=None, metavar="PATH",
                    help="also write the candidates per size and the chosen windows as one self-contained HTML page")
    bn = cmd("bench", "run nccl-tests/rccl-tests with a schedule, parse their logs, report")
    if bench:
        from collc.runtime_tests.cli import add_bench_parser
        add_bench_parser(bn)
    from collc.show.cli import add_show_arguments
    add_show_arguments(cmd("show", "draw a schedule as one self-contained HTML page: fabric load per step, "
                                   "threadblock timeline, per-size view, check (docs/show.md)"))
    return p


# --------------------------------------------------------------------------- commands
#: ``collc list`` tables are at most this wide (reasons and long texts wrap below their row).
LIST_WIDTH = 100
#: Column of each collective in the compact algorithm table.
COLL_ABBREV = {CollKind.ALLREDUCE: "AR", CollKind.ALLGATHER: "AG", CollKind.REDUCESCATTER: "RS",
               CollKind.ALLTOALL: "A2A", CollKind.BROADCAST: "BC", CollKind.REDUCE: "RD"}


def cmd_list(args: argparse.Namespace) -> int:
    from collc.topology import list_families

    if args.what != "algorithms" and (args.topology or args.collective or args.applicable or args.why or args.long
                                      or args.dialect):
        raise UsageError(f"list {args.what}: --topology, --collective, --applicable, --why, --long and --dialect "
                         f"are for `collc list algorithms`")
    if args.what == "algorithms":
        for line in _algorithm_lines(args):
            print(line)
    elif args.what == "topologies":
        from collc.topology.spec import list_aliases
        for name, desc, example in list_families():
            print("\n".join(textwrap.wrap(f"{name:12s} {desc}  (e.g. {example})", LIST_WIDTH,
                                           subsequent_indent=" " * 13, break_on_hyphens=False)))
        print("\naliases (machine names; NAME is one box, NAME:N is N boxes):")
        for typed, expands, desc in list_aliases():
            print("\n".join(textwrap.wrap(f"  {typed:14s} = {expands:12s} {desc}", LIST_WIDTH,
                                           subsequent_indent=" " * 32, break_on_hyphens=False)))
    else:
        for k in CollKind:
            print(k.value)
    return 0


def _first_clause(text: str) -> str:
    """``text`` up to its first ``;`` outside parentheses (the paper of a reference list)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth == 0:
            return text[:i].strip()
    return text.strip()


def _refusal(dialect: Dialect | None) -> Callable[[Algorithm, Topology, CollKind], str | None]:
    """Why an algorithm does not run a collective on a topology (None: it does): the algorithm's own
    rules, and with a dialect also a checked build for that runtime, whose limits (threadblocks per GPU,
    channels, parser nodes) only the lowered program shows -- the same build `collc build` runs."""
    def refusal(alg: Algorithm, topo: Topology, kind: CollKind) -> str | None:
        why = alg.refusal_of_kind(topo, kind)
        if why is not None or dialect is None:
            return why
        from collc.driver import compile_xml
        try:
            built = compile_xml(topo, alg.name, kind, dialect=dialect, shard=topo.nranks >= 1024)
        except CollcError as exc:
            return f"does not fit the {dialect.value} runtime: {one_line(exc)}"
        if not built.report.ok:
            return f"fails its check for the {dialect.value} runtime: {built.report.errors()[0].message}"
        return None
    return refusal


def _algorithm_lines(args: argparse.Namespace) -> list[str]:
    """``collc list algorithms``: one row per algorithm (``--long``: the full entry; ``--why``:
    a row per algorithm and collective with the reason where it does not apply)."""
    from collc.frontends.registry import algorithms
    from collc.topology import parse_spec

    if (args.applicable or args.why or args.dialect) and args.topology is None:
        raise UsageError("list algorithms: --applicable, --why and --dialect need --topology SPEC")
    kinds = [CollKind.parse(args.collective)] if args.collective else list(CollKind)
    topo = parse_spec(args.topology) if args.topology is not None else None
    if topo is not None and args.dialect:
        check_build_ranks(topo.nranks)
    refusal = _refusal(Dialect(args.dialect) if args.dialect else None)
    lines: list[str] = []
    if args.why:
        assert topo is not None
        for alg in algorithms():
            for k in sorted(alg.collectives & set(kinds), key=lambda k: k.value):
                why = refusal(alg, topo, k)
                lines += textwrap.wrap(f"{alg.name:27s} {k.value:14s} {'applies' if why is None else 'no: ' + why}",
                                       LIST_WIDTH, subsequent_indent=" " * 43, break_on_hyphens=False)
        return lines
    rows = []
    for alg in algorithms():
        have = alg.collectives & set(kinds)
        if topo is not None:
            have = frozenset(k for k in have if refusal(alg, topo, k) is None)
        if have:
            rows.append((alg, have))
    where = f" on {topo.name}" if topo is not None else ""
    if args.long:
        for alg, have in rows:
            lines.append(f"{alg.name:28s} {', '.join(sorted(k.value for k in have))}")
            lines += textwrap.wrap(alg.summary, LIST_WIDTH, initial_indent=" " * 29, subsequent_indent=" " * 29)
            lines += textwrap.wrap(f"topologies: {alg.topologies}", LIST_WIDTH, initial_indent=" " * 29,
                                   subsequent_indent=" " * 31)
            for prm in alg.params:
                lines += textwrap.wrap(f"--param {prm.name}=... ({prm.doc}; default {prm.default!r})", LIST_WIDTH,
                                       initial_indent=" " * 29, subsequent_indent=" " * 31, break_on_hyphens=False)
            lines.append(" " * 29 + f"e.g. {alg.example}")
            lines += textwrap.wrap(f"paper: {alg.reference}", LIST_WIDTH, initial_indent=" " * 29,
                                   subsequent_indent=" " * 31)
        return lines
    if not rows:
        what = f" implements {kinds[0].value}" if args.collective else ""
        return [f"no algorithm{what} applies{where}; `collc list algorithms --topology {args.topology} --why` "
                f"says why"]
    head = f"{'algorithm':27s} " + " ".join(f"{COLL_ABBREV[k]:3s}" for k in CollKind) + "  paper"
    lines.append(head)
    for alg, have in rows:
        marks = " ".join(f"{'x' if k in have else '.':3s}" for k in CollKind)
        left = f"{alg.name:27s} {marks}  "
        paper = _first_clause(alg.reference)
        room = LIST_WIDTH - len(left)
        lines.append(left + (paper if len(paper) <= room else paper[:room - 3].rstrip() + "..."))
    lines.append("key: " + ", ".join(f"{COLL_ABBREV[k]} {k.value}" for k in CollKind))
    lines += textwrap.wrap(f"{len(rows)} algorithm(s){where}; details: --long" +
                           ("" if topo is None else "; what does not apply and why: --why"), LIST_WIDTH)
    return lines


SELECTED_NOTE = ("selected: whether the runtime picks this file for a call of that size (inside its "
                 "[minBytes, maxBytes] window, the call's element count a multiple of {multiple}); 'no' rows are a prediction "
                 "for a size another file or NCCL serves")

SHOW_DIAMETER_RANKS = 4096


def cmd_topology(args: argparse.Namespace) -> int:
    from collc.sim.runner import parse_size
    from collc.topology import dump_json, parse_spec

    if args.action == "import":
        from collc.topology.importers import import_command
        return import_command(args.files, args.output)
    if args.action == "find":
        from collc.frontends.topology_finder import frontier_lines
        sizes = [float(parse_size(x)) for x in args.size.split(",")]
        print("\n".join(frontier_lines(args.nodes, args.degree, args.bidirectional, args.alpha, args.bw, sizes,
                                        not args.no_cache)))
        return 0
    topo = parse_spec(args.spec)
    if args.json:
        print(dump_json(topo))
        return 0
    cyc = topo.hamiltonian_cycle()
    degrees = [len(topo.out_neighbors(r)) for r in topo.ranks]
    # the all-pairs diameter costs ranks x links x levels bit operations: minutes above a few thousand ranks;
    # computed before anything is printed, so that a topology it refuses prints nothing but the error
    diameter = f"{topo.diameter()} hops" if topo.nranks <= SHOW_DIAMETER_RANKS else \
        f"not computed (more than {SHOW_DIAMETER_RANKS} ranks)"
    print(f"name:           {topo.name}")
    print(f"ranks:          {topo.nranks}")
    print(f"switches:       {topo.nswitches}")
    print(f"hosts:          {topo.hosts_summary()}")
    print(f"directed links: {len(topo.links)}")
    print(f"link kinds:     {', '.join(f'{k} {c}' for k, c in topo.link_kind_counts().items())}")
    print(f"bidirectional:  {'yes' if topo.is_bidirectional() else 'no'}")
    print(f"out-degree:     {min(degrees)}..{max(degrees)}")
    print(f"diameter:       {diameter}")
    print(f"ring cycle:     {'yes' if cyc else 'none found'}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from collc.backends.msccl_xml import write_atomic
    from collc.backends.shards import WRAPPER, publish_shards, stage_shards, write_rank_shards, write_shards
    from collc.compiler.pipeline import default_jobs
    from collc.driver import compile_xml
    from collc.outputs import discard
    from collc.topology import parse_spec

    if _has_layout(args):
        from collc.layout_cmd import build_layout
        return build_layout(args, cmd_build)
    if args.backend == "mscclpp":
        return _build_plan(args)
    if args.register is not None:
        raise UsageError("--register needs --backend mscclpp")
    dialect = Dialect(args.dialect)
    # everything cheap is checked before the topology is even built
    bounded_int(args.chunks, "--chunks", 1, MAX_CHUNKS, "the pieces of a chunk need distinct offsets, "
                "which the runtime stores as int16")
    channels = LIMITS[dialect].max_channels
    bounded_int(args.instances, "--instances", 1, channels, f"every instance takes channels of its own and "
                f"the {dialect.value} runtime has {channels}")
    min_b, max_b = _bytes_arg(args.min_bytes, "--min-bytes"), _bytes_arg(args.max_bytes, "--max-bytes")
    out = output_dir(args.output) if args.shard_per_rank else output_file(args.output)
    if args.shard_per_rank and args.ranks is None and out.is_dir() and any(out.iterdir()) and \
            not (out / WRAPPER).exists():
        raise UsageError(f"-o {show(out)} is a non-empty directory that collc did not write; choose another -o")
    topo: Topology = parse_spec(args.topology)
    check_build_ranks(topo.nranks)
    kind = CollKind.parse(args.collective)
    params, root = _params_and_root(args)
    if max_b and min_b > max_b:
        raise UsageError(f"--min-bytes {min_b} exceeds --max-bytes {max_b}")
    if topo.nranks > 1024 and not args.shard_per_rank:
        raise UsageError(f"{topo.nranks} ranks: one XML file holds at most 1024 <gpu> elements in the real "
                         f"parser; use --shard-per-rank")
    ranks = _ranks_arg(args.ranks, topo.nranks, args.shard_per_rank)
    jobs = default_jobs() if args.jobs is None else bounded_int(_int_arg(args.jobs, "--jobs"), "--jobs", 1, MAX_JOBS,
                                                                 "each worker is a process of its own")
    dump = _dump_arg(args.dump_ir, args.dump_dir)
    import warnings

    from collc.errors import CollcWarning

    # a whole shard set (without --report, which reads the program) is written by the workers into a
    # staged directory as they print it, checked there, then moved into place (or removed)
    staged = stage_shards(out) if args.shard_per_rank and ranks is None and not args.report else None
    try:
        with _progress(topo.nranks >= PROGRESS_RANKS) as stages, warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", CollcWarning)
            result = compile_xml(topo, args.algorithm, kind, inplace=args.inplace, root=root, params=params,
                                 chunks=args.chunks, instances=args.instances, proto=Proto(args.protocol),
                                 dialect=dialect, min_bytes=min_b, max_bytes=max_b, progress=stages.tell,
                                 shard=args.shard_per_rank, rank_progress=stages.ranks, jobs=jobs, ranks=ranks,
                                 dump=frozenset(dump), keep_schedule=bool(args.report), shard_dir=staged)
    except BaseException:
        if staged is not None:
            discard(staged)
        raise
    for w in said:
        if not issubclass(w.category, CollcWarning):    # not ours: shown as Python shows it
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    for text in dict.fromkeys(str(w.message) for w in said if issubclass(w.category, CollcWarning)):
        print(f"collc: warning: {text}", file=sys.stderr)   # a frontend's advice: one line each, once
    if dump:
        _write_dumps(result.dumps, dump, args.dump_dir)
    if not result.report.ok:
        if staged is not None:
            discard(staged)
        _print_report(result.report)
        print(f"collc: {out}: the lowered program fails its check; no file written", file=sys.stderr)
        return 1
    p = result.program
    if staged is not None:
        filename = f"{p.name}.xml"
        publish_shards(staged, dialect, out, filename)
        where = f"{out}/rank-<0..{p.ngpus - 1}>/{filename} and {out}/{WRAPPER}"
    elif result.shards is not None and ranks is not None:
        filename = f"{p.name}.xml"
        write_rank_shards(result.shards, dialect, out, filename)
        where = f"{out}/rank-<{ranks.start}..{ranks.stop - 1}>/{filename} and {out}/{WRAPPER}"
    elif result.shards is not None:
        filename = f"{p.name}.xml"
        write_shards(result.shards, dialect, out, filename)
        where = f"{out}/rank-<0..{p.ngpus - 1}>/{filename} and {out}/{WRAPPER}"
    else:
        write_atomic(out, result.text)
        where = str(out)
    tbs, steps = result.shape if not p.gpus else (max(len(g.tbs) for g in p.gpus),
                                                  max(len(t.steps) for g in p.gpus for t in g.tbs))
    checked = "checked" if ranks is None else \
        f"these ranks checked alone; run `collc check {out}` once every node has written its ranks"
    print(f"wrote {where}: {p.coll} on {p.ngpus} ranks, {result.nsteps} steps, {p.nchannels} channel(s), "
          f"up to {tbs} tbs/gpu and {steps} steps/tb, {dialect.value} dialect, {checked}")
    if (staged is not None or result.shards is not None) and ranks is None:
        print(f"launch with: mpirun -np {p.ngpus} {out}/{WRAPPER} <command>")
    if args.timings:
        for line in _timing_lines(result.timings):
            print(line)
    if args.report:
        from collc.sim.analysis import bus_bandwidth
        from collc.sim.report import schedule_report
        from collc.sim.runner import ModelParams, time_program

        assert result.schedule is not None       # kept with --report
        for line in schedule_report(result.schedule, topo):
            print(line)
        if p.ngpus <= REPORT_SIM_RANKS:
            size = 1 << 30
            t = time_program(result.program, topo, [size], ModelParams())[0]
            print(f"simulated algbw of {where} at 1 GiB (event model): "
                  f"{bus_bandwidth(p.kind, p.ngpus, size, t)[0]:.2f} GB/s")
    return 0


def _params_and_root(args: argparse.Namespace) -> tuple[dict[str, str], int | None]:
    """``--param KEY=VALUE`` as a dict, and the root (``--root`` or ``--param root=K``)."""
    params: dict[str, str] = {}
    for item in args.param:
        if "=" not in item:
            raise UsageError(f"--param {item!r} must be KEY=VALUE")
        k, v = item.split("=", 1)
        params[k.strip()] = v.strip()
    root = args.root
    if "root" in params:  # also accepted as --param root=K
        text = params.pop("root")
        if not text.lstrip("-").isdigit():
            raise UsageError(f"--param root={text!r} must be a rank number")
        root = int(text)
    return params, root


def _build_plan(args: argparse.Namespace) -> int:
    """``collc build --backend mscclpp``: an MSCCL++ execution plan, checked before it is written."""
    from collc.backends.msccl_xml import write_atomic
    from collc.backends.mscclpp import read_plan
    from collc.backends.mscclpp_loader import PlanEntry, register_snippet, runner_command
    from collc.compiler.mscclpp.lower import MAX_CHANNELS_PER_TB
    from collc.compiler.mscclpp.plan import Protocol
    from collc.driver import compile_plan
    from collc.errors import EmitError
    from collc.topology import parse_spec

    if args.shard_per_rank:
        raise UsageError("--shard-per-rank is for MSCCL XML; an MSCCL++ plan is one file")
    if args.protocol not in (p.value for p in Protocol):
        raise UsageError(f"--protocol {args.protocol}: MSCCL++ plans run Simple or LL")
    bounded_int(args.chunks, "--chunks", 1, MAX_CHUNKS, "the pieces of a chunk need distinct scratch slots")
    bounded_int(args.instances, "--instances", 1, MAX_CHANNELS_PER_TB, "every instance takes channels of its own")
    min_b, max_b = _bytes_arg(args.min_bytes, "--min-bytes"), _bytes_arg(args.max_bytes, "--max-bytes")
    if max_b and min_b > max_b:
        raise UsageError(f"--min-bytes {min_b} exceeds --max-bytes {max_b}")
    from collc.check.plan.releases import parse_releases
    releases = parse_releases(args.mscclpp_version)
    out = output_file(args.output)
    reg = output_file(args.register, "--register") if args.register is not None else None
    if reg is not None and reg.suffix != ".py":
        raise UsageError(f"--register {show(reg)}: the module's name must end in .py")
    topo: Topology = parse_spec(args.topology)
    check_build_ranks(topo.nranks)
    kind = CollKind.parse(args.collective)
    params, root = _params_and_root(args)
    result = compile_plan(topo, args.algorithm, kind, inplace=args.inplace, root=root, params=params,
                          chunks=args.chunks, instances=args.instances, protocol=Protocol(args.protocol),
                          min_bytes=min_b, max_bytes=max_b, releases=releases)
    if result.problems:
        for line in result.problems[:20]:
            print(f"error: {line}", file=sys.stderr)
        print(f"collc: {out}: the lowered plan fails its check; no file written", file=sys.stderr)
        return 1
    p = result.plan
    write_atomic(out, result.text)
    tbs = max(len(g.threadblocks) for g in p.gpus)
    ops = max(len(t.ops) for g in p.gpus for t in g.threadblocks)
    print(f"wrote {out}: {p.collective} on {p.nranks} ranks, {result.schedule.nsteps} steps, {p.protocol.value}, "
          f"up to {tbs} tbs/gpu and {ops} ops/tb, mscclpp plan, checked")
    print(f"run it alone: {runner_command(str(out), p.name, p.nranks, p.inplace)}")
    if reg is not None:
        entries = []
        for f in sorted(out.parent.glob("*.json")):
            try:
                q = read_plan(f)
            except EmitError:
                continue      # not a plan: the v0.8 shim would fail on it too (named below)
            entries.append(PlanEntry(f.name, q.name, q.collective, q.nranks))
        rel = os.path.relpath(out.parent.resolve(), reg.parent.resolve())
        write_atomic(reg, register_snippet(rel, entries, reg.stem))
        print(f"wrote {reg}: registers {len(entries)} plan(s) of {out.parent} (MSCCL++ v0.9+)")
    print(f"MSCCL++ <= v0.8: export MSCCLPP_EXECUTION_PLAN_DIR={out.parent.resolve()} (plans only in it)")
    if args.timings:
        for line in _timing_lines(result.timings):
            print(line)
    return 0


MAX_JOBS = 1024
_RANKS = re.compile(r"(\d{1,7})(?:-(\d{1,7}))?\Z")


def _int_arg(text: str, flag: str) -> int:
    if not re.fullmatch(r"\d{1,9}", text.strip()):
        raise UsageError(f"{flag} {text!r} must be a whole number")
    return int(text)


def _ranks_arg(text: str | None, nranks: int, shard: bool) -> range | None:
    """``--ranks A-B`` (or ``A``) as a range of ranks, checked against the topology."""
    if text is None:
        return None
    if not shard:
        raise UsageError("--ranks needs --shard-per-rank (a single file holds every rank)")
    if text.strip() == "auto":
        from collc.backends.shards import task_ranks

        return task_ranks(nranks, os.environ)
    m = _RANKS.match(text.strip())
    if not m:
        raise UsageError(f"--ranks {text!r} must be A-B or A (rank numbers, A <= B)")
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    if lo > hi:
        raise UsageError(f"--ranks {text!r}: the first rank {lo} is above the last {hi}")
    if hi >= nranks:
        raise UsageError(f"--ranks {text!r}: the topology has ranks 0..{nranks - 1}")
    return range(lo, hi + 1)


def _dump_arg(text: str | None, directory: str | None) -> list[str]:
    from collc.compiler.pipeline import PASS_NAMES

    if text is None:
        if directory is not None:
            raise UsageError("--dump-dir needs --dump-ir PASS[,PASS]")
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PASS_NAMES]
    if unknown or not names:
        raise UsageError(f"--dump-ir {text!r}: passes are {','.join(PASS_NAMES)}")
    if directory is None:
        raise UsageError("--dump-ir needs --dump-dir DIR")
    output_dir(directory, "--dump-dir")
    return names


def _write_dumps(dumps: dict[str, list[str]], names: list[str], directory: str) -> None:
    """One file per pass, ``DIR/<position>-<pass>.txt``, numbered in pipeline order."""
    from collc.compiler.pipeline import PASS_NAMES
    from collc.outputs import write_file

    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--dump-dir {show(target)}: {exc.strerror}") from None
    for name in names:
        pos = PASS_NAMES.index(name) + 1
        write_file(target / f"{pos}-{name}.txt", "\n".join(dumps.get(name, [])) + "\n", encoding="utf-8")


def _timing_lines(timings: dict[str, float]) -> list[str]:
    """The per-stage table of ``collc build --timings``: CPU seconds (``collc.clock``) of the
    stages in pipeline order, each lowering pass under ``lower``, the wall time, then the
    process's peak resident memory.  ``pairing`` (when present) is a partial build's probe of
    the paired-tb layout over every rank, or all of an attempt whose paired layout failed its
    check and was lowered again unpaired (a safety net: the lowering pairs only tbs that cannot
    block, docs/runtime-model.md)."""
    import resource

    stages = ["frontend", "verify_schedule", "pairing", "lower", "emit", "check"]
    total = sum(timings.get(k, 0.0) for k in stages)
    lines = [f"{'stage':<24s} {'cpu s':>9s} {'share':>6s}"]
    for k in stages:
        if k in timings:
            lines.append(f"{k:<24s} {timings[k]:9.3f} {timings[k] / total if total else 0:6.1%}")
        if k == "lower":
            lines += [f"  {name[5:]:<22s} {t:9.3f}" for name, t in timings.items() if name.startswith("pass:")]
    lines.append(f"{'total':<24s} {total:9.3f}")
    if "wall" in timings:
        lines.append(f"{'wall':<24s} {timings['wall']:9.3f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
    lines.append(f"peak memory {peak / 1024:.0f} MiB")
    jobs = int(timings.get("workers", 1))
    if jobs > 1:
        largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        lines.append(f"{jobs} worker processes ran the per-rank passes and printing (their CPU seconds are "
                     f"summed above; largest worker {largest / 1024:.0f} MiB)")
    return lines


def _bytes_arg(text: str, flag: str) -> int:
    if text == "0":
        return 0        # the default: no need to import the simulator's size parser
    from collc.sim.runner import parse_size

    try:
        return check_bytes(parse_size(text), flag)
    except UsageError:
        raise
    except CollcError as exc:
        raise UsageError(f"{flag}: {exc}") from None


REPORT_SIM_RANKS = 256  # --report simulates the emitted file at 1 GiB up to this many ranks
PROGRESS_RANKS = 128  # compiles this large take seconds: show the stages on a terminal
STAGES = 5


class _QuietBar:
    """What ``_Stages`` uses of a tqdm bar, when none is drawn (tqdm costs 50 ms of start-up)."""

    def __init__(self) -> None:
        self.desc = ""

    def update(self, n: int) -> None:
        pass

    def set_description_str(self, desc: str) -> None:
        self.desc = desc

    def close(self) -> None:
        pass


class _Stages:
    """A tqdm bar over the compile stages, on an interactive stderr only; the lowering,
    the longest stage at scale, also shows how many ranks it has done."""

    def __init__(self, wanted: bool) -> None:
        self.bar: Any = _QuietBar()
        if wanted and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=STAGES, unit="stage", leave=False, file=sys.stderr,
                            bar_format="{desc:<32} {bar} {n_fmt}/{total_fmt} [{elapsed}]")
        self.stage = ""

    def tell(self, stage: str) -> None:
        if self.stage:
            self.bar.update(1)
        self.stage = stage
        self.bar.set_description_str(stage)

    def ranks(self, done: int, total: int) -> None:
        self.bar.set_description_str(f"{self.stage} ({done}/{total} ranks)")


@contextmanager
def _progress(wanted: bool) -> Iterator[_Stages]:
    stages = _Stages(wanted)
    try:
        yield stages
    finally:
        stages.bar.close()


def _expand_paths(paths: Sequence[str]) -> list[Path | CollcError]:
    """Files to check, in order; a shard directory (rank-<K>/ subdirectories) stays one entry.

    A path that cannot be checked at all becomes the error to report for it, so that the
    other paths are still checked.
    """
    from collc.backends.shards import is_shard_dir

    out: list[Path | CollcError] = []
    for raw in paths:
        p = Path(raw)
        if is_shard_dir(p):
            out.append(p)
        elif p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.suffix in (".xml", ".json") and q.is_file())
            out.extend(found or [UsageError(f"{show(p)}: no .xml files (or .json plans) in this directory")])
        elif os.path.lexists(p):
            out.append(p)
        else:
            out.append(UsageError(f"{show(p)}: no such file"))
    return out


def _print_report(rep: Report | PlanReport) -> None:
    status = "PASS" if rep.ok else "FAIL"
    dialect = getattr(rep, "dialect", None)
    print(f"{status} {show(rep.path)} ({dialect.value if dialect is not None else 'mscclpp'})")
    if "verdict" in rep.info:      # a plan whose verdict differs between MSCCL++ releases
        print(f"  releases: {show(str(rep.info['verdict']))}")
    for f in rep.findings:
        print(f"  {f.severity}: [{f.code}] {show(f.message)}")


def _is_plan(p: Path) -> bool:
    from collc.backends.mscclpp import is_plan_file
    return is_plan_file(p)


def _check_one(p: Path, args: argparse.Namespace, topo: Topology | None,
               releases: tuple[Release, ...]) -> Report | PlanReport:
    from collc.backends.msccl_xml import read_xml
    from collc.backends.shards import is_shard_dir
    from collc.check import check_parsed
    from collc.memory import gc_paused

    if _is_plan(p):
        from collc.backends.mscclpp import read_plan
        from collc.check.plan.placement import check_placement
        from collc.check.plan.check import check_plan
        from collc.check.plan.report import PlanReport
        plan = read_plan(p)
        rep = check_plan(plan, str(p), releases)
        placed = PlanReport(str(p))
        check_placement(plan, topo, placed)
        rep.findings[:0] = placed.findings       # where the ranks run comes before what the simulation found
        return rep
    dialect = Dialect(args.dialect)
    # the collector paused from reading to verdict: a program read back is millions of acyclic
    # objects, and a collection during the check would only rescan them
    with gc_paused():
        if is_shard_dir(p):
            from collc.backends.shard_check import check_shard_dir
            return check_shard_dir(p, dialect, root=args.root, data_check=args.data, jobs=_check_jobs(args))
        return check_parsed(read_xml(p), dialect, root=args.root, data_check=args.data)


def _check_jobs(args: argparse.Namespace) -> int:
    from collc.compiler.pipeline import default_jobs
    jobs = getattr(args, "jobs", None)
    return default_jobs() if jobs is None else bounded_int(_int_arg(jobs, "--jobs"), "--jobs", 1, MAX_JOBS,
                                                            "each worker is a process of its own")


def cmd_check(args: argparse.Namespace) -> int:
    """A verdict per file: PASS, FAIL, or ERROR for a file that is not checkable input.

    Exit 2 if any file was bad input (the run could not judge everything it was given),
    else 1 if any check failed, else 0; stderr gets one line only when some file was bad.
    """
    from collc.check.plan.report import PlanReport
    from collc.check import Report
    from collc.check.plan.releases import parse_releases

    releases = parse_releases(args.mscclpp_version)     # a bad value is refused before any file is read
    _check_jobs(args)                                   # and so is a bad --jobs
    topo = None
    if getattr(args, "topology", None) is not None:
        from collc.topology import parse_spec
        topo = parse_spec(args.topology)
    results: list[tuple[str, Report | PlanReport | CollcError]] = []
    for item in _expand_paths(args.paths):
        if isinstance(item, CollcError):
            results.append(("", item))
            continue
        try:
            results.append((str(item), _check_one(item, args, topo, releases)))
        except CollcError as exc:
            results.append((str(item), exc))
    bad = [(path, r) for path, r in results if isinstance(r, CollcError)]
    reports = [r for _, r in results if isinstance(r, (Report, PlanReport))]
    if bad and not reports:     # nothing was checked: the one stderr line says why
        raise UsageError(_not_checked(bad, len(results)))
    if args.json:
        print(json.dumps([r.to_json() if isinstance(r, (Report, PlanReport)) else
                          {"path": path, "ok": False, "error": one_line(r)}
                          for path, r in results], indent=2, sort_keys=True))
    else:
        for path, r in results:
            if isinstance(r, (Report, PlanReport)):
                _print_report(r)
            else:
                msg = one_line(r)
                print(f"ERROR {msg}" if not path or show(path) in msg else f"ERROR {show(path)}: {msg}")
        failed = sum(not r.ok for r in reports)
        print(f"{len(reports) - failed} passed, {failed} failed" + (f", {len(bad)} not checked" if bad else ""))
    if bad:
        raise UsageError(_not_checked(bad, len(results)))
    return 0 if all(r.ok for r in reports) else 1


def _not_checked(bad: Sequence[tuple[str, Report | PlanReport | CollcError]], total: int) -> str:
    first = one_line(bad[0][1])
    return first if len(bad) == 1 else f"{len(bad)} of {total} inputs were not checked; first: {first}"


def _model(args: argparse.Namespace) -> ModelParams:
    from collc.sim.runner import PROXY_US, ModelParams

    finite(args.alpha, "--alpha")
    finite(args.hop_latency, "--hop-latency")
    finite(args.reduce_cost, "--reduce-cost")
    proxy = PROXY_US if args.proxy_cost is None else finite(args.proxy_cost, "--proxy-cost")
    if args.link_bw is not None:
        finite(args.link_bw, "--link-bw", MIN_LINK_BW)
    return ModelParams(args.model, args.alpha, args.link_bw, args.hop_latency, args.reduce_cost, proxy)


def _candidates(specs: Sequence[str], chunks: Sequence[int] = (1,), instances: Sequence[int] = (1,),
                protos: Sequence[Proto] = (Proto.SIMPLE,)) -> list[Candidate]:
    from collc.tuning import Candidate

    if len(specs) * len(chunks) * len(instances) * len(protos) > MAX_CANDIDATES:
        raise UsageError(f"{len(specs) * len(chunks) * len(instances) * len(protos)} candidates (algorithms x "
                         f"chunks x instances x protocols): at most {MAX_CANDIDATES}, each is a full build")
    out = []
    for spec in specs:
        spec, _, own = spec.partition("@")   # NAME[:k=v,..]@TOPOLOGY: the candidate's own fabric
        name, _, rest = spec.partition(":")
        params: list[tuple[str, str]] = []
        for item in filter(None, rest.split(",")):
            if "=" not in item:
                raise UsageError(f"--algorithm {spec!r}: parameters are key=value")
            k, v = item.split("=", 1)
            params.append((k, v))
        for c in chunks:
            for i in instances:
                for pr in protos:
                    out.append(Candidate(name, tuple(params), c, i, pr, own))
    return out


def _applicable(topo: Topology, kind: CollKind) -> list[str]:
    """Every algorithm that applies to ``kind`` on ``topo`` with its default parameters."""
    from collc.frontends.registry import algorithms

    names = [a.name for a in algorithms() if a.refusal_of_kind(topo, kind) is None]
    if not names:
        raise UsageError(f"no registered algorithm runs {kind.value} on {topo.name}")
    return names


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r} must be comma-separated integers") from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag} {text!r} must list integers >= 1")
    return values


def cmd_simulate(args: argparse.Namespace) -> int:
    from collc.backends.msccl_xml import read_xml
    from collc.backends.shards import is_shard_dir, read_shards
    from collc.check import check_parsed
    from tqdm import tqdm

    from collc.sim.runner import bound_busbw, count_multiple, human, parse_sizes, rows_for, time_program
    from collc.topology import parse_spec
    from collc.tuning import Comparison, model_summary, plot_busbw

    if _has_layout(args):
        from collc.layout_cmd import simulate_layout
        _model(args)
        return simulate_layout(args)
    if args.algorithm is not None or args.collective is not None:
        raise UsageError("--algorithm and --collective on simulate go with --layout or --groups")
    if args.path is None:
        raise UsageError("simulate needs FILE (or --layout/--groups with --algorithm and --collective)")
    path = Path(args.path)
    if not os.path.lexists(path):
        raise UsageError(f"{show(path)}: no such file")
    params = _model(args)
    sizes = parse_sizes(args.sizes)
    if _is_plan(path):
        from collc.check.plan.releases import parse_releases
        releases = parse_releases(args.mscclpp_version)     # a bad value is refused before any work
        if args.plot:
            plot_file(args.plot)
        return _simulate_plan(path, args, params, sizes, releases)
    if args.plot:
        plot_file(args.plot)
    dialect = Dialect(args.dialect)
    parsed = read_shards(path) if is_shard_dir(path) else read_xml(path)
    report = check_parsed(parsed, dialect, sharded=is_shard_dir(path))
    if not report.ok:
        _refuse_failing(report, path, "programs")
    topo = parse_spec(args.topology)
    with tqdm(total=len(sizes), unit="size", leave=False, file=sys.stderr,
              disable=not sys.stderr.isatty() or params.model == "step") as bar:
        def tick(done: int, total: int) -> None:
            bar.n = done
            bar.refresh()
        times = time_program(parsed.program, topo, sizes, params, tick)
    rows = rows_for(parsed.program, sizes, times)
    if args.json:
        print(json.dumps({"file": str(path), "topology": topo.name, "model": params.model,
                          "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw,
                          "collective": parsed.program.coll, "ngpus": parsed.program.ngpus,
                          "results": [r.to_json() for r in rows]}, indent=2, sort_keys=True))
    else:
        print(f"{parsed.program.coll} on {topo.name}, {model_summary(params, topo)}")
        print("\n".join(textwrap.wrap(SELECTED_NOTE.format(multiple=count_multiple(parsed.program)), LIST_WIDTH)))
        print(f"{'size':>10s} {'time (us)':>12s} {'algbw GB/s':>11s} {'busbw GB/s':>11s}  selected")
        for r in rows:
            print(f"{human(r.size):>10s} {r.time_us:12.2f} {r.algbw:11.3f} {r.busbw:11.3f}  "
                  f"{'yes' if r.selected else 'no (window or divisibility)'}")
    if args.plot:
        plot_busbw(Comparison(topo.name, parsed.program.kind, sizes, {path.name: rows}, {},
                              bound_busbw(parsed.program.kind, topo, sizes, params), model_summary(params, topo)),
                   args.plot)
    return 0


def _refuse_failing(report: Report | PlanReport, path: Path, what: str) -> None:
    """A file that fails its check is bad input to ``simulate`` (exit 2): the report on stdout, and one
    stderr line naming the first error."""
    _print_report(report)
    first = report.errors()[0]
    raise UsageError(f"{show(path)} fails its check ([{first.code}] {first.message}); simulate only times "
                     f"correct {what}")


def _simulate_plan(path: Path, args: argparse.Namespace, params: ModelParams, sizes: list[int],
                   releases: tuple[Release, ...]) -> int:
    """``collc simulate PLAN.json``: check the plan, then time it with the one-sided event model."""
    from collc.backends.mscclpp import read_plan
    from collc.check.plan.check import check_plan
    from collc.sim.plan_event import time_plan, timing_refusal
    from collc.sim.runner import human
    from collc.topology import parse_spec
    from collc.tuning import Comparison, plan_rows, plot_busbw

    plan = read_plan(path)
    report = check_plan(plan, str(path), releases)
    if not report.ok:
        _refuse_failing(report, path, "plans")
    if params.model != "event":
        raise UsageError("--model step is for MSCCL XML; plans are timed with the event model")
    why = timing_refusal(plan)
    if why is not None:
        raise UsageError(f"{show(path)}: {why}")
    topo = parse_spec(args.topology)
    if topo.nranks != plan.nranks:
        raise UsageError(f"the plan has {plan.nranks} ranks but {topo.name} has {topo.nranks}")
    times = time_plan(plan, topo, sizes, alpha_us=params.alpha_us, link_bw=params.link_bw,
                      hop_latency_us=params.hop_latency_us, reduce_us_per_byte=params.reduce_us_per_byte,
                      proxy_us=params.proxy_us)
    rows = plan_rows(plan, sizes, times)
    if args.json:
        print(json.dumps({"file": str(path), "topology": topo.name, "model": "event-plan",
                          "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw,
                          "collective": plan.collective, "ngpus": plan.nranks, "protocol": plan.protocol.value,
                          "results": [r.to_json() for r in rows]}, indent=2, sort_keys=True))
    else:
        print(f"{plan.collective} on {topo.name}, one-sided event model, {plan.protocol.value}, "
              f"alpha {params.alpha_us} us")
        print("\n".join(textwrap.wrap("selected: whether MSCCL++ would run this plan for a call of that size (its "
                                       "message-size window and buffer alignment); 'no' rows predict a size "
                                       "another plan or NCCL would serve", LIST_WIDTH)))
        print(f"{'size':>10s} {'time (us)':>12s} {'algbw GB/s':>11s} {'busbw GB/s':>11s}  selected")
        for r in rows:
            print(f"{human(r.size):>10s} {r.time_us:12.2f} {r.algbw:11.3f} {r.busbw:11.3f}  "
                  f"{'yes' if r.selected else 'no (window or alignment)'}")
    if args.plot:
        from collc.sim.runner import bound_busbw
        kind = CollKind.parse(plan.collective)
        plot_busbw(Comparison(topo.name, kind, sizes, {path.name: rows}, {}, bound_busbw(kind, topo, sizes, params)),
                   args.plot)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from collc.sim.runner import parse_sizes
    from collc.topology import parse_spec
    from collc.tuning import compare, plot_busbw

    params = _model(args)
    sizes = parse_sizes(args.sizes)
    given = _candidates(args.algorithm) if args.algorithm else None   # a typo fails before any work
    if args.plot:              # a plot only where asked for (nothing written into the cwd uninvited)
        plot_file(args.plot)
    if args.html:
        output_file(args.html, "--html")
    topo = parse_spec(args.topology)
    check_build_ranks(topo.nranks)
    kind = CollKind.parse(args.collective)
    cands = given or _candidates(_applicable(topo, kind))
    with tqdm(total=len(cands), unit="alg", leave=False, file=sys.stderr, disable=not sys.stderr.isatty()) as bar:
        def tell(label: str) -> None:
            bar.set_description_str(label)
            bar.update(1)
        result = compare(topo, kind, cands, sizes, params, args.inplace, args.root, tell, backend=args.backend)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        print(result.table())
    if args.plot:
        plot_busbw(result, args.plot)
        if not args.json:
            print(f"plot: {args.plot}")
    if args.html:
        from collc.show.build import comparison_page
        _write_html(args.html, comparison_page(result, _command_line("compare")), args.json)
    return 0


def _command_line(command: str) -> str:
    """The command as typed, where this process is ``collc`` (else only its name: an in-process call)."""
    import shlex
    argv = sys.argv[1:]
    return "collc " + " ".join(shlex.quote(a) for a in argv) if argv[:1] == [command] else f"collc {command} ..."


def _write_html(path: str, page: str, quiet: bool = False) -> None:
    from collc.outputs import write_file
    write_file(path, page, encoding="utf-8")
    if not quiet:
        print(f"html: {path}")


def cmd_tune(args: argparse.Namespace, timer: Callable[[Any, Topology], list[float]] | None = None) -> int:
    """``timer(program, fabric)``: the times of a candidate (default: alone on the fabric)."""
    from tqdm import tqdm

    if _has_layout(args):
        from collc.layout_cmd import tune_layout
        return tune_layout(args, cmd_tune)

    from collc.sim.runner import human, parse_sizes
    from collc.topology import parse_spec
    from collc.tuning import PLAN_MODULE, PLAN_SUBDIR, PREBUILT_MODEL, model_summary, tune, tune_plans

    params = _model(args)
    sizes = parse_sizes(args.sizes)
    out = output_dir(args.output)
    if args.html:
        output_file(args.html, "--html")
    dialect = Dialect(args.dialect)
    try:
        protos = [Proto(x.strip()) for x in args.protocols.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--protocols {args.protocols!r}: choose from Simple, LL, LL128") from None
    if not protos:
        raise UsageError(f"--protocols {args.protocols!r}: choose from Simple, LL, LL128")
    chunks = [bounded_int(c, "--chunks", 1, MAX_CHUNKS) for c in _ints(args.chunks, "--chunks")]
    instances = [bounded_int(i, "--instances", 1, LIMITS[dialect].max_channels)
                 for i in _ints(args.instances, "--instances")]
    given = _candidates(args.algorithm, chunks, instances, protos) if args.algorithm else None
    topo = parse_spec(args.topology)
    check_build_ranks(topo.nranks)
    kind = CollKind.parse(args.collective)
    cands = given or _candidates(_applicable(topo, kind), chunks, instances, protos)
    with tqdm(total=len(cands), unit="cand", leave=False, file=sys.stderr,
              disable=not sys.stderr.isatty()) as bar:
        def tell(label: str) -> None:
            bar.set_description_str(label)
            bar.update(1)
        seen: list[Any] = []
        if args.backend == "mscclpp":
            windows = tune_plans(topo, kind, cands, sizes, params, out, args.inplace, args.root, tell,
                                 on_compare=seen.append)
        else:
            windows = tune(topo, kind, cands, sizes, params, out, dialect, args.inplace, args.root, tell,
                           on_compare=seen.append, timer=timer)
    if args.html:
        from collc.show.build import comparison_page
        _write_html(args.html, comparison_page(seen[0], _command_line("tune"), windows), args.json)
    if args.json:
        print((out / "MANIFEST.json").read_text(), end="")
        return 0
    if args.backend == "mscclpp":
        print(f"windows chosen by the {seen[0].model}")
        print(f"{'window':>20s}  {'candidate':30s} file")
        for w in windows:
            hi = human(w.max_bytes + 1) if w.max_bytes else "inf"
            print(f"{human(w.min_bytes):>8s} .. {hi:<8s}  {w.candidate:30s} {out}/{PLAN_SUBDIR}/{w.file}")
        print(f"manifest: {out}/MANIFEST.json; MSCCL++ up to v0.8: MSCCLPP_EXECUTION_PLAN_DIR={out}/{PLAN_SUBDIR}; "
              f"v0.9+: import {out}/{PLAN_MODULE}.py and call register(rank, nranks_per_node) (docs/mscclpp.md)")
        return 0
    print(f"windows chosen by the {model_summary(params, topo)}")
    print(f"{'window':>20s} {'count multiple':>14s}  {'candidate':30s} file")
    for w in windows:
        hi = human(w.max_bytes + 1) if w.max_bytes else "inf"
        print(f"{human(w.min_bytes):>8s} .. {hi:<8s} {w.count_multiple:>14d}  {w.candidate:30s} "
              f"{out}/msccl-algorithms/{w.file}")
    print("\n".join(textwrap.wrap("count multiple: the runtime uses a file only when the call's element count "
                                   "is a multiple of it; other counts run NCCL's own algorithm silently", LIST_WIDTH)))
    if params != PREBUILT_MODEL:
        print("note: schedules/ was tuned with --model step --alpha 5 on nominal links; this model differs, "
              "so its windows can differ from the prebuilt ones")
    print(f"manifest: {out}/MANIFEST.json; point MSCCL_ALGO_DIR at {out}/msccl-algorithms")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from collc.show.cli import show_command
    return show_command(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from collc.runtime_tests.cli import run_bench
    return run_bench(args)


#: What each command imports before the signal handlers are installed: a signal during an
#: import would leave a half-initialised module (numpy reports "initialization failed"), while
#: before the handlers it ends the process as Python does.
COMMAND_MODULES = {
    "list": ("collc.frontends.registry", "collc.topology"),
    "topology": ("collc.topology", "collc.frontends", "collc.sim.runner"),   # frontends: find:, recipe: specs
    "build": ("tqdm", "collc.driver", "collc.sim.report", "collc.sim.runner", "collc.backends.shards"),
    "check": ("collc.check", "collc.backends.shards"),
    "simulate": ("tqdm", "collc.check", "collc.backends.shards", "collc.tuning"),
    "compare": ("tqdm", "collc.tuning"),
    "tune": ("tqdm", "collc.tuning"),
    "bench": ("collc.runtime_tests.launch", "collc.runtime_tests.report"),
    "show": ("collc.show.build", "plotly.graph_objects", "collc.check", "collc.backends.shards"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; SIGINT/SIGTERM/SIGHUP remove its unfinished outputs and give 128 + the signal."""
    try:
        args = _parse(list(sys.argv[1:] if argv is None else argv))
        if isinstance(args, int):
            return args            # --help, or a usage error already reported
        for name in COMMAND_MODULES[args.command]:
            if name == "tqdm" and args.command == "build" and not sys.stderr.isatty():
                continue       # build draws its bar on a terminal only
            if name.startswith("collc.sim.") and args.command == "build" and not args.report:
                continue       # build simulates only for --report
            importlib.import_module(name)
        with interrupt_handlers():
            return _run(args)
    except Interrupted as exc:
        print(f"collc: interrupted by {exc}; unfinished output removed", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("collc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _parse(argv: list[str]) -> argparse.Namespace | int:
    """The parsed command line, or the exit code of --help or a usage error (reported)."""
    try:
        parser = _parser(bench="bench" in argv)
        args, extra = parser.parse_known_args(argv)
        if extra:
            raise UsageError(_unrecognized(parser, args, extra))
        _group_spec(args)
        return args
    except CollcError as exc:
        print(f"collc: {one_line(exc)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)


def _has_layout(args: argparse.Namespace) -> bool:
    """``--layout`` or ``--groups``: many groups of one job (collc.layout_cmd, docs/groups.md)."""
    return getattr(args, "layout", None) is not None or getattr(args, "groups", None) is not None


def _group_spec(args: argparse.Namespace) -> None:
    """``--topology SPEC --group G`` is ``--topology SPEC@G`` (docs/groups.md)."""
    group = getattr(args, "group", None)
    if group is None or _has_layout(args):
        return          # with --layout, --group names a dimension (collc.layout_cmd)
    if getattr(args, "topology", None) is None:
        raise UsageError("--group needs --topology SPEC (the fabric whose ranks it names)")
    if "@" in args.topology:
        raise UsageError(f"--topology {args.topology[:60]!r} already names a group (after '@'); give --group "
                         f"or SPEC@GROUP, not both")
    args.topology = f"{args.topology}@{group}"


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> str:
    """argparse's "unrecognized arguments", with the nearest options of the command given."""
    from collc.errors import nearest

    prog = "collc"
    options = [o for a in parser._actions for o in a.option_strings]
    for dest in ("command", "action"):           # down to the (sub)command's own parser
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, dest, None)
        if not subs or name not in subs[0].choices:
            break
        parser = subs[0].choices[name]
        prog = parser.prog
        options = [o for a in parser._actions for o in a.option_strings]
    shown = " ".join(show(x)[:40] for x in extra[:4]) + (" ..." if len(extra) > 4 else "")
    flags = [x.partition("=")[0] for x in extra if x.startswith("-")]
    close = nearest(flags[0], options) if flags else []
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"unrecognized arguments: {shown}; {hint}see `{prog} --help`"


def _run(args: argparse.Namespace) -> int:
    try:
        handler = {"list": cmd_list, "topology": cmd_topology, "build": cmd_build, "check": cmd_check,
                   "simulate": cmd_simulate, "compare": cmd_compare, "tune": cmd_tune, "bench": cmd_bench,
                   "show": cmd_show}
        return handler[args.command](args)
    except CollcError as exc:
        print(f"collc: {one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from collc._startup import finish
    finish(main())
