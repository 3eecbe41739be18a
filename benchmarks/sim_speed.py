#!/usr/bin/env python3
"""Step-model speed: link loads routed once, then the alpha-beta time at 25 message sizes.

    python benchmarks/sim_speed.py

Target (simulator issue): a 1024-rank schedule at 25 sizes in under 5 s.
"""

from __future__ import annotations

import time

from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.sim.analysis import step_times
from collc.topology import parse_spec

SIZES = [1024.0 * 2 ** k for k in range(25)]   # 1 KiB .. 16 GiB
CASES = [("hypercube:10", "recursive-halving-doubling"), ("switch:1024", "recursive-halving-doubling"),
         ("torus:32x32", "ring"), ("ring:256", "ring")]


def main() -> None:
    print(f"{'topology':14s} {'algorithm':28s} {'ranks':>6s} {'steps':>6s} {'build s':>8s} {'model s':>8s}  "
          f"{'1 KiB us':>10s} {'1 GiB us':>12s}")
    for spec, alg in CASES:
        t0 = time.perf_counter()
        topo = parse_spec(spec)
        sched = build_schedule(alg, topo, CollKind.ALLREDUCE, inplace=True)
        t1 = time.perf_counter()
        times = step_times(sched, topo, SIZES, alpha_us=5.0)
        t2 = time.perf_counter()
        print(f"{spec:14s} {alg:28s} {topo.nranks:6d} {sched.nsteps:6d} {t1 - t0:8.2f} {t2 - t1:8.2f}  "
              f"{times[0]:10.1f} {times[20]:12.1f}", flush=True)


if __name__ == "__main__":
    main()
