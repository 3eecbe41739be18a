#!/usr/bin/env python3
"""Compile-speed benchmark: what `collc build` does, stage by stage, per case.

Stages: build (frontend), verify (symbolic Schedule check), lower (all passes),
emit (print XML), check (read the text back and run the full checker).

    python benchmarks/compile_speed.py            # the foundation cases
    python benchmarks/compile_speed.py --quick    # small cases only

Prints one row per case with the seconds spent in each stage and the peak memory
of the process so far; the targets of the foundation issue are in the last column.
"""

from __future__ import annotations

import argparse
import resource
import time

from collc.driver import compile_xml
from collc.ir.collective import CollKind
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
            f"{'emit':>6s} {'check':>6s} {'total':>7s} {'MB':>6s} {'MiB rss':>8s}  target")
    print(head)
    print("-" * len(head))
    for spec, alg, kind, target in cases:
        t0 = time.perf_counter()
        result = compile_xml(parse_spec(spec), alg, kind, inplace=True)
        total = time.perf_counter() - t0
        t = result.timings
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = "" if result.report.ok else "  CHECK FAILED"
        print(f"{spec:14s} {alg:28s} {kind.value:10s} {t['frontend']:6.2f} {t['verify_schedule']:6.2f} "
              f"{t['lower']:6.2f} {t['emit']:6.2f} {t['check']:6.2f} {total:7.2f} {len(result.text) / 1e6:6.1f} "
              f"{rss:8.0f}  {target}{ok}", flush=True)

if __name__ == "__main__":
    main()
