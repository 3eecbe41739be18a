#!/usr/bin/env python3
"""Scale benchmark of issue #17: CPU seconds (user + sys of a child process) and peak memory per case.

Each row runs ``python -m collc.cli ...`` from this checkout in a subprocess and reads the
child's resource usage (``os.wait4``): CPU time, not wall time, because the machine is
shared.  The builds include the full check, as ``collc build`` always does.

    python benchmarks/scale.py                     # every row (the 64x64 and MultiTree rows take minutes)
    python benchmarks/scale.py --quick             # skip the slow rows
    python benchmarks/scale.py --rows ring8,help   # pick rows
    python benchmarks/scale.py --jobs 1            # pass --jobs to the builds
    python benchmarks/scale.py --rows rhd16k-256,swing16k-256     # one --ranks task of a 16384-rank job

``before`` is the figure measured on main 5c00b49 (before issue #17), on this 2-core machine.
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
BEFORE_DATE = "2026-11-23"


@dataclass(frozen=True)
class Row:
    name: str
    args: tuple[str, ...]         # collc arguments; {out} is the row's output path, {shards} the 64x64 directory
    target_s: float
    before_s: float               # CPU seconds on main 5c00b49 (the least of the runs made that day)
    before_mib: float             # its peak MiB
    target_mib: float = 0.0       # 0: no memory target
    slow: bool = False
    builds: bool = True           # a build (takes --jobs)


def _build(topo: str, alg: str, coll: str, *extra: str) -> tuple[str, ...]:
    return ("build", "--topology", topo, "--algorithm", alg, "--collective", coll, *extra, "-o", "{out}")


ROWS = (
    Row("ring8", _build("ring:8", "ring", "allreduce"), 0.15, 0.69, 87),
    Row("help", ("--help",), 0.12, 0.14, 20, builds=False),
    Row("ring256", _build("ring:256", "ring", "allreduce"), 1.0, 5.94, 239),
    Row("hypercube10", _build("hypercube:10", "recursive-halving-doubling", "allreduce"), 3.0, 12.72, 802),
    Row("swing32", _build("torus:32x32", "swing", "allreduce"), 5.0, 20.96, 600),
    Row("swing64", ("build", "--topology", "torus:64x64", "--algorithm", "swing", "--collective", "allreduce",
                    "--shard-per-rank", "-o", "{shards}"), 60.0, 288.21, 3591, target_mib=2048, slow=True),
    Row("multitree32", _build("torus:32x32", "multitree", "allgather"), 60.0, 118.88, 2002, slow=True),
    Row("check4096", ("check", "{shards}"), 30.0, 169.03, 2363, slow=True, builds=False),
    # issue #30 item 4: one task of a 16384-rank job (64 tasks of 256 ranks; no "before": new)
    Row("rhd16k-256", _build("hypercube:14", "recursive-halving-doubling", "allreduce", "--shard-per-rank",
                              "--ranks", "0-255"), 30.0, 0.0, 0.0, target_mib=1024),
    Row("swing16k-256", _build("torus:128x128", "swing", "allreduce", "--param", "ports=single",
                                "--shard-per-rank", "--ranks", "0-255"), 30.0, 0.0, 0.0, target_mib=1024),
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
    ap.add_argument("--quick", action="store_true", help="skip the slow rows (64x64 Swing, MultiTree, check)")
    ap.add_argument("--jobs", default="", help="pass --jobs N to the builds (default: collc's default)")
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
        shards = base / "swing64"
        head = f"{'case':12s} {'target':>12s} {'before':>8s} {'now':>8s} {'MiB before':>10s} {'MiB now':>8s}  met?"
        print(f"CPU seconds (user+sys, workers included) and peak MiB; before = main 5c00b49, measured {BEFORE_DATE}")
        print(head)
        print("-" * len(head))
        for r in rows:
            argv = [x.format(out=base / f"{r.name}.xml", shards=shards) for x in r.args]
            if r.builds and a.jobs:
                argv.insert(1, f"--jobs={a.jobs}")
            if r.name == "check4096" and not shards.is_dir():
                print(f"{r.name:12s} (needs the swing64 row first)")
                continue
            cpu, mib, code = run(argv)
            met = cpu <= r.target_s and (not r.target_mib or mib <= r.target_mib) and code == 0
            target = f"{r.target_s:g} s" + (f", {r.target_mib / 1024:g} GiB" if r.target_mib else "")
            before = f"{r.before_s:.2f}" if r.before_s else "-"
            before_mib = f"{r.before_mib:.0f}" if r.before_mib else "-"
            print(f"{r.name:12s} {target:>12s} {before:>8s} {cpu:8.2f} {before_mib:>10s} {mib:8.0f}  "
                  f"{'yes' if met else 'no'}{'' if code == 0 else f' (exit {code})'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
