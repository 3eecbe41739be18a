"""Readable, deterministic text of each IR between lowering passes (``collc build --dump-ir``).

One renderer per IR type, in the order the pipeline produces them: the Schedule
(``pipelining``), the per-rank op plan (``scratch``), channel-assigned ops
(``channels``), planned and fused threadblocks (``threadblocks``, ``fusion``) and
the Program's gpus (``dependencies``, ``limits``).  The passes after ``pipelining`` hand
on columns (:mod:`collc.compiler.optable`); the renderers read the readable views the
columns build on demand (``RankOp``, ``ChannelOp``, ``PlannedTb``, ``FusedTb``, ``Gpu``),
so a dump costs the lowering nothing unless asked for.  The same renderers print the
pass fixtures of ``tests/compiler/fixtures`` (xDSL's filecheck style), so a dump and
a fixture read alike.

>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> from collc.topology import parse_spec
>>> show_schedule(build_schedule("ring", parse_spec("ring:2"), CollKind.ALLGATHER, False))[:2]
['schedule allgather ranks=2 chunk_factor=1 outofplace scratch=0', '  step 0 0->0 i[0] -> o[0] copy lane=0']
"""

from __future__ import annotations

from collections.abc import Iterable

from collc.compiler.msccl.fusion import FusedTb
from collc.compiler.msccl.program import Gpu, Program
from collc.compiler.scratch import OpPlan, RankOp
from collc.compiler.msccl.threadblocks import ChannelOp, PlannedTb
from collc.ir.schedule import Schedule, Transfer


def _slots(idx: Iterable[int]) -> str:
    xs = list(idx)
    if xs and xs == list(range(xs[0], xs[0] + len(xs))):
        return f"{xs[0]}" if len(xs) == 1 else f"{xs[0]}:{xs[-1] + 1}"
    return ",".join(map(str, xs))


def show_schedule(s: Schedule) -> list[str]:
    c = s.collective
    head = (f"schedule {c.kind.value} ranks={c.nranks} chunk_factor={c.chunk_factor} "
            f"{'inplace' if c.inplace else 'outofplace'} scratch={s.scratch_chunks}")

    def line(t: Transfer) -> str:
        return (f"  step {t.step} {t.src}->{t.dst} {t.src_buf.value}[{_slots(t.src_idx)}] -> "
                f"{t.dst_buf.value}[{_slots(t.dst_idx)}] {t.op.value} lane={t.lane}")
    return [head] + [line(t) for t in s.transfers]


def show_op(o: RankOp) -> str:
    peer = f" peer={o.peer}" if o.peer >= 0 else ""
    red = " reduce" if o.reduce else ""
    return (f"rank {o.rank} step {o.step}.{o.phase} {o.kind.value}{peer} lane={o.lane} "
            f"{o.srcbuf}[{o.srcoff}] -> {o.dstbuf}[{o.dstoff}] cnt={o.cnt}{red}")


def show_plan(p: OpPlan) -> list[str]:
    return [f"plan scratch={list(p.scratch)}"] + ["  " + show_op(o) for o in p.ops]


def show_chops(chops: Iterable[ChannelOp]) -> list[str]:
    return [f"  chan {c.chan}: {show_op(c.op)}" for c in chops]


def show_tbs(tbs: Iterable[PlannedTb | FusedTb]) -> list[str]:
    out = []
    for k, t in enumerate(tbs):
        out.append(f"  tb {k} send={t.send} recv={t.recv} chan={t.chan}")
        if isinstance(t, PlannedTb):
            out += [f"    {show_op(c.op)}" for c in t.ops]
        else:
            out += [f"    {i.type.value} {i.srcbuf}[{i.srcoff}] -> {i.dstbuf}[{i.dstoff}] cnt={i.cnt}"
                    for i in t.items]
    return out


def show_gpu(g: Gpu) -> list[str]:
    out = [f"  gpu {g.id} i={g.i_chunks} o={g.o_chunks} s={g.s_chunks}"]
    for t in g.tbs:
        out.append(f"    tb {t.id} send={t.send} recv={t.recv} chan={t.chan}")
        out += [f"      s={s.s} {s.type.value} {s.srcbuf}[{s.srcoff}] -> {s.dstbuf}[{s.dstoff}] cnt={s.cnt} "
                f"dep={s.depid}:{s.deps} hasdep={s.hasdep}" for s in t.steps]
    return out


def show_program_header(p: Program) -> list[str]:
    return [f"program {p.name} coll={p.coll} proto={p.proto.value} ngpus={p.ngpus} nchannels={p.nchannels} "
            f"nchunksperloop={p.nchunksperloop} inplace={p.inplace}"]
