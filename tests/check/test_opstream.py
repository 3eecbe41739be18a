"""The op stream (a Program as arrays) and the vectorized fast paths of the static rules.

The fast paths only decide which tbs the per-step rules must explain (structure) or whether
the tb-by-tb matching needs to run at all; the findings must be exactly those of the rules
run on every tb, on collc's own files, hand-broken ones and the real-world corpus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.backends.msccl_xml import parse_xml, read_xml
from collc.check.findings import Report
from collc.check.xml.matching import all_match, check_matching
from collc.check.xml.opstream import BUFFERS, TYPES, OpStream
from collc.check.xml.structure import check_structure, suspect_tbs
from collc.limits import LIMITS, Dialect
from collc.compiler.msccl.program import Program
from tests._corpus import corpus_files
from tests._shared import missing

REPO = Path(__file__).resolve().parents[2]
GOLDEN = sorted((REPO / "tests" / "golden").rglob("*.xml"))
RING4 = REPO / "tests" / "golden" / "ring" / "allreduce-ring4.xml"
RHD = REPO / "tests" / "golden" / "recursive-halving-doubling" / "allreduce-switch4-chunks2.xml"   # has deps


def _findings(rep: Report) -> list[tuple[str, str, str]]:
    return [(f.code, f.severity, f.message) for f in rep.findings]


def _same_rules(p: Program) -> None:
    for dialect in Dialect:
        slow, fast = Report("x", dialect), Report("x", dialect)
        ops = OpStream.of(p)
        ok_slow = check_structure(p, dialect, slow, False)
        ok_fast = check_structure(p, dialect, fast, False, ops)
        assert (ok_fast, _findings(fast)) == (ok_slow, _findings(slow))
        slow, fast = Report("x", dialect), Report("x", dialect)
        assert check_matching(p, fast, ops) == check_matching(p, slow)
        assert _findings(fast) == _findings(slow)


def test_op_stream_rows_follow_the_document() -> None:
    p = read_xml(RING4).program
    ops = OpStream.of(p)
    rows = [(g.id, t.id, pos, st.type, st.srcbuf, st.srcoff, st.dstbuf, st.dstoff, st.cnt, st.depid, st.deps)
            for g in p.gpus for t in g.tbs for pos, st in enumerate(t.steps)]
    got = [(int(ops.tb_gpu[ops.tb[k]]), int(ops.tb_id[ops.tb[k]]), int(ops.step[k]), TYPES[ops.op[k]],
            BUFFERS[ops.srcbuf[k]], int(ops.srcoff[k]), BUFFERS[ops.dstbuf[k]], int(ops.dstoff[k]),
            int(ops.count[k]), int(ops.depid[k]), int(ops.deps[k])) for k in range(len(ops.op))]
    assert got == rows
    assert ops.tb_start[-1] == len(rows) and ops.ntbs == sum(len(g.tbs) for g in p.gpus)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fast_paths_agree_on_golden_files(path: Path) -> None:
    p = read_xml(path).program
    _same_rules(p)
    assert all_match(p, OpStream.of(p))
    flagged = suspect_tbs(p, OpStream.of(p), LIMITS[Dialect.EXECUTOR])
    assert flagged is not None and not flagged.any()


BREAKS = [('cnt="1"', 'cnt="2"'), ('deps="-1"', 'deps="0"'), ('hasdep="1"', 'hasdep="0"'),
          ('depid="-1"', 'depid="0"'), ('type="s"', 'type="r"'), ('srcoff="0"', 'srcoff="9"'),
          ('s="1"', 's="3"'), ('dstbuf="o"', 'dstbuf="x"'), ('type="rrs"', 'type="nop"')]


BROKEN = [pytest.param(g, old, new, id=f"{g.parent.name}-{new}") for g in (RING4, RHD) for old, new in BREAKS
          if old in g.read_text()]


@pytest.mark.parametrize("golden, old, new", BROKEN)
def test_fast_paths_agree_on_broken_files(golden: Path, old: str, new: str) -> None:
    text = golden.read_text()
    at = text.find(old, text.index('<gpu id="1"'))
    if at < 0:
        at = text.index(old)
    p = parse_xml(text[:at] + new + text[at + len(old):]).program
    _same_rules(p)


@pytest.mark.parametrize("path", corpus_files() or [None], ids=lambda p: p.name if p else "no-corpus")
def test_fast_paths_agree_on_the_corpus(path: Path | None) -> None:
    if path is None:
        pytest.skip(missing("msccl-corpus"))
    _same_rules(read_xml(path).program)
