#!/usr/bin/env python3
"""Build speed of the Kautz and 2dfc alltoall schedules at the thesis's scales.

    python benchmarks/kautz_dfc_speed.py            # dfc 16x16 (256 ranks) and K(8,2) (72 ranks)
    python benchmarks/kautz_dfc_speed.py --quick    # dfc 8x8 and K(4,2)

(from a checkout, ``PYTHONPATH=.`` makes it time that checkout rather than an installed collc)

One row per case: seconds in the frontend, in lowering + emit, in the read-back check,
the total, the program's rounds (the thesis's steps) and the target beside it.  The
target is ours (the issue sets none): a 256-rank alltoall builds and checks within 60 s
on one core, a 72-rank one within 10 s.
"""

from __future__ import annotations

import argparse
import time

from collc.driver import compile_xml
from collc.ir.collective import CollKind
from collc.sim.lockstep import program_rounds
from collc.topology import parse_spec

FULL = [("dfc:16x16", "dfc-do", 60.0), ("dfc:16x16", "dfc-md", 60.0), ("dfc:16x16", "dfc-multitree", 60.0),
        ("kautz:8,2", "kautz-c", 10.0), ("kautz:8,2", "kautz-m", 10.0)]
QUICK = [("dfc:8x8", "dfc-do", 10.0), ("dfc:8x8", "dfc-md", 10.0), ("dfc:8x8", "dfc-multitree", 10.0),
         ("kautz:4,2", "kautz-c", 5.0), ("kautz:4,2", "kautz-m", 5.0)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(f"{'topology':12s} {'algorithm':14s} {'frontend':>8s} {'lower':>7s} {'check':>7s} {'total':>7s} "
          f"{'rounds':>6s}  target")
    for spec, alg, target in QUICK if args.quick else FULL:
        topo = parse_spec(spec)
        t0 = time.perf_counter()
        c = compile_xml(topo, alg, CollKind.ALLTOALL)
        total = time.perf_counter() - t0
        tm = c.timings
        rounds = sum(1 for r in program_rounds(c.program) if r)
        ok = "ok" if c.report.ok and total <= target else ("CHECK FAILED" if not c.report.ok else "SLOW")
        print(f"{spec:12s} {alg:14s} {tm['frontend']:8.2f} {tm['lower'] + tm['emit']:7.2f} {tm['check']:7.2f} "
              f"{total:7.2f} {rounds:6d}  < {target:.0f} s  {ok}")


if __name__ == "__main__":
    main()
