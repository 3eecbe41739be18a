"""``suspect_gpus`` flags every gpu whose own rules (``check_gpu``) report something: it lets
``check_structure`` (and the shard workers) skip the clean gpus, so a gpu it misses would lose
findings.  Random edits of the tb headers of real programs, in every dialect.  Also the shard
check's other rule over the arrays, ``checker.input_write``."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from collc.backends.msccl_xml import read_xml
from collc.check.findings import Report
from collc.check.xml.opstream import OpStream
from collc.check.xml.structure import check_gpu, suspect_gpus
from collc.compiler.msccl.program import Gpu, Program, Threadblock
from collc.limits import Dialect

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _findings(p: Program, row: int, dialect: Dialect, per_file: int) -> list[str]:
    g = p.gpus[row]
    rep = Report("", dialect)
    check_gpu(p.ngpus, p.nchannels, g.id, {"i": g.i_chunks, "o": g.o_chunks, "s": g.s_chunks},
              [(t.id, t.send, t.recv, t.chan, len(t.steps)) for t in g.tbs], dialect, per_file, rep,
              lambda i: False)
    return [f.message for f in rep.findings]


def _edit(p: Program, rnd: random.Random) -> Program:
    gpus = list(p.gpus)
    for _ in range(rnd.randint(1, 3)):
        row = rnd.randrange(len(gpus))
        g = gpus[row]
        tbs = list(g.tbs)
        what = rnd.choice(["send", "recv", "chan", "id", "dup", "chunks", "many", "drop"])
        if not tbs:
            continue
        i = rnd.randrange(len(tbs))
        t = tbs[i]
        near = [-2, -1, 0, 1, g.id, p.ngpus - 1, p.ngpus, rnd.randrange(p.ngpus)]
        if what == "send":
            tbs[i] = replace(t, send=rnd.choice(near))
        elif what == "recv":
            tbs[i] = replace(t, recv=rnd.choice(near))
        elif what == "chan":
            tbs[i] = replace(t, chan=rnd.choice([-1, 0, 1, p.nchannels - 1, p.nchannels, 40]))
        elif what == "id":
            tbs[i] = replace(t, id=rnd.choice([-1, 0, len(tbs) - 1, len(tbs), 3000]))
        elif what == "dup":
            tbs.append(replace(t, id=len(tbs)))
        elif what == "chunks":
            g = replace(g, s_chunks=-1)
        elif what == "many":
            tbs.extend(Threadblock(len(tbs) + k, rnd.randrange(p.ngpus), -1, 0, t.steps) for k in range(40))
        else:
            del tbs[i]
        gpus[row] = Gpu(g.id, g.i_chunks, g.o_chunks, g.s_chunks, tuple(tbs))
    return replace(p, gpus=tuple(gpus))


@pytest.mark.parametrize("name", ["ring/allreduce-ring4.xml", "swing/allreduce-torus4x4.xml"])
@pytest.mark.parametrize("dialect", list(Dialect))
def test_every_gpu_with_a_finding_is_flagged(name: str, dialect: Dialect) -> None:
    path = GOLDEN / name
    if not path.exists():
        pytest.skip(f"no golden {name}")
    base = read_xml(path).program
    rnd = random.Random(f"{name}{dialect.value}")
    flagged_some = 0
    for _ in range(150):
        p = _edit(base, rnd)
        for per_file in (1, len(p.gpus)):
            flagged = suspect_gpus(p, OpStream.of(p), dialect, per_file)
            for row in range(len(p.gpus)):
                if _findings(p, row, dialect, per_file):
                    assert flagged[row], (row, _findings(p, row, dialect, per_file))
                    flagged_some += 1
    assert flagged_some > 50


def test_a_clean_program_has_no_flag() -> None:
    p = read_xml(GOLDEN / "ring/allreduce-ring4.xml").program
    assert not suspect_gpus(p, OpStream.of(p), Dialect.EXECUTOR, len(p.gpus)).any()


def test_input_write_over_the_arrays_says_what_the_objects_say() -> None:
    """``checker.input_write`` (the shard check's) gives ``check_input_writes``'s finding."""
    from collc.check.data import check_input_writes
    from collc.check.xml.checker import input_write
    from collc.compiler.msccl.program import WRITES_DST

    base = read_xml(GOLDEN / "ring/allgather-ring4-outofplace.xml").program
    rnd = random.Random(7)
    places = [(g, t, s) for g, gpu in enumerate(base.gpus) for t, tb in enumerate(gpu.tbs)
              for s, st in enumerate(tb.steps) if st.type in WRITES_DST]
    assert places
    seen = 0
    for _ in range(30):
        gpus = list(base.gpus)
        for g, t, s in rnd.sample(places, rnd.randint(0, 2)):
            tb = gpus[g].tbs[t]
            steps = list(tb.steps)
            steps[s] = replace(steps[s], dstbuf="i")
            tbs = list(gpus[g].tbs)
            tbs[t] = replace(tb, steps=tuple(steps))
            gpus[g] = replace(gpus[g], tbs=tuple(tbs))
        p = replace(base, gpus=tuple(gpus))
        rep = Report("", Dialect.EXECUTOR)
        check_input_writes(p, rep)
        want = [f.message for f in rep.findings]
        got = input_write(OpStream.of(p))
        assert want == ([got] if got is not None else [])
        seen += bool(want)
    assert seen > 5
