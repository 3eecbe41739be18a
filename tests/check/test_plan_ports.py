"""Port channels and MSCCL++ releases in ``collc check`` (docs/mscclpp.md, "Port channels and releases").

The verdicts come from reading the executor kernel (``execution_kernel.hpp``) and the proxy at each
release, not from running the checker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.backends.mscclpp import read_plan
from collc.check.plan_check import check_plan
from collc.cli import main
from collc.compiler.plan import BufferType, LocalBuff, Op, OpName, RemoteBuff

# ---------------------------------------------------------------- item 0: one size per entry, not per op
# The thirteen alltoall lowerings that collc's own check used to refuse with op-sizes (put/ppkt entries of
# 1 and 2 chunks in one op).  handlePut sizes entry i by outputBufferSizes[i], handlePutPackets and handleGet
# by inputBufferSizes[i]; the reader fills both per entry (execution_plan.cc), so the plans are correct.
MIXED = [(alg, topo, proto, place) for alg, topo in (("kautz-c", "kautz:2,2"), ("kautz-c", "kautz:3,2"),
                                                       ("kautz-m", "kautz:2,2"), ("kautz-m", "kautz:3,2"),
                                                       ("dfc-multitree", "dfc:4x4"))
         for proto in ("Simple", "LL") for place in ("--inplace", "--outofplace")]


@pytest.mark.parametrize("alg,topo,proto,place", MIXED)
def test_alltoall_with_mixed_entry_sizes_builds_and_checks(tmp_path: Path, alg: str, topo: str, proto: str,
                                                           place: str) -> None:
    out = tmp_path / "a2a.json"
    assert main(["build", "--backend", "mscclpp", "--algorithm", alg, "--topology", topo, "--collective",
                 "alltoall", "--protocol", proto, place, "-o", str(out)]) == 0
    plan = read_plan(out)
    mixed = [op for g in plan.gpus for tb in g.threadblocks for op in tb.flat_ops()
             if len({b.size for b in (*op.srcs, *op.dsts)}) > 1]
    assert mixed and all(op.name in (OpName.PUT, OpName.PUT_PACKETS) for op in mixed)
    rep = check_plan(plan)
    assert rep.ok and rep.info["simulated"] is True, [f.message for f in rep.errors()]
