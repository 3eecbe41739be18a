#!/usr/bin/env python3
"""Rebuild the prebuilt, verified XMLs under schedules/ and their MANIFEST.md.

    python scripts/build_schedules.py          # rewrite schedules/
    python scripts/build_schedules.py --check  # exit 1 if a file would change (about 4 CPU minutes)
    python scripts/build_schedules.py --check --quick   # the same without the 32-rank plan libraries
                                                        # and MANIFEST.md (about 1 minute; what CI runs)

Each directory under schedules/ is meant to be used as one MSCCL_ALGO_DIR: it
holds only XML files (the runtimes parse every file in the directory), one per
collective and placement, with no overlapping selection.  MANIFEST.md sits at
the top level, outside those directories, for the same reason.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's collc, installed or not

from collc.driver import compile_xml, sync_files  # noqa: E402
from collc.ir.collective import CollKind  # noqa: E402
from collc.limits import Dialect  # noqa: E402
from collc.topology import parse_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "schedules"

# directory, file stem, topology, algorithm, collective, options (mirrors the CLI flags)
SETS: list[tuple[str, str, str, str, CollKind, dict[str, object]]] = []
for _dialect in (Dialect.EXECUTOR, Dialect.RCCL):
    _d = f"switch8-{_dialect.value}"
    SETS += [
        (_d, "allreduce-ring-inplace", "switch:8", "ring", CollKind.ALLREDUCE, {"instances": 4, "dialect": _dialect}),
        (_d, "allgather-ring-outofplace", "switch:8", "ring", CollKind.ALLGATHER,
         {"instances": 4, "dialect": _dialect}),
        (_d, "reducescatter-ring-outofplace", "switch:8", "ring", CollKind.REDUCESCATTER,
         {"instances": 4, "dialect": _dialect}),
        (_d, "alltoall-direct-outofplace", "switch:8", "direct", CollKind.ALLTOALL, {"dialect": _dialect}),
    ]
SETS += [
    ("ring8-legacy", "allreduce-ring-inplace", "ring:8", "ring", CollKind.ALLREDUCE,
     {"instances": 2, "dialect": Dialect.LEGACY}),
    ("hypercube16-executor", "allreduce-rhd-inplace", "hypercube:4", "recursive-halving-doubling",
     CollKind.ALLREDUCE, {}),
]
# 8x8 tori.  Swing: L below 128 KiB, B from there (where the event model puts the crossover
# with the paper's links: 50 GB/s, 0.1 us per message, 0.3 us per hop; `collc tune` redoes it
# for other links), and its reduce-scatter and allgather.  MultiTree: its three collectives.
_SW, _MT = "torus8x8-swing-executor", "torus8x8-multitree-executor"
SETS += [
    (_SW, "allreduce-swing-latency-inplace", "torus:8x8", "swing", CollKind.ALLREDUCE,
     {"params": {"variant": "latency"}, "max_bytes": 128 * 1024 - 1}),
    (_SW, "allreduce-swing-bandwidth-inplace", "torus:8x8", "swing", CollKind.ALLREDUCE, {"min_bytes": 128 * 1024}),
    (_SW, "reducescatter-swing-outofplace", "torus:8x8", "swing", CollKind.REDUCESCATTER, {}),
    (_SW, "allgather-swing-outofplace", "torus:8x8", "swing", CollKind.ALLGATHER, {}),
    (_MT, "allreduce-multitree-inplace", "torus:8x8", "multitree", CollKind.ALLREDUCE, {}),
    (_MT, "reducescatter-multitree-outofplace", "torus:8x8", "multitree", CollKind.REDUCESCATTER, {}),
    (_MT, "allgather-multitree-outofplace", "torus:8x8", "multitree", CollKind.ALLGATHER, {}),
]


# Tuned libraries per fabric: `collc tune` (step model, 5 us per message) picks the best candidate
# per size window among these, Simple and LL each; one directory per fabric.
TUNED: list[tuple[str, str, Dialect, str]] = [
    ("dgx-h100-executor", "switch:8:bw=450", Dialect.EXECUTOR,
     "8-GPU NVSwitch box, DGX H100 (18 NVLink4 links: 450 GB/s per GPU each way)"),
    ("dgx-a100-executor", "switch:8:bw=300", Dialect.EXECUTOR,
     "8-GPU NVSwitch box, DGX A100 (12 NVLink3 links: 300 GB/s per GPU each way)"),
    ("mi300x-rccl", "complete:8:bw=64", Dialect.RCCL, "MI300X x8 (one xGMI link per pair: 64 GB/s each way)"),
    ("torus4x4-executor", "torus:4x4:bw=50", Dialect.EXECUTOR, "4x4 torus (50 GB/s links)"),
]
TUNE_CANDIDATES: dict[CollKind, tuple[str, ...]] = {
    CollKind.ALLREDUCE: ("ring", "multitree", "recursive-halving-doubling", "direct"),
    CollKind.ALLGATHER: ("ring", "multitree", "recursive-doubling", "direct"),
    CollKind.REDUCESCATTER: ("ring", "multitree", "recursive-halving-doubling", "direct"),
}
# Multi-box fabrics with NICs and switches (ForestColl's, section 5.1): its tree packings against
# the ring and (allreduce) NCCL's double binary tree.
FABRIC_CANDIDATES: dict[CollKind, tuple[str, ...]] = {
    CollKind.ALLREDUCE: ("forestcoll", "ring", "double-binary-tree"),
    CollKind.ALLGATHER: ("forestcoll", "ring"),
    CollKind.REDUCESCATTER: ("forestcoll", "ring"),
}
FABRICS: list[tuple[str, str, Dialect, str]] = [
    ("a100-2x8-executor", "a100:2x8", Dialect.EXECUTOR,
     "2 DGX A100 boxes, 8 NICs each on two IB switches (rails), ForestColl's fabric"),
    ("mi250-16gcd-rccl", "mi250:1", Dialect.RCCL, "one MI250 box, 16 GCDs on xGMI, 16 GB/s per GCD to IB"),
    ("mi250-2x16-rccl", "mi250:2", Dialect.RCCL, "2 MI250 boxes of 16 GCDs, ForestColl's fabric"),
]
TUNE_SIZES = "1KiB:1GiB"


def render_tuned() -> tuple[dict[Path, str], list[str]]:
    """The tuned directories and their MANIFEST rows (window, candidate, predicted busbw)."""
    import json
    import tempfile

    from collc.compiler.msccl.program import Proto
    from collc.sim.runner import ModelParams, human, parse_sizes
    from collc.tuning import Candidate, tune

    files: dict[Path, str] = {}
    rows = ["| directory | fabric | file | collective | window (bytes) | candidate | predicted busbw (GB/s) at the "
            "window's smallest .. largest size |", "|---|---|---|---|---|---|---|"]
    plans = [(t, TUNE_CANDIDATES) for t in TUNED] + [(f, FABRIC_CANDIDATES) for f in FABRICS]
    for (directory, spec, dialect, fabric), candidates in plans:
        topo = parse_spec(spec)
        for kind, algs in candidates.items():
            cands = [Candidate(a, proto=p) for a in algs for p in (Proto.SIMPLE, Proto.LL)]
            with tempfile.TemporaryDirectory() as tmp:
                tune(topo, kind, cands, parse_sizes(TUNE_SIZES), ModelParams("step", 5.0), Path(tmp), dialect)
                manifest = json.loads((Path(tmp) / "MANIFEST.json").read_text())
                for w in manifest["windows"]:
                    name = Path(w["file"]).name
                    files[ROOT / directory / name] = (Path(tmp) / w["file"]).read_text()
                    hi = human(w["maxBytes"] + 1) if w["maxBytes"] else "inf"
                    bw = w["predicted_busbw_GBps"]
                    rows.append(f"| `{directory}` | {fabric} | `{name}` | {kind.value} | {human(w['minBytes'])} .. "
                                f"{hi} | {w['candidate']} | {bw[0]:.3g} .. {bw[-1]:.3g} |")
    return files, rows


# MSCCL++ plan libraries per fabric: each candidate family is lowered to a plan in each protocol of the
# library (a protocol the lowering refuses is recorded as
# considered but not built), timed by the one-sided event model (collc/sim/plan_event.py: 5 us per put, the proxy's
# 1 us per port-channel request, the fabric's nominal links) at the library's sizes, and the best per
# size window is built with that window as its message-size range and checked on every release.
# A plan counts at a size only if the executor would take it there (16-byte units per input chunk).
PLAN_SIZES: tuple[int, ...] = tuple(1024 * 4 ** i for i in range(11))     # 1KiB, 4KiB, ... 1GiB
# 32-rank fabrics: every 16x (1KiB, 16KiB, ... 1GiB), to keep `build_schedules.py --check` within minutes
PLAN_SIZES_32: tuple[int, ...] = tuple(1024 * 16 ** i for i in range(6))
PLAN_ALPHA_US = 5.0
_BOX_PLANS: dict[CollKind, tuple[str, ...]] = {
    CollKind.ALLREDUCE: ("ring", "multitree", "recursive-halving-doubling", "recursive-doubling", "direct"),
    CollKind.ALLGATHER: ("ring", "multitree", "recursive-doubling", "direct"),
    CollKind.REDUCESCATTER: ("ring", "multitree", "recursive-halving-doubling", "direct"),
}
# across boxes direct/pairwise are refused by their frontends (no route between non-rail GPUs)
_FABRIC_PLANS: dict[CollKind, tuple[str, ...]] = {
    CollKind.ALLREDUCE: ("forestcoll", "ring", "multitree", "double-binary-tree", "recursive-halving-doubling",
                         "recursive-doubling"),
    CollKind.ALLGATHER: ("forestcoll", "ring", "multitree", "recursive-doubling"),
    CollKind.REDUCESCATTER: ("forestcoll", "ring", "multitree", "recursive-halving-doubling"),
}
# directory, registration module (beside it: the v0.8 shim reads every file of the directory),
# topology, protocols considered, candidates, sizes timed, fabric in words
# directory, registration module, topology, protocols, candidates per collective, sizes timed, fabric's description
PlanLibrary = tuple[str, str, str, tuple[str, ...], dict[CollKind, tuple[str, ...]], tuple[int, ...], str]
PLAN_LIBRARIES: list[PlanLibrary] = [
    ("dgx-a100-mscclpp", "mscclpp_dgx_a100.py", "switch:8:bw=300", ("Simple", "LL"), _BOX_PLANS, PLAN_SIZES,
     "8-GPU NVSwitch box, DGX A100 (300 GB/s per GPU each way), memory channels"),
    ("a100-2x8-mscclpp", "mscclpp_a100_2x8.py", "a100:2x8", ("Simple", "LL"), _FABRIC_PLANS, PLAN_SIZES,
     "2 DGX A100 boxes (ForestColl's fabric): memory channels in a box, port channels across"),
    ("a100-4x8-mscclpp", "mscclpp_a100_4x8.py", "a100:4x8", ("Simple", "LL"), _FABRIC_PLANS, PLAN_SIZES_32,
     "4 DGX A100 boxes (8 NICs each on two IB rails): memory channels in a box, port channels across"),
    ("mi250-2x8-mscclpp", "mscclpp_mi250_2x8.py", "mi250:8+8", ("Simple", "LL"), _FABRIC_PLANS, PLAN_SIZES,
     "2 MI250 boxes, 8 GCDs used in each (ForestColl's 8+8): xGMI memory channels in a box, port channels across"),
    ("mi250-2x16-mscclpp", "mscclpp_mi250_2x16.py", "mi250:2", ("Simple", "LL"), _FABRIC_PLANS, PLAN_SIZES_32,
     "2 MI250 boxes of 16 GCDs (ForestColl's fabric): xGMI memory channels in a box, port channels across"),
]


def _plan_windows(series: dict[str, list[float]], sizes: tuple[int, ...]) -> list[tuple[str, int, int, list[int]]]:
    """Runs of ``sizes`` with the same winner (highest busbw, ties to the larger label, as
    ``collc tune``) as inclusive [lo, hi] windows tiling [0, inf): hi 0 means open."""
    from collc.tuning import windows_of

    winners = []
    for i, size in enumerate(sizes):
        win = max(series, key=lambda lab: (series[lab][i], lab))
        if series[win][i] <= 0:
            raise SystemExit(f"no candidate plan runs {size} bytes")
        winners.append(win)
    return windows_of(sizes, winners)


def render_plans(check: bool, libraries: Sequence[PlanLibrary]) -> tuple[dict[Path, str], list[str], list[str]]:
    """The MSCCL++ plan libraries, their registration modules and MANIFEST rows.  With ``check``
    (--check) the winners are compared byte for byte but not run through the plan checker again:
    tests/test_schedules.py runs `collc check --topology SPEC` on every plan."""
    from collc.backends.mscclpp_loader import PlanEntry, register_snippet
    from collc.check.plan.placement import check_placement
    from collc.check.plan.report import PlanReport
    from collc.compiler.mscclpp.plan import Protocol
    from collc.driver import compile_plan
    from collc.errors import CollcError
    from collc.sim.analysis import bus_bandwidth
    from collc.sim.plan_event import time_plan
    from collc.sim.runner import human

    files: dict[Path, str] = {}
    rows = ["| directory | fabric | file | collective | window (bytes) | candidate | predicted busbw (GB/s) at the "
            "window's smallest .. largest size |", "|---|---|---|---|---|---|---|"]
    considered = ["| directory | fabric | sizes timed | protocols considered | candidates per collective: timed "
                  "(left out: why) |", "|---|---|---|---|---|"]
    for directory, module, spec, protos, candidates, sizes, fabric in libraries:
        topo = parse_spec(spec)
        entries: list[PlanEntry] = []
        notes: list[str] = []
        for kind, algs in candidates.items():
            series: dict[str, list[float]] = {}
            refused: dict[str, str] = {}
            for alg in algs:
                for proto in protos:
                    label = alg + ("(LL)" if proto == "LL" else "")
                    try:
                        plan = compile_plan(topo, alg, kind, protocol=Protocol(proto), check=False).plan
                    except CollcError as exc:
                        # a family the fabric or the backend refuses is no candidate
                        refused[label] = _refusal(str(exc))
                        continue
                    runs = [s for s in sizes if plan.divides(s)]
                    if not runs:
                        refused[label] = f"{plan.gpus[0].input_chunks} input chunks: runs no size timed"
                    # only the sizes the executor would run it at are timed (ForestColl's 48 chunks: none)
                    times = dict(zip(runs, time_plan(plan, topo, runs, alpha_us=PLAN_ALPHA_US)))
                    series[label] = [bus_bandwidth(kind, topo.nranks, s, times[s])[1] if s in times else 0.0
                                     for s in sizes]
            built_labels = [lab for lab in series if lab not in refused]
            why = "; ".join(f"{lab}: {r}" for lab, r in refused.items())
            notes.append(f"{kind.value}: {', '.join(built_labels)}" + (f" (left out: {why})" if why else ""))
            for n, (label, lo, hi, run) in enumerate(_plan_windows(series, sizes)):
                alg = label.removesuffix("(LL)")
                proto = Protocol.LL if label.endswith("(LL)") else Protocol.SIMPLE
                name = f"collc-{directory}-{kind.value}-w{n}"
                built = compile_plan(topo, alg, kind, protocol=proto, min_bytes=lo, max_bytes=hi, name=name,
                                     check=not check)
                placed = PlanReport(name)
                check_placement(built.plan, topo, placed)
                problems = built.problems + [f.message for f in placed.errors()]
                if problems:
                    raise SystemExit(f"{directory}/{name} fails its check: {problems[0]}")
                fname = f"{n:02d}-{kind.value}-{label.replace('(LL)', '-LL')}.json"
                files[ROOT / directory / fname] = built.text
                entries.append(PlanEntry(fname, built.plan.name, built.plan.collective, built.plan.nranks))
                bw = [series[label][sizes.index(s)] for s in run]
                top = human(hi + 1) if hi else f"{human(built.plan.max_message_size + 1)} (the 32-bit offset limit)"
                rows.append(f"| `{directory}` | {fabric} | `{fname}` | {kind.value} | {human(lo)} .. {top} | {label} | "
                            f"{bw[0]:.3g} .. {bw[-1]:.3g} |")
        files[ROOT / module] = register_snippet(directory, entries, module.removesuffix(".py"))
        step = sizes[1] // sizes[0]
        considered.append(f"| `{directory}` | `{spec}` | {human(sizes[0])}, x{step} .. {human(sizes[-1])} | "
                          f"{', '.join(protos)} | {'<br>'.join(notes)} |")
    return files, rows, considered


def _refusal(message: str) -> str:
    """A refusal in a few words for the manifest (the lowering's and frontends' messages are long)."""
    if "LL across IPC domains" in message:
        return "LL across hosts is refused"
    if "no link or switch route" in message:
        return "no route between its partners"
    return message.split(";")[0][:80]


def _command(stem: str, spec: str, alg: str, kind: CollKind, opts: dict[str, object]) -> str:
    flags = [f"--topology {spec}", f"--algorithm {alg}", f"--collective {kind.value}"]
    if "instances" in opts:
        flags.append(f"--instances {opts['instances']}")
    dialect = opts.get("dialect", Dialect.EXECUTOR)
    assert isinstance(dialect, Dialect)
    if dialect is not Dialect.EXECUTOR:
        flags.append(f"--dialect {dialect.value}")
    params = opts.get("params", {})
    assert isinstance(params, dict)
    flags += [f"--param {k}={v}" for k, v in sorted(params.items())]
    if opts.get("min_bytes"):
        flags.append(f"--min-bytes {opts['min_bytes']}")
    if opts.get("max_bytes"):
        flags.append(f"--max-bytes {opts['max_bytes']}")
    return "collc build " + " ".join(flags) + f" -o {stem}.xml"


def render() -> tuple[dict[Path, str], str]:
    files: dict[Path, str] = {}
    rows = ["| directory | file | collective | ranks | dialect | steps | tbs/gpu | bytes | built with |",
            "|---|---|---|---|---|---|---|---|---|"]
    for directory, stem, spec, alg, kind, opts in SETS:
        result = compile_xml(parse_spec(spec), alg, kind, **opts)  # type: ignore[arg-type]
        if not result.report.ok:
            raise SystemExit(f"{directory}/{stem} fails its check: {result.report.errors()[0].message}")
        files[ROOT / directory / f"{stem}.xml"] = result.text
        p = result.program
        dialect = opts.get("dialect", Dialect.EXECUTOR)
        assert isinstance(dialect, Dialect)
        rows.append(f"| `{directory}` | `{stem}.xml` | {p.coll} | {p.ngpus} | {dialect.value} | "
                    f"{result.schedule.nsteps} | {max(len(g.tbs) for g in p.gpus)} | "
                    f"{p.min_bytes or 0}..{p.max_bytes or 'any'} | "
                    f"`{_command(stem, spec, alg, kind, opts)}` |")
    manifest = "\n".join([
        "# Prebuilt schedules",
        "",
        "Every file here was built by `python scripts/build_schedules.py` and passes `collc check` "
        "(parser rules, limits, send/receive matching, executor simulation with symbolic data) for its dialect.",
        "Each directory is one `MSCCL_ALGO_DIR` (executor, RCCL) and holds only XML files; legacy files are "
        "listed in `MSCCL_XML_FILES` instead. Message-size windows (bytes, inclusive) are open unless the table "
        "says otherwise, and never overlap within a directory: the runtime picks one file for every size of a "
        "collective and placement. The Swing allreduce switches from L to B at 128 KiB, where the event model "
        "puts the crossover with the paper's links (50 GB/s, 0.1 us per message, 0.3 us per hop); run "
        "`collc tune` to place it for your links.",
        "",
        *rows,
        "",
    ])
    return files, manifest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    ap.add_argument("--quick", action="store_true",
                    help="with --check: leave out the plan libraries of more than 16 ranks (their timing is most "
                         "of the run) and MANIFEST.md, whose rows they feed")
    args = ap.parse_args()
    if args.quick and not args.check:
        ap.error("--quick only checks: a rewrite needs every library for MANIFEST.md")
    libraries = [lib for lib in PLAN_LIBRARIES if not (args.quick and parse_spec(lib[2]).nranks > 16)]
    skipped = [lib[0] for lib in PLAN_LIBRARIES if lib not in libraries]
    files, manifest = render()
    tuned, tuned_rows = render_tuned()
    files.update(tuned)
    plans, plan_rows, plan_considered = render_plans(args.check, libraries)
    files.update(plans)
    files[ROOT / "MANIFEST.md"] = "\n".join([
        manifest.rstrip("\n"), "",
        "## Tuned per fabric",
        "",
        f"`collc tune --sizes {TUNE_SIZES} --model step --protocols Simple,LL` over the candidates in "
        "`scripts/build_schedules.py` (`TUNE_CANDIDATES`; `FABRIC_CANDIDATES`, with ForestColl, for the multi-box "
        "fabrics) picked these windows; each directory is one "
        "`MSCCL_ALGO_DIR` for its fabric. Windows are `[minBytes, maxBytes]`, shown here as `lo .. hi` with "
        "`hi` exclusive. The predictions use each fabric's nominal link bandwidth and 5 us per message: "
        "retune with your measured links (`collc topology import` of the machine) before relying on them.",
        "",
        "What moved when the event model learnt the executor's per-slice loop (each threadblock's program runs "
        "once per 2 MiB Simple / 32 KiB LL slice, each run paying its 5 us): nothing here, because these windows "
        "come from the step model, which has no slices. `collc tune` (event model) moves: switch:8 MultiTree "
        "LL -> Simple at 512 KiB (was 2 MiB); a100:2x8 double binary tree (LL) -> ForestColl (LL) at 256 KiB "
        "(was 128 KiB) and LL -> Simple at 16 MiB (was 32 MiB); torus:4x4 unchanged (docs/simulation.md).",
        "",
        *tuned_rows,
        "",
        "## MSCCL++ plans per fabric",
        "",
        "`scripts/build_schedules.py` (`PLAN_LIBRARIES`) lowers every candidate family to an MSCCL++ execution plan "
        "(`collc build --backend mscclpp`) in Simple and LL (LL across hosts is refused by the lowering for now, so "
        "the multi-box libraries hold Simple plans only; the table at the end says what was considered and what was left out), "
        "times the plans with the one-sided event model (`collc simulate PLAN.json`: 5 us per put, 1 us of the "
        "proxy per port-channel request, the fabric's nominal links and latencies, no hop latency) at 1KiB, 4KiB, "
        "... 1GiB (every 16x from 1KiB on the 32-rank fabrics, to keep the build within minutes), and keeps the "
        "best plan per size window (a plan counts at a size only if the executor takes it there: 16 bytes per "
        "input chunk, so ForestColl's plans with 48 or 10 input chunks per rank serve no power-of-two size). "
        "Each window plan is "
        "`collc build --backend mscclpp --topology SPEC --algorithm ALG --collective COLL [--protocol LL] "
        "--min-bytes LO --max-bytes HI` and passes `collc check --topology SPEC` on every MSCCL++ release "
        "collc models (v0.8, v0.9, v0.10). Windows are `min_message_size .. max_message_size`, shown as `lo .. hi` "
        "with `hi` exclusive; the last window ends at the executor's 32-bit offset limit. Each directory is one "
        "`MSCCLPP_EXECUTION_PLAN_DIR` (up to v0.8, NCCL shim); from v0.9 import the module beside it "
        "(`schedules/mscclpp_*.py`) and call `register(rank, nranks_per_node)` in every rank "
        "(docs/mscclpp-backend.md, \"The plan library\"). With no hop latency LL never wins in this model "
        "(its gain is the signal it saves); retune with your links before relying on the windows.",
        "",
        *plan_rows,
        "",
        "Considered per library:",
        "",
        *plan_considered,
        "",
    ])
    # every directory of the library holds generated files only (ROOT itself also holds the README-like
    # MANIFEST and the registration modules, which are generated too, so it is owned as well)
    owned = {p.parent for p in files}
    if skipped:
        del files[ROOT / "MANIFEST.md"]
        owned.discard(ROOT)             # it also holds the skipped libraries' registration modules
        print(f"--quick: not checked: MANIFEST.md and {', '.join(skipped)} (run --check alone for everything)")
    return sync_files(files, args.check, ROOT.parent, owned)


if __name__ == "__main__":
    sys.exit(main())
