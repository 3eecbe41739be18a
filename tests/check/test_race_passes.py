"""The race check's pass without vector clocks against the vector clocks.

``simulate`` first runs without clocks, each tracked tb knowing only the steps of the tbs it
waited on directly; that pass must either give exactly what the clocks give (then nothing
races) or give up. On sound programs, mutations of them, and programs with their
dependencies dropped (real races), it never answers differently from the clocks.
"""

from __future__ import annotations

from dataclasses import replace

from collc.check.xml.executor import _run, _Unordered
from collc.check.xml.opstream import OpStream
from collc.check.races import shared_slot_tbs
from collc.check.runtime_model import size_model
from collc.compiler.msccl.program import Program
from tests.check.test_kernel import MUTATIONS, mutate, programs


def _without_deps(p: Program, g: int) -> Program:
    """Every dependency of one GPU dropped: its tbs touch shared slots unordered."""
    gpu = p.gpus[g % len(p.gpus)]
    tbs = tuple(replace(t, steps=tuple(replace(s, depid=-1, deps=-1) for s in t.steps)) for t in gpu.tbs)
    return replace(p, gpus=tuple(replace(x, tbs=tbs) if x is gpu else x for x in p.gpus))


def test_the_pass_without_clocks_answers_as_the_clocks_or_gives_up() -> None:
    answered = gave_up = raced = 0
    for n, (name, p, coll) in enumerate(programs()):
        if sum(len(t.steps) for g in p.gpus for t in g.tbs) > 3000:
            continue      # time: the small ones have every kind of ordering already
        how = MUTATIONS[1 + n % (len(MUTATIONS) - 1)]
        for q in (p, mutate(p, how, n, 3 * n + 1), _without_deps(p, n)):
            tracked = shared_slot_tbs(q, coll, OpStream.of(q), 1 << 40)
            if not tracked:
                continue
            model = size_model(q.proto, q.nchunksperloop, None)
            for numeric in (False, True) if q is p else (False,):
                clocks = _run(q, coll, model, True, numeric, 1, tracked, [], clocks=True)
                try:
                    direct = _run(q, coll, model, True, numeric, 1, tracked, [], clocks=False)
                except _Unordered:
                    gave_up += 1
                    raced += bool(clocks.races)
                    continue
                assert direct == clocks, (name, how, numeric)
                answered += 1
    assert answered >= 40 and gave_up >= 40 and raced >= 20, (answered, gave_up, raced)
