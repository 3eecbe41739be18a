#!/usr/bin/env python3
"""MSCCL++ backend speed: `collc build --backend mscclpp` stage by stage, per case.

Stages: frontend, verify (symbolic Schedule check), lower (Schedule -> one-sided plan,
collc/compiler/mscclpp/lower.py), emit (print JSON), check (read back, plan checker).

    python benchmarks/plan_speed.py

Prints one row per case with seconds per stage, the plan's size and its largest threadblock,
and the target beside it (the lowering should stay a small share of `collc build`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's collc

from collc.driver import compile_plan  # noqa: E402
from collc.ir.collective import CollKind  # noqa: E402
from collc.topology import parse_spec  # noqa: E402

CASES = [
    # topology, algorithm, collective, target
    ("ring:8", "ring", CollKind.ALLREDUCE, "lower < 0.1 s"),
    ("switch:8", "direct", CollKind.ALLGATHER, "lower < 0.1 s"),
    ("torus:4x4", "swing", CollKind.ALLREDUCE, "lower < 0.5 s"),
    ("torus:4x4", "multitree", CollKind.ALLREDUCE, "lower < 0.5 s"),
    ("torus:4x4", "hamiltonian-rings", CollKind.ALLREDUCE, "lower < 3 s"),
    ("switch:16", "direct", CollKind.ALLREDUCE, "lower < 1 s"),
    # the largest plans the check follows (8192 actors): the check's vector clocks are numpy rows
    # (as Python lists the 64-rank Swing plan's check took 140 s)
    ("torus:8x8", "swing", CollKind.ALLREDUCE, "check < 10 s"),
    ("a100:8x8", "ring", CollKind.ALLREDUCE, "check < 10 s"),
]


def main() -> None:
    head = (f"{'topology':10s} {'algorithm':18s} {'coll':10s} {'front':>6s} {'verify':>6s} {'lower':>6s} "
            f"{'emit':>6s} {'check':>7s} {'KiB':>7s} {'tbs':>4s} {'ops':>4s}  target")
    print(head)
    for spec, alg, kind, target in CASES:
        r = compile_plan(parse_spec(spec), alg, kind)
        t = r.timings
        tbs = max(len(g.threadblocks) for g in r.plan.gpus)
        ops = max(len(tb.ops) for g in r.plan.gpus for tb in g.threadblocks)
        print(f"{spec:10s} {alg:18s} {kind.value:10s} {t['frontend']:6.2f} {t['verify_schedule']:6.2f} "
              f"{t['lower']:6.2f} {t['emit']:6.2f} {t['check']:7.2f} {len(r.text) / 1024:7.0f} {tbs:4d} "
              f"{ops:4d}  {target}{'' if not r.problems else '  CHECK FAILED'}")


if __name__ == "__main__":
    main()
