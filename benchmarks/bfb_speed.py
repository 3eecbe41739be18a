#!/usr/bin/env python3
"""BFB and topology-finder speed (direct-connect paper, Table 6 and section 5.4).

Each case runs in a fresh subprocess so that its peak resident memory is its own:

* BFB allgather schedule (every (step, receiver) problem solved, the integral split
  and the rows of every node; vertex-transitive graphs solve one node per step);
* BFB cost only (the finder's use: no split, no rows) on graphs without symmetry;
* the topology finder on a cold cache and then on the warm cache.

    python benchmarks/bfb_speed.py            # all cases
    python benchmarks/bfb_speed.py --quick    # skip the 2000-node finder and L3(C16(3,4))

Targets: hypercube 1024 <= 4 s and 50x50 torus <= 6 s (10x the paper's 52.7 s and
61.1 s); the finder for N <= 2000, d = 4 under a minute, cached after the first run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

BFB = """
import json, resource, sys, time
from collc.topology import parse_spec
from collc.frontends.bfb import bfb_allgather
t = parse_spec(sys.argv[1])
t0 = time.perf_counter()
r = bfb_allgather(t, with_pieces=sys.argv[2] == "1")
dt = time.perf_counter() - t0
print(json.dumps({"s": dt, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "what": f"D={r.diameter} beta={r.beta} rows={len(r.pieces)}"}))
"""

FINDER = """
import json, resource, sys, time
from collc.frontends.topology_finder import find
t0 = time.perf_counter()
f = find(int(sys.argv[1]), int(sys.argv[2]))
dt = time.perf_counter() - t0
print(json.dumps({"s": dt, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "what": f"{len(f)} rows, best T_L row {f[0].recipe}"}))
"""


def run(code: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    import os

    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows: list[tuple[str, dict[str, object], str]] = []
    cases = [("hypercube:10", "1", "<= 4 s (paper 52.7 s)"), ("torus:50x50", "1", "<= 6 s (paper 61.1 s)"),
             ("circulant:1024", "1", ""), ("genkautz:4,1024", "1", "(paper's scipy rewrite: 20 s)"),
             ("genkautz:4,1024", "0", "")]
    if not args.quick:
        cases.append(("L3(C16(3,4))", "1", ""))
    for spec, pieces, target in cases:
        label = f"bfb {'schedule' if pieces == '1' else 'cost'} {spec}"
        rows.append((label, run(BFB, [spec, pieces]), target))
        print(f"{label:40s} {float(rows[-1][1]['s']):8.2f} s", file=sys.stderr)
    sizes = [(1024, 4)] + ([] if args.quick else [(2000, 4)])
    with tempfile.TemporaryDirectory() as cache:
        for n, d in sizes:
            env = {"COLLC_CACHE_DIR": cache}
            rows.append((f"finder N={n} d={d} (cold cache)", run(FINDER, [str(n), str(d)], env), "< 60 s"))
            rows.append((f"finder N={n} d={d} (cached)", run(FINDER, [str(n), str(d)], env), ""))
    head = f"{'case':40s} {'seconds':>8s} {'peak MiB':>9s}  {'result':44s} target"
    print(head)
    print("-" * len(head))
    for label, r, target in rows:
        print(f"{label:40s} {float(str(r['s'])):8.2f} {float(str(r['rss'])):9.0f}  {str(r['what']):44s} {target}")


if __name__ == "__main__":
    main()
