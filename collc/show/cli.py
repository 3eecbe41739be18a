"""``collc show``'s arguments and command (a thin layer over :mod:`collc.show`; docs/show.md).

Imports nothing heavy at module level: the parser is built for every ``collc`` call.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from collc.errors import UsageError

DIALECTS = ("executor", "rccl", "legacy")


def add_show_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("path", metavar="FILE", help="an MSCCL XML file, an MSCCL++ plan (.json) or a shard directory "
                   "(collc build --shard-per-rank)")
    a.add_argument("--topology", default=None, metavar="SPEC",
                   help="the fabric the schedule runs on (required: an XML or plan file does not name its fabric)")
    a.add_argument("--size", default="64MiB", help="message size of the link load and the timeline (default 64MiB)")
    a.add_argument("--sizes", default="1KiB:1GiB", help="sizes of the per-size view: LO:HI (powers of two) or a,b,c "
                   "(default 1KiB:1GiB)")
    a.add_argument("--model", choices=["step", "event"], default="step",
                   help="model of the per-size view (default step; the timeline always uses the event model)")
    a.add_argument("--alpha", type=float, default=5.0, help="latency per message in us (default 5)")
    a.add_argument("--link-bw", type=float, default=None, help="GB/s for every link (default: the topology's)")
    a.add_argument("--hop-latency", type=float, default=0.0, help="extra us per link crossed (default 0)")
    a.add_argument("--reduce-cost", type=float, default=0.0, help="us per byte reduced (default 0)")
    a.add_argument("--dialect", choices=DIALECTS, default="executor",
                   help="the runtime the XML is checked for: executor (default), rccl, legacy")
    a.add_argument("--no-others", action="store_true",
                   help="leave the other applicable algorithms out of the per-size view (they are each built and "
                        "timed, as collc compare does: seconds on 64 ranks)")
    a.add_argument("-o", "--output", required=True, metavar="HTML", help="the page to write (one self-contained file)")


def _command(args: argparse.Namespace) -> str:
    """The command line that builds this page (from the parsed options, so in-process calls have one too)."""
    parts = ["collc", "show", args.path]
    if args.topology:
        parts += ["--topology", args.topology]
    defaults = {"size": "64MiB", "sizes": "1KiB:1GiB", "model": "step", "alpha": 5.0, "link_bw": None,
                "hop_latency": 0.0, "reduce_cost": 0.0, "dialect": "executor"}
    for key, default in defaults.items():
        value = getattr(args, key)
        if value != default:
            parts += [f"--{key.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    if args.no_others:
        parts.append("--no-others")
    return " ".join(shlex.quote(p) for p in parts + ["-o", args.output])


def show_command(args: argparse.Namespace) -> int:
    from collc.limits import Dialect
    from collc.inputs import MIN_LINK_BW, finite, output_file, show
    from collc.outputs import write_file
    from collc.sim.runner import ModelParams, parse_size, parse_sizes

    path = Path(args.path)
    output_file(args.output)
    if not os.path.lexists(path):
        raise UsageError(f"show: {show(path)}: no such file or directory")
    size = parse_size(args.size)
    if size < 1:
        raise UsageError(f"show: --size {args.size!r} must be positive")
    sizes = parse_sizes(args.sizes)
    for value, flag in ((args.alpha, "--alpha"), (args.hop_latency, "--hop-latency"),
                        (args.reduce_cost, "--reduce-cost")):
        finite(value, flag)
    if args.link_bw is not None:
        finite(args.link_bw, "--link-bw", MIN_LINK_BW)
    params = ModelParams(args.model, args.alpha, args.link_bw, args.hop_latency, args.reduce_cost)
    if args.topology is None:
        raise UsageError(f"show: {show(path)} does not name its fabric (MSCCL XML, plans and shard directories "
                         f"carry no topology); pass --topology SPEC, the one it was built for (e.g. torus:8x8)")
    from collc.topology import parse_spec
    topo = parse_spec(args.topology)
    from collc.show.build import load, schedule_page
    loaded = load(path, Dialect(args.dialect))
    if topo.nranks != loaded.nranks:
        raise UsageError(f"show: {show(path)} has {loaded.nranks} ranks but {topo.name} has {topo.nranks}; pass the "
                         f"--topology it was built for")
    page = schedule_page(loaded, topo, size, sizes, params, not args.no_others, _command(args))
    write_file(args.output, page, encoding="utf-8")
    print(f"wrote {args.output}: {len(page.encode('utf-8')) / 1e6:.1f} MB, {loaded.kind.value} on {topo.name}, "
          f"check {'passed' if loaded.ok else 'FAILED'}")
    return 0
