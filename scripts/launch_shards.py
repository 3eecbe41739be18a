#!/usr/bin/env python3
"""Run a ``collc build --shard-per-rank --ranks auto`` job as local processes, the way srun would.

Each of ``--tasks T`` processes gets the launcher's variables (``SLURM_PROCID``/``SLURM_NTASKS``,
or with ``--launcher ompi`` ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``) and runs the collc
command given after ``--``; ``--ranks auto`` derives each task's share from them
(docs/building.md, "Each node builds its own shards").  ``--parallel P`` runs P tasks at a
time (default 1: one after the other, so that each task's figures are its own on a busy
machine).  Prints every task's CPU seconds (user + sys) and peak memory (``os.wait4``), then the
largest of each; the exit code is the first failing task's, else 0.

    python scripts/launch_shards.py --tasks 64 -- build --topology hypercube:14 \\
        --algorithm recursive-halving-doubling --collective allreduce --shard-per-rank --ranks auto -o ar16k
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIABLES = {"slurm": ("SLURM_PROCID", "SLURM_NTASKS"), "ompi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")}


@dataclass(frozen=True)
class Task:
    task: int
    code: int
    cpu_s: float
    peak_mib: float
    err: str


def task_env(task: int, ntasks: int, launcher: str) -> dict[str, str]:
    """This checkout's collc on the path, the launcher's variables for ``task`` of ``ntasks``,
    and no other launcher's (a variable inherited from an outer job would win)."""
    env = {k: v for k, v in os.environ.items() if k not in {v for pair in VARIABLES.values() for v in pair}}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    id_var, count_var = VARIABLES[launcher]
    env[id_var], env[count_var] = str(task), str(ntasks)
    return env


def run_tasks(argv: list[str], ntasks: int, parallel: int = 1, launcher: str = "slurm") -> list[Task]:
    """Run ``python -m collc.cli ARGV`` as ``ntasks`` tasks, ``parallel`` at a time, in task order."""
    done: list[Task] = []
    running: dict[int, tuple[int, subprocess.Popen[bytes]]] = {}
    pending = list(range(ntasks))
    while pending or running:
        while pending and len(running) < parallel:
            task = pending.pop(0)
            proc = subprocess.Popen([sys.executable, "-m", "collc.cli", *argv], cwd=ROOT,
                                    env=task_env(task, ntasks, launcher), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            running[proc.pid] = (task, proc)
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        task, proc = running.pop(pid)
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.append(Task(task, proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err))
    return sorted(done, key=lambda t: t.task)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, required=True, help="tasks (nodes) of the job")
    ap.add_argument("--parallel", type=int, default=1, help="tasks run at a time (default 1)")
    ap.add_argument("--launcher", choices=sorted(VARIABLES), default="slurm", help="whose variables to set")
    ap.add_argument("collc", nargs=argparse.REMAINDER, help="-- then the collc arguments (with --ranks auto)")
    a = ap.parse_args()
    argv = a.collc[1:] if a.collc[:1] == ["--"] else a.collc
    if not argv or a.tasks < 1 or a.parallel < 1:
        ap.error("give --tasks >= 1, --parallel >= 1 and the collc command after --")
    tasks = run_tasks(argv, a.tasks, a.parallel, a.launcher)
    print(f"{'task':>5s} {'exit':>4s} {'cpu s':>8s} {'peak MiB':>9s}")
    for t in tasks:
        print(f"{t.task:5d} {t.code:4d} {t.cpu_s:8.2f} {t.peak_mib:9.0f}")
    print(f"most: {max(t.cpu_s for t in tasks):.2f} CPU s, {max(t.peak_mib for t in tasks):.0f} MiB peak "
          f"(of {len(tasks)} tasks)")
    failed = [t for t in tasks if t.code != 0]
    for t in failed[:3]:
        sys.stderr.write(f"task {t.task}: {t.err.strip()}\n")
    return failed[0].code if failed else 0


if __name__ == "__main__":
    sys.exit(main())
