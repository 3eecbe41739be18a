#!/usr/bin/env python3
"""Scale benchmark of issue #30: CPU seconds (user + sys of a child process) and peak memory per case.

Each row runs ``python -m collc.cli ...`` from this checkout in fresh subprocesses (three by
default, ``--repeat``) and reports the least CPU time of them with its peak memory
(``os.wait4``): CPU time, not wall time, because the machine is shared.  The builds include
the full check, as ``collc build`` always does.  The first line is the calibration: CPU
seconds of 10^7 iterations of a pure-Python loop on this machine, so that figures taken on
different days can be compared.

    python benchmarks/scale.py                     # every row (the 64x64, BFB and MultiTree rows take minutes)
    python benchmarks/scale.py --quick             # skip the slow rows
    python benchmarks/scale.py --rows ring8,help   # pick rows
    python benchmarks/scale.py --jobs 1            # pass --jobs to the builds
    python benchmarks/scale.py --rows rhd16k-256,swing16k-256     # one --ranks task of a 16384-rank job

``issue`` is the figure issue #30 was filed with (measured on this 2-core machine, week of
2026-11-23); ``target`` is the issue's.  ``benchmarks/shard_union.py`` builds the whole
16384-rank job task by task and compares the union with one full build.
The children run with bytecode caches (``PYTHONDONTWRITEBYTECODE`` removed, ``collc``
compiled once first), as an installed package runs: compiling the sources again on every
start would add about 0.2 s to each row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from forestcoll_speed import calibration  # noqa: E402  (one calibration loop for every benchmark)
ISSUE_DATE = "2026-11-23"


@dataclass(frozen=True)
class Row:
    name: str
    args: tuple[str, ...]         # collc arguments; {out} is the row's output path, {shards}/{bfb} directories
    target_s: float
    issue_s: float                # CPU seconds when issue #30 was filed (0: no figure)
    issue_mib: float = 0.0        # its peak MiB (0: not given)
    target_mib: float = 0.0       # 0: no memory target
    slow: bool = False
    builds: bool = True           # a build (takes --jobs)
    needs: str = ""               # a row whose output this row reads


def _build(topo: str, alg: str, coll: str, *extra: str) -> tuple[str, ...]:
    return ("build", "--topology", topo, "--algorithm", alg, "--collective", coll, *extra, "-o", "{out}")


ROWS = (
    Row("ring8", _build("ring:8", "ring", "allreduce"), 0.15, 0.20),
    Row("help", ("--help",), 0.12, 0.0, builds=False),
    Row("ring256", _build("ring:256", "ring", "allreduce"), 1.0, 3.9),
    Row("hypercube10", _build("hypercube:10", "recursive-halving-doubling", "allreduce"), 2.0, 4.6),
    Row("swing32", _build("torus:32x32", "swing", "allreduce"), 4.0, 12.3),
    Row("multitree32", _build("torus:32x32", "multitree", "allgather"), 20.0, 59.0, slow=True),
    Row("swing64", ("build", "--topology", "torus:64x64", "--algorithm", "swing", "--collective", "allreduce",
                    "--shard-per-rank", "-o", "{shards}"), 40.0, 161.0, 4.1 * 1024, target_mib=1536, slow=True),
    Row("check4096", ("check", "{shards}"), 10.0, 21.4, slow=True, builds=False, needs="swing64"),
    Row("bfb10", ("build", "--topology", "hypercube:10", "--algorithm", "bfb", "--collective", "allgather",
                  "--shard-per-rank", "-o", "{bfb}"), 15.0, 46.7, slow=True),
    # item 4: one task of a 16384-rank job (64 tasks of 256 ranks; new, so no issue figure)
    Row("rhd16k-256", _build("hypercube:14", "recursive-halving-doubling", "allreduce", "--shard-per-rank",
                              "--ranks", "0-255"), 30.0, 0.0, target_mib=1024),
    Row("swing16k-256", _build("torus:128x128", "swing", "allreduce", "--param", "ports=single",
                                "--shard-per-rank", "--ranks", "0-255"), 30.0, 0.0, target_mib=1024),
)


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(args: list[str]) -> tuple[float, float, int]:
    """CPU seconds, peak MiB and exit code of ``python -m collc.cli ARGS`` (from this checkout)."""
    env = _env()
    proc = subprocess.Popen([sys.executable, "-m", "collc.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        sys.stderr.write(err.decode(errors="replace"))
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="", help="comma list of rows (default: all): " +
                    ",".join(r.name for r in ROWS))
    ap.add_argument("--quick", action="store_true", help="skip the slow rows (64x64 Swing, its check, BFB, MultiTree)")
    ap.add_argument("--jobs", default="", help="pass --jobs N to the builds (default: collc's default)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per row; the least CPU time counts")
    ap.add_argument("--keep", default="", metavar="DIR", help="write the outputs here instead of a temporary dir")
    a = ap.parse_args()
    names = [n for n in a.rows.split(",") if n]
    unknown = set(names) - {r.name for r in ROWS}
    if unknown:
        ap.error(f"unknown rows {sorted(unknown)}")
    rows = [r for r in ROWS if (r.name in names if names else not (a.quick and r.slow))]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "collc")], env=_env(), check=True,
                   stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(prefix="collc-scale-") as tmp:
        base = Path(a.keep or tmp)
        base.mkdir(parents=True, exist_ok=True)
        made: set[str] = set()
        head = f"{'case':12s} {'target':>12s} {'issue':>7s} {'now':>7s} {'MiB issue':>9s} {'MiB now':>8s}  met?"
        print(f"machine: 10^7 pure-Python loop iterations in {calibration():.2f} CPU s; CPU seconds (user+sys, "
              f"workers included) and peak MiB, the least of {a.repeat} fresh processes; issue = #30, "
              f"{ISSUE_DATE}")
        print(head)
        print("-" * len(head))
        for r in rows:
            argv = [x.format(out=base / f"{r.name}.xml", shards=base / "swing64", bfb=base / "bfb10")
                    for x in r.args]
            if r.builds and a.jobs:
                argv.insert(1, f"--jobs={a.jobs}")
            if r.needs and r.needs not in made:
                print(f"{r.name:12s} (needs the {r.needs} row first)")
                continue
            cpu, mib, code = min(run(argv) for _ in range(max(1, a.repeat)))
            if code == 0:
                made.add(r.name)
            met = cpu <= r.target_s and (not r.target_mib or mib <= r.target_mib) and code == 0
            target = f"{r.target_s:g} s" + (f", {r.target_mib / 1024:g} GiB" if r.target_mib else "")
            issue = f"{r.issue_s:.1f}" if r.issue_s else "-"
            issue_mib = f"{r.issue_mib:.0f}" if r.issue_mib else "-"
            print(f"{r.name:12s} {target:>12s} {issue:>7s} {cpu:7.2f} {issue_mib:>9s} {mib:8.0f}  "
                  f"{'yes' if met else 'no'}{'' if code == 0 else f' (exit {code})'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
