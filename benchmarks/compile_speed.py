#!/usr/bin/env python3
"""Compile-speed benchmark: build + lower + emit + read back + full check, per case.

    python benchmarks/compile_speed.py            # the foundation cases
    python benchmarks/compile_speed.py --quick    # small cases only

Prints one row per case with the seconds spent in each stage and the peak memory
of the process so far; the targets of the foundation issue are in the last column.
"""

from __future__ import annotations

import argparse
import resource
import time

from collc.backends.msccl_xml import parse_xml, to_xml
from collc.compiler.limits import Dialect
from collc.compiler.pipeline import LowerOptions, lower
from collc.compiler.verify import check_parsed
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.ir.verify import verify_schedule
from collc.topology import parse_spec

CASES = [
    # topology, algorithm, collective, target (seconds, stages it covers)
    ("ring:8", "ring", CollKind.ALLREDUCE, ""),
    ("switch:8", "direct", CollKind.ALLTOALL, ""),
    ("hypercube:6", "recursive-halving-doubling", CollKind.ALLREDUCE, ""),
    ("ring:64", "ring", CollKind.ALLREDUCE, ""),
    ("ring:256", "ring", CollKind.ALLREDUCE, "< 3 s build+check"),
    ("hypercube:10", "recursive-halving-doubling", CollKind.ALLREDUCE, "< 30 s lower+check"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the 256- and 1024-rank cases")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.quick or not c[3]]
    head = (f"{'topology':14s} {'algorithm':28s} {'coll':10s} {'build':>6s} {'verify':>6s} {'lower':>6s} "
            f"{'emit':>6s} {'read':>6s} {'check':>6s} {'total':>7s} {'MB':>6s} {'MiB rss':>8s}  target")
    print(head)
    print("-" * len(head))
    for spec, alg, kind, target in cases:
        clock = time.perf_counter
        t0 = clock()
        topo = parse_spec(spec)
        sched = build_schedule(alg, topo, kind, inplace=True)
        t1 = clock()
        verify_schedule(sched, topo)
        t2 = clock()
        prog = lower(sched, LowerOptions())
        t3 = clock()
        text = to_xml(prog, Dialect.EXECUTOR)
        t4 = clock()
        parsed = parse_xml(text)
        t5 = clock()
        report = check_parsed(parsed, Dialect.EXECUTOR)
        t6 = clock()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = "" if report.ok else "  CHECK FAILED"
        print(f"{spec:14s} {alg:28s} {kind.value:10s} {t1 - t0:6.2f} {t2 - t1:6.2f} {t3 - t2:6.2f} {t4 - t3:6.2f} "
              f"{t5 - t4:6.2f} {t6 - t5:6.2f} {t6 - t0:7.2f} {len(text) / 1e6:6.1f} {rss:8.0f}  {target}{ok}",
              flush=True)


if __name__ == "__main__":
    main()
