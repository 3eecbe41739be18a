"""The checker's columns of collc's own XML layout: ``OpStream.of`` of a Program (what a file read
by collc.backends.msccl_xml becomes), and :class:`StepTable`, which reads the per-rank files of a
shard directory straight into them (collc.backends.shard_check).  Both must give what the Steps
give one at a time, and the readers refuse (None: the general reader decides) anything that is
not exactly the layout ``to_xml`` prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from collc.backends import msccl_xml, shard_check
from collc.backends.msccl_xml import StepTable, parse_xml, to_xml
from collc.check.xml import opstream
from collc.check.xml.opstream import OpStream
from collc.compiler.msccl.program import Gpu, Program, Proto, Step, StepType, Threadblock
from collc.compiler.pipeline import LowerOptions, lower
from collc.errors import CollcError
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.topology import parse_spec
from tests import test_shard_check
from tests.test_shard_check import _copy, _edit, _parallel, _sequential

# that module's fixtures, used here too: its 128-rank directory (two chunks of 64 files) and the
# kernel taken as warm
good = test_shard_check.good
warm = test_shard_check.warm


def _program(alg: str = "swing", spec: str = "torus:4x4") -> Program:
    return lower(build_schedule(alg, parse_spec(spec), CollKind.ALLREDUCE, inplace=True), LowerOptions())


def _same(a: OpStream, b: OpStream) -> None:
    for f in fields(OpStream):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert x.dtype == y.dtype and np.array_equal(x, y), f.name


def _body_lines(text: str) -> list[str]:
    return text.split("\n")[1:-2]


# ------------------------------------------------------------------ OpStream.of
def test_codes_are_the_opstreams() -> None:
    assert list(msccl_xml._OP) == [t.value for t in opstream.TYPES]
    assert "".join(msccl_xml._BUF) == "".join(opstream.BUFFERS)
    assert msccl_xml.BAD_BUFFER == opstream.BAD_BUFFER


def _reference(p: Program) -> OpStream:
    """The op stream of ``p`` one step at a time (what :meth:`OpStream.of` computes in bulk)."""
    tbs = [(g.id, t) for g in p.gpus for t in g.tbs]
    head = np.array([(gid, t.id, t.send, t.recv, t.chan) for gid, t in tbs], dtype=np.int64).reshape(-1, 5)
    buf = {b: i for i, b in enumerate(opstream.BUFFERS)}
    rows = [(opstream.TYPES.index(st.type), st.s, buf.get(st.srcbuf, opstream.BAD_BUFFER), st.srcoff,
             buf.get(st.dstbuf, opstream.BAD_BUFFER), st.dstoff, st.cnt, st.depid, st.deps, st.hasdep)
            for _, t in tbs for st in t.steps]
    table = np.array(rows, dtype=np.int64).reshape(-1, 10)
    nsteps = np.array([len(t.steps) for _, t in tbs], dtype=np.int64)
    return OpStream.of_columns(head, nsteps, opstream.narrow(list(table.T)))


@pytest.mark.parametrize("alg,spec", [("ring", "ring:4"), ("swing", "torus:4x4"), ("multitree", "torus:4x4")])
def test_op_stream_of_read_files(alg: str, spec: str) -> None:
    p = parse_xml(to_xml(_program(alg, spec))).program      # equal step lines share one Step
    _same(OpStream.of(p), _reference(p))


@pytest.mark.parametrize("big", [999_999_999, 1 << 40])
def test_op_stream_of_odd_programs(big: int) -> None:
    """A buffer the runtime does not know, values that need int64 (or not), equal Steps shared
    and not shared, an empty tb and a gpu without tbs."""
    one = Step(0, StepType.SEND, "x", big, "o", 0, 1)
    steps = (one, Step(1, StepType.RECV, "i", 0, "q", -big, 2, 0, 0, 1), one,
             Step(0, StepType.SEND, "x", big, "o", 0, 1))
    p = Program("odd", Proto.SIMPLE, 1, 2, 3, "allgather", 0, 1, 0, 0,
                (Gpu(2, 1, 2, 0, (Threadblock(0, 1, 1, 0, steps), Threadblock(1, -1, -1, 0, ()))),
                 Gpu(1, 1, 2, 0, ()), Gpu(0, 1, 2, 0, (Threadblock(3, 1, -1, 0, steps[1:2]),))))
    ops = OpStream.of(p)
    _same(ops, _reference(p))
    assert ops.srcbuf[0] == opstream.BAD_BUFFER and ops.s.dtype == (np.int64 if big >= 1 << 30 else np.int32)
    assert ops.tb_gpu.tolist() == [2, 2, 0]


def test_op_stream_of_nothing() -> None:
    p = Program("none", Proto.SIMPLE, 1, 2, 2, "allgather", 0, 1, 0, 0, (Gpu(0, 1, 2, 0, ()),))
    _same(OpStream.of(p), _reference(p))


# ------------------------------------------------------------------ StepTable.scan
def test_scan_equals_the_steps() -> None:
    p = _program()
    lines = _body_lines(to_xml(p))
    table = StepTable()
    body = table.scan(lines)
    assert body is not None
    want = _reference(p)
    values = table.values()
    for k, name in enumerate(opstream.COLUMNS):
        assert np.array_equal(values[body.rows, k], getattr(want, name)), name
    assert body.gpus.tolist() == [[g.id, g.i_chunks, g.o_chunks, g.s_chunks] for g in p.gpus]
    assert body.tbs.tolist() == [[t.id, t.send, t.recv, t.chan] for g in p.gpus for t in g.tbs]
    assert body.nsteps.tolist() == [len(t.steps) for g in p.gpus for t in g.tbs]
    assert body.tb_gpu.tolist() == [k for k, g in enumerate(p.gpus) for _ in g.tbs]
    assert [lines[i] for i in body.gpu_at.tolist()] == [ln for ln in lines if ln.startswith("  <gpu ")]
    # a second scan with the table warm reads no line again and gives the same rows
    n = len(table.rows)
    again = table.scan(list(lines))
    assert again is not None and len(table.rows) == n and np.array_equal(again.rows, body.rows)


def _swap_first(old: str, new: str) -> Callable[[list[str]], list[str]]:
    def change(lines: list[str]) -> list[str]:
        k = next(i for i, ln in enumerate(lines) if ln.startswith(old) or ln == old)
        return lines[:k] + ([new] if new else []) + lines[k + 1:]
    return change


def _step_after_tb(lines: list[str]) -> list[str]:
    k = lines.index("    </tb>")
    return lines[:k + 1] + [lines[k - 1]] + lines[k + 1:]      # a step line met before, outside any tb


BAD: dict[str, Callable[[list[str]], list[str]]] = {
    "step outside tb": _step_after_tb,
    "no </tb>": _swap_first("    </tb>", ""),
    "no </gpu>": lambda ls: ls[:-1],
    "tb outside gpu": lambda ls: [ls[1]] + ls,
    "gpu in gpu": lambda ls: ls[:1] + ls,
    "step first": lambda ls: [ls[2]] + ls,
    "blank line": lambda ls: ls[:3] + [""] + ls[3:],
    "comment": lambda ls: ls[:3] + ["      <!-- x -->"] + ls[3:],
    "unknown type": lambda ls: [ln.replace('type="', 'type="x', 1) if i == 2 else ln for i, ln in enumerate(ls)],
    "ten digits": lambda ls: [ln.replace('cnt="', 'cnt="1000000000', 1) if i == 2 else ln for i, ln in enumerate(ls)],
    "carriage return": lambda ls: [ln + "\r" for ln in ls],
    "tab": lambda ls: ["\t" + ln[2:] if i == 1 else ln for i, ln in enumerate(ls)],
    "tb attribute order": lambda ls: [ln.replace(' send="', ' sends="', 1) if i == 1 else ln for i, ln in enumerate(ls)],
    "gpu attribute": lambda ls: [ln.replace('">', '" x="1">', 1) if i == 0 else ln for i, ln in enumerate(ls)],
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("warmed", [False, True])
def test_scan_refuses_what_is_not_the_layout(case: str, warmed: bool) -> None:
    lines = _body_lines(to_xml(_program("ring", "ring:4")))
    table = StepTable()
    if warmed:      # every good line known: the refusal cannot rest on reading a new line
        assert table.scan(lines) is not None
    bad = BAD[case](list(lines))
    assert bad != lines
    assert table.scan(bad) is None
    # and the single-file reader (the same rules, line by line) leaves such a body to lxml
    assert msccl_xml._canonical_gpus("\n".join(bad) + "\n") is None


@pytest.mark.parametrize("case", sorted(BAD))
def test_line_reader_refuses_what_is_not_the_layout(case: str) -> None:
    """The shard files' reader (a cache shared between files) refuses what the single file's does."""
    lines = _body_lines(to_xml(_program("ring", "ring:4")))
    assert msccl_xml._canonical_gpus("\n".join(BAD[case](list(lines))) + "\n", {}) is None


def _multitree() -> Program:
    return lower(build_schedule("multitree", parse_spec("torus:4x4"), CollKind.ALLGATHER, inplace=False),
                 LowerOptions())


@pytest.mark.parametrize("make", [_program, lambda: _program("ring", "ring:4"), _multitree])
def test_single_file_reader_equals_the_line_reader(make: Callable[[], Program]) -> None:
    """The single file's reader (every distinct step line read at once) gives the Program the
    line-by-line reader gives: the Program printed, one Step object per distinct line."""
    p = make()
    text = to_xml(p)
    body = text[text.index("\n") + 1:-len("</algo>\n")]
    bulk = msccl_xml._canonical_gpus(body)
    assert bulk is not None and bulk == msccl_xml._canonical_gpus(body, {}) and tuple(bulk) == p.gpus
    steps = [st for g in bulk for t in g.tbs for st in t.steps]
    assert len({id(st) for st in steps}) == len(set(steps))


def test_read_steps_keeps_what_the_layout_allows() -> None:
    """Odd values the layout still allows: -0, nine digits either sign, a buffer the runtime
    does not know (a finding of the checker, not the reader's business)."""
    line = ('      <step s="0" type="rrcs" srcbuf="x" srcoff="-0" dstbuf="s" dstoff="-999999999" cnt="999999999" '
            'depid="-1" deps="7" hasdep="1"/>')
    got = msccl_xml._read_steps([line, line.replace('s="0"', 's="12"', 1)])
    assert got == [Step(0, StepType.RECV_REDUCE_COPY_SEND, "x", 0, "s", -999999999, 999999999, -1, 7, 1),
                   Step(12, StepType.RECV_REDUCE_COPY_SEND, "x", 0, "s", -999999999, 999999999, -1, 7, 1)]
    assert msccl_xml._read_steps([]) == []
    for bad in (line.replace('cnt="999999999"', 'cnt="-1 2"'), line.replace('type="rrcs"', 'type="rrcz"'),
                line + " ", line.replace('"-0"', '"0x1"'), line.replace("s=", "s =", 1)):
        assert msccl_xml._read_steps([line, bad]) is None, bad


def test_new_steps_are_the_constructors() -> None:
    cols: list[list[object]] = [[3, 4], [StepType.SEND, StepType.NOP], ["i", "q"], [1, -1], ["o", "s"], [2, -1],
                                [5, 1], [-1, 0], [-1, 2], [0, 1]]
    made = msccl_xml._new_steps(cols)
    assert made == [Step(*(c[k] for c in cols)) for k in range(2)]     # type: ignore[arg-type]
    assert [hash(m) for m in made] == [hash(Step(*(c[k] for c in cols))) for k in range(2)]  # type: ignore[arg-type]


def test_scan_empty_body() -> None:
    body = StepTable().scan([])
    assert body is not None and body.gpus.shape == (0, 4) and body.rows.shape == (0,)


# ------------------------------------------------------------------ shard directories
def _two_gpus(d: Path) -> None:
    """rank 70's file also carries rank 71's <gpu> (the second chunk of 64 files)."""
    other = next((d / "rank-71").iterdir()).read_text().split("\n")[1:-2]
    _edit(d, 70, lambda t: t.replace("</algo>\n", "\n".join(other) + "\n</algo>\n"))


BROKEN: dict[str, Callable[[Path], None]] = {
    "two gpus": _two_gpus,
    "wrong rank": lambda d: _edit(d, 66, lambda t: t.replace('<gpu id="66"', '<gpu id="67"', 1)),
    "no gpu": lambda d: _edit(d, 3, lambda t: t.split("\n")[0] + "\n</algo>\n"),
    "step outside tb": lambda d: _edit(d, 127, lambda t: t.replace("    </tb>\n", "    </tb>\n" + next(
        ln for ln in t.split("\n") if ln.startswith("      <step ")) + "\n", 1)),
}


def _outcome(run: Callable[[], dict[str, object]]) -> object:
    try:
        return run()
    except CollcError as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_shard_directory_same_report(case: str, good: Path, tmp_path: Path, warm: None) -> None:
    d = _copy(good, tmp_path)
    BROKEN[case](d)
    want = _outcome(lambda: _sequential(d))
    assert _outcome(lambda: _parallel(d, 1)) == want
    assert _outcome(lambda: _parallel(d, 2)) == want


def test_unclean_block_forgets_its_lines(good: Path, tmp_path: Path) -> None:
    """A block that is not clean drops the worker's table (its lines may not be collc's)."""
    d = _copy(good, tmp_path)
    _edit(d, 2, lambda t: t.replace('<gpu id="2"', '<gpu id="5"', 1))
    from collc.backends.shards import rank_dirs
    from collc.limits import Dialect
    block = shard_check.read_block(d, rank_dirs(d), Dialect.EXECUTOR)
    assert not block.clean
    assert shard_check._TABLE is not None and not shard_check._TABLE.rows
