#!/usr/bin/env python3
"""MultiTree speed: trees, then the whole build (schedule, lowering, emission, full check).

    python benchmarks/multitree_speed.py            # 4x4, 8x8, 16x16 tori
    python benchmarks/multitree_speed.py --large    # also 32x32 (1024 ranks, one file per rank,
                                                    # fused tbs; about 3 minutes and 3.5 GB)

Targets (MultiTree issue): 16x16 torus under 10 s, 32x32 torus under 60 s (issue #17: the whole
build).  ``front s`` is the frontend (trees, lanes, Schedule: MultiTree's own share), ``lower s``
the generic lowering passes, ``check s`` the checker; ``cpu s`` is the process CPU time of the
build, which is what counts on a shared machine.
"""

from __future__ import annotations

import argparse
import resource
import time

from collc.driver import compile_xml
from collc.errors import CollcError
from collc.frontends.multitree import build_trees
from collc.ir.collective import CollKind
from collc.topology import parse_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true")
    args = ap.parse_args()
    specs = ["torus:4x4", "torus:8x8", "torus:16x16"] + (["torus:32x32"] if args.large else [])
    print(f"{'topology':12s} {'T':>4s} {'trees s':>8s} {'build s':>8s} {'front s':>8s} {'lower s':>8s} "
          f"{'check s':>8s} {'total s':>8s} {'cpu s':>8s} {'MiB rss':>8s} {'nodes':>6s} {'tbs':>5s}  target")
    for spec in specs:
        topo = parse_spec(spec)
        t0 = time.perf_counter()
        trees = build_trees(topo)
        t1 = time.perf_counter()
        c1 = time.process_time()
        try:
            # 1024 ranks cannot share one file (the parser's node budget): one file per rank
            result = compile_xml(topo, "multitree", CollKind.ALLREDUCE, inplace=True, shard=topo.nranks >= 1024)
        except CollcError as exc:  # e.g. 32x32: more steps per rank than the parser can load
            print(f"{spec:12s} {trees.steps:4d} {t1 - t0:8.2f}  not buildable after "
                  f"{time.perf_counter() - t1:.1f} s: {exc}", flush=True)
            continue
        t2 = time.perf_counter()
        cpu = time.process_time() - c1
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        target = {"torus:16x16": "< 10 s", "torus:32x32": "< 60 s"}.get(spec, "")
        ok = "" if result.report.ok else "  CHECK FAILED"
        gpus = result.program.gpus
        nodes = max(2 + len(g.tbs) + sum(len(t.steps) for t in g.tbs) for g in gpus)   # per rank, sharded
        print(f"{spec:12s} {trees.steps:4d} {t1 - t0:8.2f} {t2 - t1:8.2f} {result.timings['frontend']:8.2f} "
              f"{result.timings['lower']:8.2f} {result.timings['check']:8.2f} {t2 - t0:8.2f} {cpu:8.2f} {rss:8.0f} {nodes:6d} {max(len(g.tbs) for g in gpus):5d}"
              f"  {target}{ok}", flush=True)


if __name__ == "__main__":
    main()
