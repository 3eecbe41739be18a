#!/usr/bin/env python3
"""Event-simulation speed: a compiled Program timed at 25 message sizes (1 KiB .. 16 GiB).

    python benchmarks/event_speed.py

Target: the 256-rank ring allreduce (built once, ~8 s) simulated at all 25 sizes in
under 30 s.  ``event/step`` compares the event time with the alpha-beta step model
(``collc.sim.analysis.step_time``) at 1 GiB.
"""

from __future__ import annotations

import time

from collc.driver import compile_xml
from collc.ir.collective import CollKind
from collc.sim.analysis import step_time
from collc.sim.event import simulate_program
from collc.topology import parse_spec

SIZES = [1024 * 2 ** k for k in range(25)]   # 1 KiB .. 16 GiB
ALPHA = 5.0                                  # us
GIB = 1 << 30
CASES = [("ring:8", "ring", CollKind.ALLREDUCE),
         ("switch:8", "direct", CollKind.ALLTOALL),
         ("hypercube:6", "recursive-halving-doubling", CollKind.ALLREDUCE),
         ("ring:256", "ring", CollKind.ALLREDUCE)]


def main() -> None:
    print(f"{'topology':12s} {'algorithm':27s} {'coll':9s} {'ranks':>5s} {'sends':>9s} {'build s':>8s} "
          f"{'sim s':>7s}  {'1 KiB us':>9s} {'1 GiB us':>11s} {'event/step':>10s} {'busbw 16G':>9s}")
    for spec, alg, kind in CASES:
        t0 = time.perf_counter()
        topo = parse_spec(spec)
        built = compile_xml(topo, alg, kind, inplace=True)
        t1 = time.perf_counter()
        res = simulate_program(built.program, topo, SIZES, alpha_us=ALPHA)
        t2 = time.perf_counter()
        messages = sum(1 for g in built.program.gpus for t in g.tbs for s in t.steps if s.type.sends)
        at = {r.size_bytes: r for r in res}
        ratio = at[GIB].time_us / step_time(built.schedule, topo, GIB, ALPHA)
        print(f"{spec:12s} {alg:27s} {kind.value:9s} {topo.nranks:5d} {messages:9d} {t1 - t0:8.2f} "
              f"{t2 - t1:7.2f}  {res[0].time_us:9.1f} {at[GIB].time_us:11.1f} {ratio:10.4f} "
              f"{res[-1].busbw:9.4f}", flush=True)


if __name__ == "__main__":
    main()
