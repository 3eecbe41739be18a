#!/usr/bin/env python3
"""Speed of ``collc bench parse`` on long and hostile logs (issue 27 A), with the target beside each figure.

    python benchmarks/bench_parse_speed.py            # every row
    python benchmarks/bench_parse_speed.py --quick    # a sweep of 30 000 sizes instead of 150 000

The logs are built from the real lines of the shared corpus (``tests/runtime_tests/_logs.py``):
a sweep of 150 000 sizes (300 000 result rows) with four INFO lines of other ranks per row and
every tenth row cut by one (79 MB), the 16-rank log repeated 4000 times (23 MB, 248 000 rows, as a
script looping over runs writes it), the executor log repeated, and one 10 MB line.

Measured 2026-11-28 on the shared 2-core machine (load 3 to 5), ``cli`` seconds before (1fd9c08) /
after: sweep 11.1 / 9.8, 4000 runs 38.4 / 4.1, 10 MB line killed after 60 / 0.2 (exit 2).
``parse`` is the in-process parse (``parse_file_tests``), ``cli`` the wall time of the whole
``python -m collc.cli bench parse`` command, printing included.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collc.runtime_tests.parse import LogParseError, parse_file_tests  # noqa: E402
from tests.runtime_tests._logs import GCP, YCCL, corpus, sweep_log  # noqa: E402

TARGET_S = 10.0      # "seconds" for a real long sweep; the bad-input promise for hostile ones


def _cli(path: Path) -> tuple[float, int]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "collc.cli", "bench", "parse", str(path)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    return time.monotonic() - start, proc.returncode


def _parse(path: Path) -> tuple[float, int]:
    start = time.monotonic()
    try:
        rows = sum(len(t.rows) for t in parse_file_tests(path))
    except LogParseError:
        rows = 0
    return time.monotonic() - start, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = 30_000 if args.quick else 150_000
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        runs = 800 if args.quick else 4000
        cases = {f"sweep {sizes} sizes": d / "sweep.log", f"{runs} runs concatenated": d / "runs.log",
                 "executor log x80": d / "yccl.log", "one 10 MB line": d / "line.log"}
        cases[f"{runs} runs concatenated"].write_text(corpus(GCP).read_text() * runs)
        cases[f"sweep {sizes} sizes"].write_text(sweep_log(sizes, info_per_row=4))
        cases["executor log x80"].write_text(corpus(YCCL).read_text() * 80)
        cases["one 10 MB line"].write_text("a" * 10_000_000 + "\n")
        print(f"{'log':24s} {'MB':>6s} {'rows':>8s} {'parse s':>8s} {'cli s':>7s} {'rc':>3s} {'target s':>9s}")
        for name, path in cases.items():
            t_parse, rows = _parse(path)
            t_cli, rc = _cli(path)
            mb = path.stat().st_size / 1e6
            print(f"{name:24s} {mb:6.1f} {rows:8d} {t_parse:8.2f} {t_cli:7.2f} {rc:3d} {'<= ' + str(TARGET_S):>9s}")


if __name__ == "__main__":
    main()
