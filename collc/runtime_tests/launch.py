"""``collc bench run``: launch nccl-tests / rccl-tests with a schedule set, and a baseline.

One process per GPU (``-g 1``: the executor runs MSCCL only then), under ``mpirun``
(every variable passed with ``-x``) or ``srun`` (``--export=ALL,...``).  Two runs:

* **schedule**: the runtime's environment (below), ``NCCL_DEBUG=INFO`` with the
  ``INIT,ENV,COLL`` subsystems so the log proves whether MSCCL ran;
* **baseline**: the same library and binary with MSCCL off, optionally pinned to
  NCCL's own algorithm (``NCCL_ALGO``/``NCCL_PROTO``) or to a per-size choice through
  the 10-field tuner CSV (``colltype,minbytes,maxbytes,algorithm,protocol,channels,
  nNodes,nRanks,numPipeOps,regBuff``) that NCCL's example tuner reads from
  ``NCCL_TUNER_CONFIG_FILE``.

Both use the data check (``-c 1``) and print both placements.  Per runtime:

=========  ===============================================================================
executor   ``MSCCL_ALGO_DIR=<dir>``, ``LD_PRELOAD=<MSCCL-enabled libnccl.so.2>``,
           ``NCCL_MSCCL_ENABLE=1``; baseline ``NCCL_MSCCL_ENABLE=0``
rccl       ``MSCCL_ALGO_DIR=<dir>``, ``RCCL_MSCCL_ENABLE=1``, ``RCCL_MSCCL_FORCE_ENABLE=1``
           (MSCCL is on by default only on MI300X-class topologies); baseline
           ``RCCL_MSCCL_ENABLE=0``
legacy     ``MSCCL_XML_FILES=a.xml:b.xml`` (at most 4), ``NCCL_ALGO=MSCCL,RING,TREE``, the
           microsoft/msccl build first on ``LD_LIBRARY_PATH``; baseline ``NCCL_ALGO=RING,TREE``
shards     a per-rank shard directory: the command runs through its ``run-with-msccl.sh``,
           which sets ``MSCCL_ALGO_DIR`` (legacy: ``MSCCL_XML_FILES``) from the launcher's
           rank variable
=========  ===============================================================================

For alltoall the msccl-tests-nccl build is used (stock nccl-tests issues send/recv, not
``ncclAllToAll``, and does not check in-place alltoall).  ``--dry-run`` prints every
command and variable; nothing else is added at run time.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from collc.errors import CollcError
from collc.inputs import MAX_LOG_BYTES, read_input, show
from collc.runtime_tests.parse import DEBUG_SUBSYS

__all__ = ["LaunchError", "RunPlan", "Options", "plan_runs", "render", "add_run_arguments", "run_command",
           "tuner_csv"]

RUNTIMES = ("executor", "rccl", "legacy")
LEGACY_MAX_FILES = 4
PERF_STEM = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "gather": "gather",
             "scatter": "scatter", "sendrecv": "sendrecv"}
TUNER_COLLS = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
TUNER_ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
TUNER_PROTOS = ("ll", "ll128", "simple")


class LaunchError(CollcError):
    """Bad ``collc bench run`` input."""


@dataclass(frozen=True)
class RunPlan:
    """One launch: ``argv`` exactly as executed, ``env`` the variables collc sets."""

    label: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    log: str


@dataclass(frozen=True)
class Options:
    xml: tuple[str, ...]
    runtime: str = "executor"
    launcher: str = "mpirun"
    np: int | None = None
    tests_dir: str = "./build"
    program: str | None = None           # run this instead of nccl-tests (e.g. a training script)
    msccl_lib: str | None = None         # executor: libnccl.so.2 to preload; legacy: the build's lib dir
    sizes: tuple[int, int] = (1024, 1 << 30)
    iters: int = 20
    warmup: int = 5
    dtype: str = "float"
    launcher_args: tuple[str, ...] = ()
    hostfile: str | None = None
    baseline: bool = True
    baseline_algo: str | None = None
    baseline_proto: str | None = None
    tuner_csv: str | None = None
    tuner_plugin: str | None = None
    out: str = "bench-logs"
    collective: str | None = None


@dataclass(frozen=True)
class _Schedules:
    coll: str
    ngpus: int
    files: tuple[str, ...]
    algo_dir: str | None
    shard_dir: str | None


def _schedules(paths: tuple[str, ...], runtime: str) -> _Schedules:
    from collc.backends.msccl_xml import read_xml
    from collc.backends.shards import WRAPPER, is_shard_dir, read_shards

    if not paths:
        raise LaunchError("give the schedule set with --xml (an XML file, a directory of them, or a shard directory)")
    files: list[Path] = []
    shard: Path | None = None
    colls: set[str] = set()
    ngpus: set[int] = set()
    for raw in paths:
        p = Path(raw)
        if is_shard_dir(p):
            if len(paths) > 1:
                raise LaunchError(f"{p}: a shard directory must be the only --xml")
            if not (p / WRAPPER).is_file():
                raise LaunchError(f"{p}: shard directory without {WRAPPER}; rebuild it with --shard-per-rank")
            prog = read_shards(p).program
            colls.add(prog.coll)
            ngpus.add(prog.ngpus)
            shard = p
            continue
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file())
            others = [q.name for q in found if q.suffix != ".xml"]
            if others:
                raise LaunchError(f"{p}: the runtime parses every file of MSCCL_ALGO_DIR; remove {others[0]}")
            if not found:
                raise LaunchError(f"{p}: no XML files")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise LaunchError(f"{p}: no such file or directory")
    for f in files:
        prog = read_xml(f).program
        colls.add(prog.coll)
        ngpus.add(prog.ngpus)
    if len(ngpus) != 1:
        raise LaunchError(f"the schedules are for different rank counts {sorted(ngpus)}; one run has one size")
    if runtime == "legacy" and len(files) > LEGACY_MAX_FILES:
        raise LaunchError(f"the old microsoft/msccl runtime loads at most {LEGACY_MAX_FILES} files from "
                          f"MSCCL_XML_FILES; {len(files)} given")
    dirs = {str(f.parent) for f in files}
    algo_dir: str | None = None
    if files and runtime != "legacy":
        if len(dirs) != 1 or len(list(Path(next(iter(dirs))).iterdir())) != len(files):
            raise LaunchError("MSCCL_ALGO_DIR is a directory: give one directory that holds exactly the schedule "
                              "files (or one file alone in its directory)")
        algo_dir = str(Path(next(iter(dirs))).resolve())
    coll = sorted(colls)[0] if len(colls) == 1 else "mixed"
    return _Schedules(coll, ngpus.pop(), tuple(str(Path(f).resolve()) for f in files), algo_dir,
                      str(shard.resolve()) if shard else None)


def tuner_csv(path: str) -> list[list[str]]:
    """Read and validate a tuner CSV (8 to 10 fields per line; ``#`` comments)."""
    text = read_input(path, MAX_LOG_BYTES, LaunchError, f"--tuner-csv {show(path)}").decode("utf-8", "replace")
    rows: list[list[str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        f = [x.strip() for x in line.split(",")]
        where = f"--tuner-csv {path}:{n}"
        if not 8 <= len(f) <= 10:
            raise LaunchError(f"{where}: {len(f)} fields; expected colltype,minbytes,maxbytes,algorithm,protocol,"
                              f"channels,nNodes,nRanks[,numPipeOps[,regBuff]]")
        if f[0] not in TUNER_COLLS:
            raise LaunchError(f"{where}: collective {f[0]!r} (one of {', '.join(TUNER_COLLS)})")
        if f[3] not in TUNER_ALGOS or f[4] not in TUNER_PROTOS:
            raise LaunchError(f"{where}: algorithm/protocol {f[3]!r}/{f[4]!r} (algorithms {', '.join(TUNER_ALGOS)}; "
                              f"protocols {', '.join(TUNER_PROTOS)})")
        try:
            ints = [int(x) for x in f[1:3] + f[5:]]
        except ValueError:
            raise LaunchError(f"{where}: byte bounds, channels, nNodes, nRanks, numPipeOps, regBuff are "
                              f"integers") from None
        if ints[0] < 0 or (ints[1] != -1 and ints[1] < ints[0]):
            raise LaunchError(f"{where}: minbytes {ints[0]} > maxbytes {ints[1]}")
        rows.append(f)
    if not rows:
        raise LaunchError(f"--tuner-csv {path}: no configuration lines")
    return rows


def _test_args(o: Options, coll: str) -> list[str]:
    if o.program is not None:
        return split_words(o.program, "--program")
    stem = PERF_STEM.get(coll)
    if stem is None:
        raise LaunchError(f"no nccl-tests binary for collective {coll!r}; pass --collective or --program")
    binary = str(Path(o.tests_dir) / f"{stem}_perf")
    lo, hi = o.sizes
    return [binary, "-b", str(lo), "-e", str(hi), "-f", "2", "-g", "1", "-c", "1", "-n", str(o.iters),
            "-w", str(o.warmup), "-d", o.dtype]


def split_words(text: str, flag: str) -> list[str]:
    """``text`` split as the shell would (quotes kept together); an unbalanced quote is bad input."""
    try:
        return shlex.split(text)
    except ValueError as exc:      # "No closing quotation", "No escaped character"
        raise LaunchError(f"{flag} {show(text)!r}: {str(exc).lower()} (unbalanced quote)") from None


def _launch(o: Options, np_: int, env: list[tuple[str, str]], cmd: list[str]) -> list[str]:
    if o.launcher == "mpirun":
        argv = ["mpirun", "-np", str(np_)]
        if o.hostfile:
            argv += ["--hostfile", o.hostfile]
        argv += ["--bind-to", "none", *o.launcher_args]
        for k, v in env:
            argv += ["-x", f"{k}={v}"]
        return argv + cmd
    if o.launcher == "srun":
        # --export=ALL,K=V cannot carry values with commas (NCCL_DEBUG_SUBSYS=INIT,ENV,COLL): set them on srun
        return ["env", *[f"{k}={v}" for k, v in env], "srun", "-n", str(np_), "--gpus-per-task=1",
                *o.launcher_args, "--export=ALL"] + cmd
    raise LaunchError(f"--launcher {o.launcher!r}: use mpirun or srun")


def plan_runs(o: Options) -> list[RunPlan]:
    """The launches of ``collc bench run``: the schedule run, then the baseline."""
    from collc.backends.shards import WRAPPER

    if o.runtime not in RUNTIMES:
        raise LaunchError(f"--runtime {o.runtime!r}: use one of {', '.join(RUNTIMES)}")
    s = _schedules(o.xml, o.runtime)
    coll = o.collective or s.coll
    if coll == "mixed":
        raise LaunchError("the schedules implement different collectives; one nccl-tests binary runs one: "
                          "give --collective")
    np_ = o.np if o.np is not None else s.ngpus
    if np_ != s.ngpus:
        raise LaunchError(f"--np {np_} but the schedules are for ngpus={s.ngpus}: the runtime only selects an "
                          f"algorithm whose ngpus equals the communicator size")
    debug = [("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", DEBUG_SUBSYS)]   # what the verdict reads
    msccl: list[tuple[str, str]] = []
    base: list[tuple[str, str]] = []
    prefix: list[str] = []
    if o.runtime == "executor":
        if s.algo_dir:
            msccl.append(("MSCCL_ALGO_DIR", s.algo_dir))
        if o.msccl_lib:
            preload = str(Path(o.msccl_lib).resolve())
            msccl.append(("LD_PRELOAD", preload))
            base.append(("LD_PRELOAD", preload))
        msccl.append(("NCCL_MSCCL_ENABLE", "1"))
        base.append(("NCCL_MSCCL_ENABLE", "0"))
    elif o.runtime == "rccl":
        if s.algo_dir:
            msccl.append(("MSCCL_ALGO_DIR", s.algo_dir))
        msccl += [("RCCL_MSCCL_ENABLE", "1"), ("RCCL_MSCCL_FORCE_ENABLE", "1")]
        base.append(("RCCL_MSCCL_ENABLE", "0"))
    else:
        if o.msccl_lib:
            libdir = str(Path(o.msccl_lib).resolve())
            ld = libdir + ":" + os.environ.get("LD_LIBRARY_PATH", "") if os.environ.get("LD_LIBRARY_PATH") \
                else libdir
            msccl.append(("LD_LIBRARY_PATH", ld))
            base.append(("LD_LIBRARY_PATH", ld))
        if s.files:
            msccl.append(("MSCCL_XML_FILES", ":".join(s.files)))
        msccl.append(("NCCL_ALGO", "MSCCL,RING,TREE"))
        if o.baseline_algo is None:
            base.append(("NCCL_ALGO", "RING,TREE"))
    if s.shard_dir:
        prefix = [str(Path(s.shard_dir) / WRAPPER)]
    if o.baseline_algo:
        base.append(("NCCL_ALGO", o.baseline_algo))
    if o.baseline_proto:
        base.append(("NCCL_PROTO", o.baseline_proto))
    if o.tuner_csv:
        tuner_csv(o.tuner_csv)
        base.append(("NCCL_TUNER_CONFIG_FILE", str(Path(o.tuner_csv).resolve())))
        if o.tuner_plugin:
            base.append(("NCCL_TUNER_PLUGIN", str(Path(o.tuner_plugin).resolve())))
    test = _test_args(o, coll)
    plans = [RunPlan("schedule", tuple(_launch(o, np_, debug + msccl, prefix + test)), tuple(debug + msccl),
                     str(Path(o.out) / "schedule.log"))]
    if o.baseline:
        plans.append(RunPlan("baseline", tuple(_launch(o, np_, debug + base, test)), tuple(debug + base),
                             str(Path(o.out) / "baseline.log")))
    return plans


def render(plans: list[RunPlan], o: Options) -> list[str]:
    """The ``--dry-run`` text: per run, its variables and the exact command line."""
    lines = [f"# collc bench: runtime {o.runtime}, launcher {o.launcher}, one GPU per process"]
    if o.runtime == "executor" and not o.msccl_lib:
        lines.append("# note: no --msccl-lib: the MSCCL-enabled libnccl.so.2 must already be the one loaded")
    if o.program is None and any("alltoall_perf" in a for a in plans[0].argv):
        lines.append("# note: alltoall: --tests-dir must be an Azure/msccl-tests-nccl build (it calls ncclAllToAll "
                     "and checks both placements)")
    for p in plans:
        lines.append(f"# --- {p.label} run -> {p.log}")
        for k, v in p.env:
            lines.append(f"#   {k}={v}")
        lines.append(shlex.join(p.argv))
    return lines


def add_run_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("--xml", action="append", default=[], metavar="PATH",
                   help="schedule file, directory (MSCCL_ALGO_DIR) or shard directory; repeat for files")
    a.add_argument("--topology", default=None,
                   help="instead of --xml: build the schedule for this topology (with --algorithm, --collective) "
                        "into OUT/msccl-algorithms, checked, before launching")
    a.add_argument("--algorithm", default=None, help="with --topology: the algorithm to build")
    a.add_argument("--runtime", choices=RUNTIMES, default="executor",
                   help="which MSCCL runtime loads the schedules (default: executor)")
    a.add_argument("--launcher", choices=["mpirun", "srun"], default="mpirun",
                   help="how the processes start, one GPU each (default: mpirun)")
    a.add_argument("--np", type=int, default=None, help="processes (default: the schedules' ngpus)")
    a.add_argument("--hostfile", default=None, help="mpirun --hostfile for a multi-node run")
    a.add_argument("--launcher-args", default="", help="extra launcher arguments, e.g. '--oversubscribe'")
    a.add_argument("--tests-dir", default="./build", help="nccl-tests / rccl-tests / msccl-tests-nccl build dir")
    a.add_argument("--program", default=None, help="run this command instead of the nccl-tests binary")
    a.add_argument("--msccl-lib", default=None,
                   help="executor: the MSCCL-enabled libnccl.so.2 (LD_PRELOAD); legacy: the build's lib dir")
    a.add_argument("--sizes", default="1KiB:1GiB", help="LO:HI message sizes (-b/-e, step factor 2)")
    a.add_argument("--iters", type=int, default=20, help="timed iterations per size (-n, default 20)")
    a.add_argument("--warmup", type=int, default=5, help="warm-up iterations per size (-w, default 5)")
    a.add_argument("--dtype", default="float", help="element type (-d, default float)")
    a.add_argument("--collective", default=None, help="override the collective read from the schedules")
    a.add_argument("--no-baseline", action="store_true", help="skip the MSCCL-off baseline run")
    a.add_argument("--baseline-algo", default=None, help="pin the baseline: NCCL_ALGO value, e.g. Ring")
    a.add_argument("--baseline-proto", default=None, help="pin the baseline: NCCL_PROTO value, e.g. Simple")
    a.add_argument("--tuner-csv", default=None, help="pin the baseline per size: the example tuner's CSV")
    a.add_argument("--tuner-plugin", default=None, help="the tuner plugin .so that reads --tuner-csv")
    a.add_argument("--out", default="bench-logs", help="directory for schedule.log and baseline.log")
    a.add_argument("--dry-run", action="store_true", help="print the exact commands and environment; run nothing")


def options_from(args: argparse.Namespace) -> Options:
    from collc.sim.runner import parse_size

    lo_text, sep, hi_text = args.sizes.partition(":")
    if not sep:
        raise LaunchError(f"--sizes {args.sizes!r}: give LO:HI, e.g. 1KiB:1GiB")
    lo, hi = parse_size(lo_text), parse_size(hi_text)
    if lo <= 0 or hi < lo:
        raise LaunchError(f"--sizes {args.sizes!r}: need 0 < LO <= HI")
    if args.iters < 1 or args.warmup < 0:
        raise LaunchError("--iters must be >= 1 and --warmup >= 0")
    if args.np is not None and args.np < 1:
        raise LaunchError("--np must be >= 1")
    if args.program is not None:
        split_words(args.program, "--program")      # an unbalanced quote is refused before anything runs
    return Options(tuple(args.xml), args.runtime, args.launcher, args.np, args.tests_dir, args.program,
                   args.msccl_lib, (lo, hi), args.iters, args.warmup, args.dtype,
                   tuple(split_words(args.launcher_args, "--launcher-args")), args.hostfile, not args.no_baseline, args.baseline_algo,
                   args.baseline_proto, args.tuner_csv, args.tuner_plugin, args.out, args.collective)


def execute(plan: RunPlan) -> int:
    """Run one launch, its output to the terminal and to its log file."""
    log = Path(plan.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    # the variables travel only in argv (mpirun -x, env ... srun): what --dry-run prints is what runs
    try:
        proc = subprocess.Popen(plan.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        raise LaunchError(f"cannot start {plan.argv[0]}: {exc.strerror or exc}") from exc
    with proc, log.open("w", encoding="utf-8") as fh:
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            sys.stdout.write(line)
    return proc.returncode


def build_schedule(args: argparse.Namespace) -> str:
    """``--topology``: build, check and write the schedule into ``OUT/msccl-algorithms``."""
    from collc.backends.msccl_xml import write_atomic
    from collc.limits import Dialect
    from collc.driver import compile_xml
    from collc.ir.collective import CollKind
    from collc.topology import parse_spec

    if args.xml:
        raise LaunchError("give either --xml or --topology, not both")
    if not args.algorithm or not args.collective:
        raise LaunchError("--topology needs --algorithm and --collective")
    topo = parse_spec(args.topology)
    kind = CollKind.parse(args.collective)
    result = compile_xml(topo, args.algorithm, kind, dialect=Dialect(args.runtime))
    if not result.report.ok:
        raise LaunchError(f"the {args.algorithm} {kind.value} schedule on {topo.name} fails its check: "
                          f"{result.report.errors()[0].message}")
    d = Path(args.out) / "msccl-algorithms"
    d.mkdir(parents=True, exist_ok=True)
    stale = [q.name for q in d.iterdir() if q.name != f"{args.algorithm}-{kind.value}.xml"]
    if stale:
        raise LaunchError(f"{d} holds {stale[0]}; the runtime would load it too: choose another --out")
    path = d / f"{args.algorithm}-{kind.value}.xml"
    write_atomic(path, result.text)
    print(f"# built {path}: {kind.value} on {topo.nranks} ranks ({args.runtime} dialect), checked")
    return str(d)


def run_command(args: argparse.Namespace) -> int:
    if args.topology:
        args.xml = [build_schedule(args)]
    o = options_from(args)
    plans = plan_runs(o)
    if args.dry_run:
        for line in render(plans, o):
            print(line)
        return 0
    worst = 0
    for p in plans:
        print(f"# collc bench: {p.label} run: {shlex.join(p.argv)}", flush=True)
        rc = execute(p)
        if rc:
            print(f"collc: {p.label} run exited with {rc} (log {p.log})", file=sys.stderr)
            worst = worst or 1
    if o.program is None:
        from collc.runtime_tests.cli import format_log
        from collc.runtime_tests.parse import LogParseError, parse_file
        for p in plans:
            try:
                log = parse_file(p.log)
                for line in format_log(log, sys.stdout.isatty()):
                    print(line)
                if log.run_failed:
                    worst = 1
            except LogParseError as exc:
                print(f"collc: {exc}", file=sys.stderr)
                worst = 1
    return worst
