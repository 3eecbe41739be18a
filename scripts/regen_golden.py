#!/usr/bin/env python3
"""Regenerate the golden files: XML under tests/golden/<algorithm>/<case>.xml, MSCCL++ plans
under tests/golden/<algorithm>/<case>.mscclpp.json and the per-pass fixtures under
tests/compiler/fixtures/<pass>/<case>.txt.

    python scripts/regen_golden.py          # rewrite them (and docs/algorithms.md's algorithm table)
    python scripts/regen_golden.py --check  # exit 1 if any differs (what the tests do)

Each case is built with the same code path as `collc build`; the files hold no
machine paths, so a diff is a real change of output.  The same command runs
``scripts/regen_readme.py``, which renders docs/algorithms.md's algorithm table from the registry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's collc

from collc.limits import Dialect  # noqa: E402
from collc.compiler.mscclpp.plan import Protocol  # noqa: E402
from collc.driver import compile_plan, compile_xml, sync_files  # noqa: E402
from collc.ir.collective import CollKind  # noqa: E402
from collc.topology import parse_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "tests" / "golden"

# (algorithm, case name, topology, collective, keyword options)
CASES: list[tuple[str, str, str, CollKind, dict[str, object]]] = [
    ("ring", "allreduce-ring4", "ring:4", CollKind.ALLREDUCE, {}),
    ("ring", "allgather-ring4-outofplace", "ring:4", CollKind.ALLGATHER, {"inplace": False}),
    ("ring", "allreduce-ring4-bidirectional-legacy", "ring:4", CollKind.ALLREDUCE,
     {"params": {"bidirectional": "true"}, "dialect": Dialect.LEGACY}),
    ("recursive-doubling", "allreduce-hypercube2", "hypercube:2", CollKind.ALLREDUCE, {}),
    ("recursive-halving-doubling", "allreduce-switch4-chunks2", "switch:4", CollKind.ALLREDUCE, {"chunks": 2}),
    ("direct", "alltoall-switch4", "switch:4", CollKind.ALLTOALL, {}),
    ("binomial-tree", "broadcast-switch4-root1", "switch:4", CollKind.BROADCAST, {"root": 1}),
    ("swing", "allreduce-torus4x4", "torus:4x4", CollKind.ALLREDUCE, {}),
    ("multitree", "allreduce-torus3x3", "torus:3x3", CollKind.ALLREDUCE, {}),
    ("multitree", "allreduce-torus3x3-fused", "torus:3x3", CollKind.ALLREDUCE,
     {"params": {"threadblocks": "fused"}}),
]


# One MSCCL++ plan per family, its smallest case (the --backend mscclpp path of `collc build`).
# hamiltonian-rings applies to nothing smaller than torus:3x3 (576 remote transfers): its golden
# is the LL plan (about 0.6 MB; the Simple one is 1.1 MB), which also covers LL at scale.
PLAN_CASES: list[tuple[str, str, str, CollKind, dict[str, object]]] = [
    ("bfb", "allgather-ring4", "ring:4", CollKind.ALLGATHER, {}),
    ("binomial-tree", "broadcast-switch4-root0", "switch:4", CollKind.BROADCAST, {"root": 0}),
    ("bruck", "alltoall-switch4", "switch:4", CollKind.ALLTOALL, {}),
    ("bucket", "allreduce-ring3", "ring:3", CollKind.ALLREDUCE, {}),
    ("dfc-multitree", "alltoall-dfc2x2", "dfc:2x2", CollKind.ALLTOALL, {}),
    ("hamiltonian-rings", "allreduce-torus3x3-ll", "torus:3x3", CollKind.ALLREDUCE, {"protocol": Protocol.LL}),
    ("hdrm", "allreduce-bigraph2x4", "bigraph:2x4", CollKind.ALLREDUCE, {}),
    ("mirrored-recursive-doubling", "allreduce-ring4", "ring:4", CollKind.ALLREDUCE, {}),
    ("ring-2d", "allreduce-torus2x2", "torus:2x2", CollKind.ALLREDUCE, {}),
    ("shifted-ring", "allgather-circulant5", "circulant:5:1,2", CollKind.ALLGATHER, {}),
    ("dfc-do", "allgather-dfc2x3", "dfc:2x3", CollKind.ALLGATHER, {}),
    ("dfc-md", "reducescatter-dfc2x3", "dfc:2x3", CollKind.REDUCESCATTER, {}),
    ("direct", "alltoall-switch4", "switch:4", CollKind.ALLTOALL, {}),
    ("double-binary-tree", "allreduce-switch4", "switch:4", CollKind.ALLREDUCE, {}),
    ("forestcoll", "reducescatter-switch4", "switch:4", CollKind.REDUCESCATTER, {}),
    ("kautz-c", "allgather-kautz2-2", "kautz:2,2", CollKind.ALLGATHER, {}),
    ("kautz-m", "allgather-kautz2-2", "kautz:2,2", CollKind.ALLGATHER, {}),
    ("multitree", "allgather-ring4", "ring:4", CollKind.ALLGATHER, {}),
    ("pairwise", "alltoall-switch4", "switch:4", CollKind.ALLTOALL, {}),
    ("recursive-doubling", "allgather-switch4", "switch:4", CollKind.ALLGATHER, {}),
    ("recursive-doubling-torus", "allreduce-torus2x2", "torus:2x2", CollKind.ALLREDUCE, {}),
    ("recursive-halving-doubling", "reducescatter-switch4", "switch:4", CollKind.REDUCESCATTER, {}),
    ("ring", "allreduce-ring4", "ring:4", CollKind.ALLREDUCE, {}),
    ("ring", "allgather-ring4-ll", "ring:4", CollKind.ALLGATHER, {"protocol": Protocol.LL}),
    ("shifted-bfb-ring", "allgather-circulant5", "circulant:5:1,2", CollKind.ALLGATHER, {}),
    ("swing", "allgather-torus2x2", "torus:2x2", CollKind.ALLGATHER, {}),
]


def render() -> dict[Path, str]:
    out: dict[Path, str] = {}
    for algorithm, case, spec, kind, kwargs in CASES:
        result = compile_xml(parse_spec(spec), algorithm, kind, **kwargs)  # type: ignore[arg-type]
        if not result.report.ok:
            raise SystemExit(f"{algorithm}/{case} fails its own check: {result.report.errors()[0].message}")
        out[ROOT / algorithm / f"{case}.xml"] = result.text
    for algorithm, case, spec, kind, kwargs in PLAN_CASES:
        # a memory channel needs CUDA IPC: the plans are for one host (a ring or torus of GPUs in one box)
        topo = parse_spec(spec)
        topo = topo.with_hosts((0,) * topo.nranks)
        plan = compile_plan(topo, algorithm, kind, **kwargs)  # type: ignore[arg-type]
        if plan.problems:
            raise SystemExit(f"{algorithm}/{case} fails the plan check: {plan.problems[0]}")
        out[ROOT / algorithm / f"{case}.mscclpp.json"] = plan.text
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    files = render()
    # the per-pass fixtures (tests/compiler/fixtures/<pass>/<case>.txt) are rendered by their test module
    from tests.compiler.test_pass_fixtures import render_fixtures
    files.update(render_fixtures())
    golden = sync_files(files, args.check, ROOT.parent.parent)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import regen_readme
    readme = regen_readme.main(["--check"] if args.check else [])
    return golden or readme


if __name__ == "__main__":
    sys.exit(main())
