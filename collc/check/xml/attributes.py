"""Rules on the ``<algo>`` element: required attributes of the dialect, valid values and the
collective names each runtime accepts (codes ``attribute`` and ``limit``; docs/runtime-model.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from collc.check.findings import Report
from collc.limits import LIMITS, REQUIRED_ALGO, Dialect
from collc.compiler.msccl.program import Program
from collc.inputs import INT64_MAX

LEGACY_COLLS = {"allreduce", "allgather", "reduce", "broadcast", "alltoall", "reduce_scatter", "custom"}
EXECUTOR_COLLS = {"allreduce", "allgather", "reducescatter", "reduce", "broadcast", "alltoall", "alltoallv",
                  "send", "recv", "gather", "scatter"}


def check_header(p: Program, attrs: dict[str, str] | None, missing: Iterable[tuple[str, str]],
                  dialect: Dialect, rep: Report) -> None:
    algo_missing = [a for where, a in missing if where == "<algo>"]
    if attrs is not None:
        algo_missing = [a for a in REQUIRED_ALGO[dialect] if a not in attrs]
    for a in algo_missing:
        hint = " (the executor and RCCL refuse the file: use --dialect legacy for microsoft/msccl files)" \
            if dialect is not Dialect.LEGACY and a in ("minBytes", "maxBytes", "outofplace") else ""
        rep.add("attribute", f'<algo> lacks attribute "{a}"{hint}')
    colls = LEGACY_COLLS if dialect is Dialect.LEGACY else EXECUTOR_COLLS
    if p.coll not in colls:
        other = "reduce_scatter" if p.coll == "reducescatter" else "reducescatter"
        hint = f' (this dialect spells it "{other}")' if p.coll in ("reducescatter", "reduce_scatter") else ""
        rep.add("attribute", f'coll="{p.coll}" is not accepted by the {dialect.value} runtime{hint}')
    lim = LIMITS[dialect]
    if p.ngpus < 1:
        rep.add("attribute", f"ngpus={p.ngpus} must be at least 1")
    if p.nchunksperloop < 1:
        rep.add("attribute", f"nchunksperloop={p.nchunksperloop} must be at least 1")
    if not 1 <= p.nchannels <= lim.max_channels:
        rep.add("limit", f"nchannels={p.nchannels} must be in 1..{lim.max_channels} for {dialect.value}")
    for key, val in (("inplace", p.inplace), ("outofplace", p.outofplace)):
        if val not in (None, 0, 1):
            rep.add("attribute", f"{key}={val} must be 0 or 1")
    if dialect is not Dialect.LEGACY and p.inplace == 0 and p.outofplace == 0:
        rep.add("attribute", "inplace and outofplace are both 0: the runtime never selects this algorithm",
                "warning")
    for key, val in (("minBytes", p.min_bytes), ("maxBytes", p.max_bytes)):
        if val is not None and not 0 <= val <= INT64_MAX:
            rep.add("attribute", f"{key}={val} is outside 0..{INT64_MAX}: the runtime reads it as an int64")
    if p.min_bytes is not None and p.max_bytes and p.min_bytes > p.max_bytes:
        rep.add("attribute", f"minBytes={p.min_bytes} exceeds maxBytes={p.max_bytes}")
    if len(p.name) > 63:
        rep.add("attribute", f"name is {len(p.name)} characters; keep it under 64", "warning")
