#!/usr/bin/env python3
"""A 16384-rank build as one job's tasks, and the union against one full build (issue #30, item 4).

Runs ``collc build --shard-per-rank --ranks auto`` as ``--tasks`` local processes the way
``srun`` would (``scripts/launch_shards.py``), then the same build in one process, and
compares the two directories file by file (names and bytes).  Where the one-process build
is refused (above 2^28 rank x chunk slots it cannot check the whole program in memory: both
16384-rank cases), there is nothing to compare with and the union's ``collc check`` is the
whole-program proof; the byte-for-byte comparison then runs at the largest size one process
builds (``--ranks 4096 --tasks 16``; ``tests/test_shard_tasks.py`` at 2048 ranks, slow).
Prints each task's CPU seconds and peak MiB (the most of them against the 30 s / 1 GiB per-task target), the
full build's, whether the union equals the full build, and the CPU seconds of
``collc check`` on the union (the job's last step).

    python benchmarks/shard_union.py                      # hypercube:14 RHD, 64 tasks of 256 ranks
    python benchmarks/shard_union.py --case swing         # torus:128x128 Swing (ports=single)
    python benchmarks/shard_union.py --case swing --ranks 4096 --tasks 16    # Swing 64x64

Figures: docs/building.md, "Each node builds its own shards".
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from launch_shards import run_tasks  # noqa: E402  (the launcher script is the one users run)

TARGET_S, TARGET_MIB = 30.0, 1024.0     # per task (issue #30)


def command(case: str, ranks: int) -> list[str]:
    if case == "rhd":
        dim = int(math.log2(ranks))
        return ["build", "--topology", f"hypercube:{dim}", "--algorithm", "recursive-halving-doubling",
                "--collective", "allreduce"]
    side = math.isqrt(ranks)
    return ["build", "--topology", f"torus:{side}x{side}", "--algorithm", "swing", "--collective", "allreduce",
            "--param", "ports=single"]


def digest(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def one(argv: list[str]) -> tuple[float, float, int, str]:
    """CPU s, peak MiB, exit code and stderr of ``python -m collc.cli ARGV``: the launcher's one
    task (its variables are read only by ``--ranks auto``, which these commands do not pass)."""
    t = run_tasks(argv, 1)[0]
    return t.cpu_s, t.peak_mib, t.code, t.err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=("rhd", "swing"), default="rhd")
    ap.add_argument("--ranks", type=int, default=16384, help="a power of 4 (default 16384)")
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=1, help="tasks at a time (1: each task's figures its own)")
    ap.add_argument("--keep", default="", metavar="DIR", help="build under DIR instead of a temporary directory")
    a = ap.parse_args()
    if a.ranks < 4 or a.ranks & (a.ranks - 1) or math.isqrt(a.ranks) ** 2 != a.ranks:
        ap.error("--ranks must be a power of 4")
    base = command(a.case, a.ranks)
    with tempfile.TemporaryDirectory(prefix="collc-union-") as tmp:
        root = Path(a.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        union, full = root / "union", root / "full"
        tasks = run_tasks([*base, "--shard-per-rank", "--ranks", "auto", "-o", str(union)], a.tasks, a.parallel)
        failed = [t for t in tasks if t.code]
        if failed:
            sys.stderr.write(f"task {failed[0].task}: {failed[0].err.strip()}\n")
            return 1
        worst_s = max(t.cpu_s for t in tasks)
        worst_mib = max(t.peak_mib for t in tasks)
        print(f"{' '.join(base[1:])}: {a.ranks} ranks in {a.tasks} tasks of {a.ranks // a.tasks}")
        print(f"{'figure':34s} {'measured':>18s} {'target':>14s}")
        print(f"{'most CPU s / peak MiB of a task':34s} {worst_s:9.2f} s {worst_mib:5.0f} MiB "
              f"{f'{TARGET_S:g} s, {TARGET_MIB:.0f} MiB':>14s}  "
              f"{'met' if worst_s <= TARGET_S and worst_mib <= TARGET_MIB else 'missed'}")
        print(f"{'CPU s of all tasks':34s} {sum(t.cpu_s for t in tasks):9.2f} s")
        cpu, mib, code, err = one([*base, "--shard-per-rank", "-o", str(full)])
        same: bool | None = None
        if code == 2:
            # above 2^28 rank x chunk slots no one process builds the whole program (it could not
            # check it in memory): the union's collc check below is then the whole-program proof
            print(f"{'one full build':34s} refused: {err.strip().removeprefix('collc: ')}")
        elif code:
            sys.stderr.write(err)
            return 1
        else:
            print(f"{'one full build':34s} {cpu:9.2f} s {mib:5.0f} MiB")
            same = digest(union) == digest(full)
            print(f"{'union equals the full build':34s} {'yes' if same else 'NO':>18s}  "
                  f"({len(list(union.rglob('*')))} files)")
        cpu, mib, code, err = one(["check", str(union)])
        print(f"{'collc check of the union':34s} {cpu:9.2f} s {mib:5.0f} MiB  exit {code}")
        return 0 if same is not False and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
