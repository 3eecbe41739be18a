#!/usr/bin/env python3
"""Speed of building and querying large topologies, with the target beside each figure (CPU seconds of
this process, least of ``--repeat`` runs).

    python benchmarks/topology_speed.py [--repeat 3]

Rows: a 64x64 torus built and asked two distances and a route (the old unit test's 1 s); 585 switch routes on
switch:4096; ``a100:512x64`` (32768 GPUs on rails) parsed, whose ring-cycle check searched a route per step
before the strongly-connected-switches shortcut (140 s measured 2026-11-28, 2 s after).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collc.topology import parse_spec  # noqa: E402
from collc.topology.generators import switch, torus  # noqa: E402


def _torus() -> None:
    t = torus([64, 64])
    assert t.distance(0, 32 * 64 + 32) == 64 and t.route(0, 1) == (0, 1)


def _switch_routes() -> None:
    t = switch(4096)
    for a in range(0, 4096, 7):
        assert t.route(a, (a + 1) % 4096) == (a, 4096, (a + 1) % 4096)


def _rails() -> None:
    assert parse_spec("a100:512x64").nranks == 32768


ROWS: list[tuple[str, Callable[[], None], float]] = [
    ("torus:64x64 build + distances", _torus, 1.0),
    ("switch:4096, 585 routes", _switch_routes, 1.0),
    ("a100:512x64 parse (32768 GPUs)", _rails, 5.0),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the least CPU time is shown")
    args = ap.parse_args()
    print(f"{'case':34s} {'CPU s':>8s} {'target':>8s}  met")
    for name, fn, target in ROWS:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        print(f"{name:34s} {best:8.2f} {target:8.2f}  {'yes' if best <= target else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
