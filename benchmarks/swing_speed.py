#!/usr/bin/env python3
"""Swing (B) allreduce: build plus full check, and peak memory.

    python benchmarks/swing_speed.py            # 8x8, 16x16
    python benchmarks/swing_speed.py --large    # also 64x64 (4096 ranks, sharded; minutes, GBs)

Targets (Swing issue): 16x16 under 5 s; 64x64 sharded under 60 s and 4 GiB.
"""

from __future__ import annotations

import argparse
import resource
import time

from collc.driver import compile_xml
from collc.ir.collective import CollKind
from collc.topology import parse_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true")
    args = ap.parse_args()
    cases = [("torus:8x8", False), ("torus:16x16", False)] + ([("torus:64x64", True)] if args.large else [])
    print(f"{'topology':12s} {'ranks':>6s} {'build s':>8s} {'verify s':>9s} {'lower s':>8s} {'check s':>8s} "
          f"{'total s':>8s} {'MiB rss':>8s}  data check")
    for spec, shard in cases:
        topo = parse_spec(spec)
        t0 = time.perf_counter()
        r = compile_xml(topo, "swing", CollKind.ALLREDUCE, shard=shard)
        total = time.perf_counter() - t0
        t = r.timings
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = "" if r.report.ok else "  CHECK FAILED"
        print(f"{spec:12s} {topo.nranks:6d} {t['frontend']:8.2f} {t['verify_schedule']:9.2f} {t['lower']:8.2f} "
              f"{t['check']:8.2f} {total:8.2f} {rss:8.0f}  {r.report.info.get('data_check', '')}{ok}", flush=True)


if __name__ == "__main__":
    main()
