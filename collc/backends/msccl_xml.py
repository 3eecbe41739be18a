"""MSCCL XML: a pure printer for three dialects and a reader for any MSCCL XML.

The writer obeys the lexical rules of the runtimes' hand-written parser
(docs/runtime-model.md): no XML declaration, two-space indentation
and no tabs, one tag per line with all attributes on it, single spaces, double
quotes, plain decimal integers, self-closing ``<step/>``.  Output depends only on
the Program, so writing twice gives identical bytes.

Dialects differ only in the ``<algo>`` header: ``executor`` and ``rccl`` carry
``inplace outofplace minBytes maxBytes`` and spell ``reducescatter``; ``legacy``
(microsoft/msccl) has no ``outofplace``, spells ``reduce_scatter`` and writes
``minBytes``/``maxBytes`` only when a window is set.

The reader is tolerant: it loads what it can into a ``Program`` and returns the
lexical and attribute problems it saw as ``Diagnostic`` values for the checker,
instead of failing on the first one.  It rejects only files it cannot parse at
all (``EmitError``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import filterfalse, repeat
from operator import itemgetter, methodcaller
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from collc.compiler.msccl.dependencies import GpuTable
from collc.compiler.msccl.fusion import TYPES
from collc.compiler.optable import BUFS
from collc.limits import Dialect
from collc.compiler.msccl.program import (Diagnostic, Gpu, ParsedFile, Program, Proto, Step, StepType,
                                   Threadblock)
from collc.errors import EmitError
from collc.inputs import MAX_XML_BYTES, check_program_size, read_input, show
from collc.memory import gc_paused
from collc.outputs import write_file

if TYPE_CHECKING:
    from lxml import etree  # type: ignore[import-untyped]

ALGO_ATTRS = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace",
              "outofplace", "minBytes", "maxBytes")
GPU_ATTRS = ("id", "i_chunks", "o_chunks", "s_chunks")
TB_ATTRS = ("id", "send", "recv", "chan")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")
INT_ATTRS = frozenset({"nchannels", "nchunksperloop", "ngpus", "inplace", "outofplace", "minBytes", "maxBytes",
                       "id", "i_chunks", "o_chunks", "s_chunks", "send", "recv", "chan", "s", "srcoff",
                       "dstoff", "cnt", "depid", "deps", "hasdep", "nthreads"})
COLL_SPELLING = {"reducescatter": {Dialect.EXECUTOR: "reducescatter", Dialect.RCCL: "reducescatter",
                                   Dialect.LEGACY: "reduce_scatter"}}
MAX_NAME = 63
_STEP_TYPES = {t.value: t for t in StepType}


# --------------------------------------------------------------------------- writer
def _clean_name(name: str) -> str:
    safe = re.sub(r'[^A-Za-z0-9_.:+=,()-]', "_", name)
    return safe[:MAX_NAME]


def algo_header(program: Program, dialect: Dialect) -> str:
    coll = COLL_SPELLING.get(program.coll, {}).get(dialect, program.coll)
    attrs: list[tuple[str, object]] = [
        ("name", _clean_name(program.name)), ("proto", program.proto.value), ("nchannels", program.nchannels),
        ("nchunksperloop", program.nchunksperloop), ("ngpus", program.ngpus), ("coll", coll),
        ("inplace", program.inplace)]
    if dialect is Dialect.LEGACY:
        if program.min_bytes:
            attrs.append(("minBytes", program.min_bytes))
        if program.max_bytes:
            attrs.append(("maxBytes", program.max_bytes))
    else:
        attrs += [("outofplace", program.outofplace if program.outofplace is not None else 1 - program.inplace),
                  ("minBytes", program.min_bytes or 0), ("maxBytes", program.max_bytes or 0)]
    return "<algo " + " ".join(f'{k}="{v}"' for k, v in attrs) + ">"


def _gpu_lines(gpu: Gpu) -> Iterator[str]:
    yield (f'  <gpu id="{gpu.id}" i_chunks="{gpu.i_chunks}" o_chunks="{gpu.o_chunks}" '
           f's_chunks="{gpu.s_chunks}">')
    for tb in gpu.tbs:
        yield f'    <tb id="{tb.id}" send="{tb.send}" recv="{tb.recv}" chan="{tb.chan}">'
        for st in tb.steps:
            yield (f'      <step s="{st.s}" type="{st.type.value}" srcbuf="{st.srcbuf}" srcoff="{st.srcoff}" '
                   f'dstbuf="{st.dstbuf}" dstoff="{st.dstoff}" cnt="{st.cnt}" depid="{st.depid}" '
                   f'deps="{st.deps}" hasdep="{st.hasdep}"/>')
        yield "    </tb>"
    yield "  </gpu>"


def gpu_text(gpu: Gpu) -> str:
    """One ``<gpu>`` element as text (no trailing newline): what :func:`join_xml` puts together."""
    return "\n".join(_gpu_lines(gpu))


_TYPE_TEXT = [t.value for t in TYPES]


def _loop_text(g: GpuTable) -> str:
    """:func:`table_text` a line at a time (values the byte printer's table does not hold)."""
    out = [f'  <gpu id="{g.id}" i_chunks="{g.i_chunks}" o_chunks="{g.o_chunks}" s_chunks="{g.s_chunks}">']
    add = out.append
    types, bufs = _TYPE_TEXT, BUFS
    rows = list(zip(g.s().tolist(), g.type.tolist(), g.srcbuf.tolist(), g.srcoff.tolist(), g.dstbuf.tolist(),
                    g.dstoff.tolist(), g.cnt.tolist(), g.depid.tolist(), g.deps.tolist(), g.hasdep.tolist()))
    bounds = g.start.tolist()
    for k, (send, recv, chan) in enumerate(zip(g.send.tolist(), g.recv.tolist(), g.chan.tolist())):
        add(f'    <tb id="{k}" send="{send}" recv="{recv}" chan="{chan}">')
        for s, ty, sb, so, db, do, cnt, di, ds, h in rows[bounds[k]:bounds[k + 1]]:
            add(f'      <step s="{s}" type="{types[ty]}" srcbuf="{bufs[sb]}" srcoff="{so}" dstbuf="{bufs[db]}" '
                f'dstoff="{do}" cnt="{cnt}" depid="{di}" deps="{ds}" hasdep="{h}"/>')
        add("    </tb>")
    add("  </gpu>")
    return "\n".join(out)


# The byte printer: every line of a kind is one row of a uint8 matrix -- its literal pieces and,
# between them, each value right-aligned in its column's width, padded with NUL bytes -- so a
# rank's lines are a few numpy calls, not a Python format per step; dropping the NULs leaves
# the text.  Values are looked up in a table of the decimal spellings of -1 .. _TOP - 1.
_TOP = 1 << 16
_WIDE = len(str(_TOP - 1))
_STEP_TEXT = ('      <step s="', '" type="', '" srcbuf="', '" srcoff="', '" dstbuf="', '" dstoff="', '" cnt="',
              '" depid="', '" deps="', '" hasdep="', '"/>\n')
_TB_TEXT = ('    <tb id="', '" send="', '" recv="', '" chan="', '">\n')
_TB_CLOSE = "    </tb>\n"


def _spelled(words: list[str]) -> npt.NDArray[np.uint8]:
    """The words right-aligned in rows of their longest's width, NUL-padded."""
    width = max(len(w) for w in words)
    return np.frombuffer("".join(w.rjust(width, "\0") for w in words).encode("ascii"),
                         dtype=np.uint8).reshape(len(words), width)


@functools.cache
def _tables() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Row ``v + 1``: the decimal spelling of ``v`` (-1 <= v < _TOP); the step types; the buffers."""
    v = np.arange(-1, _TOP, dtype=np.int64)
    a = np.abs(v)
    digits = np.zeros((len(v), _WIDE), dtype=np.uint8)
    for d in range(_WIDE):
        p = 10 ** d
        digits[:, _WIDE - 1 - d] = np.where((a >= p) | (d == 0), 48 + a // p % 10, 0)
    digits[0, _WIDE - 2] = ord("-")          # -1
    return digits, _spelled(_TYPE_TEXT), _spelled(list(BUFS))


def _bytes(text: str) -> npt.NDArray[np.uint8]:
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8)


_STEP_BYTES = [_bytes(p) for p in _STEP_TEXT]
_TB_BYTES = [_bytes(p) for p in _TB_TEXT]
_CLOSE_BYTES = _bytes(_TB_CLOSE)


def _lines(pieces: list[npt.NDArray[np.uint8]], fields: list[npt.NDArray[np.uint8]], n: int, width: int = 0
           ) -> npt.NDArray[np.uint8]:
    """``n`` lines as rows: ``pieces[0]``, field 0, ``pieces[1]``, ... (each field n x its width),
    NUL-padded to ``width``."""
    used = sum(len(p) for p in pieces) + sum(f.shape[1] for f in fields)
    out = np.zeros((n, max(width, used)), dtype=np.uint8) if width > used else np.empty((n, used), dtype=np.uint8)
    at = 0
    for piece, field in zip(pieces, fields):
        out[:, at:at + len(piece)] = piece
        at += len(piece)
        out[:, at:at + field.shape[1]] = field
        at += field.shape[1]
    out[:, at:used] = pieces[-1]
    return out


def table_text(g: GpuTable) -> str:
    """:func:`gpu_text` of the gpu that the lowering's columns hold (``g.to_gpu()``), printed
    from the columns."""
    n, ntb = len(g.type), g.ntbs
    if not n or not ntb:
        return _loop_text(g)
    ints = np.stack([g.s(), g.srcoff, g.dstoff, g.cnt, g.depid, g.deps, g.hasdep])
    tbs = np.stack([np.arange(ntb, dtype=np.int64), g.send, g.recv, g.chan])
    lo = ints.min(axis=1).tolist() + tbs.min(axis=1).tolist()
    hi = ints.max(axis=1).tolist() + tbs.max(axis=1).tolist()
    if min(lo) < -1 or max(hi) >= _TOP:
        return _loop_text(g)
    num, types, bufs = _tables()
    # each column's width: its widest value's spelling
    cut = [_WIDE - max(len(str(a)), len(str(b))) for a, b in zip(lo, hi)]
    d = num[ints + 1]
    t = num[tbs + 1]
    steps = _lines(_STEP_BYTES, [d[0, :, cut[0]:], types[g.type], bufs[g.srcbuf], d[1, :, cut[1]:], bufs[g.dstbuf],
                                 d[2, :, cut[2]:], d[3, :, cut[3]:], d[4, :, cut[4]:], d[5, :, cut[5]:],
                                 d[6, :, cut[6]:]], n)
    width = steps.shape[1]
    # each tb's opening line before its first step, its closing line after its last (rows as
    # wide as a step's: a tb's line is shorter)
    around = np.zeros((2 * ntb, width), dtype=np.uint8)
    around[0::2] = _lines(_TB_BYTES, [t[k, :, cut[7 + k]:] for k in range(4)], ntb, width)
    around[1::2, :len(_CLOSE_BYTES)] = _CLOSE_BYTES
    at = np.empty(2 * ntb, dtype=np.int64)
    at[0::2], at[1::2] = g.start[:-1], g.start[1:]
    rows = np.insert(steps, at, around, axis=0).reshape(-1)
    return (f'  <gpu id="{g.id}" i_chunks="{g.i_chunks}" o_chunks="{g.o_chunks}" s_chunks="{g.s_chunks}">\n'
            + str(rows[rows != 0], "ascii") + "  </gpu>")


def join_xml(program: Program, dialect: Dialect, gpu_texts: Iterable[str]) -> str:
    """The file of ``program``'s header around the given ``gpu_text`` pieces, in their order
    (equal to :func:`to_xml` of the program holding those gpus)."""
    return "\n".join([algo_header(program, dialect), *gpu_texts, "</algo>"]) + "\n"


def to_xml(program: Program, dialect: Dialect = Dialect.EXECUTOR, ranks: list[int] | None = None) -> str:
    """Print the program (or only the given ranks' ``<gpu>``, for shards) as text."""
    lines = [algo_header(program, dialect)]
    for gpu in program.gpus:
        if ranks is None or gpu.id in ranks:
            lines.extend(_gpu_lines(gpu))
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write via a temporary file in the same directory, then rename (see ``collc.outputs``)."""
    write_file(path, text)


# --------------------------------------------------------------------------- lexical rules
_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_ATTR = re.compile(r' ([A-Za-z_][A-Za-z0-9_.-]*)="([^"]*)"')
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)\Z")


_INT_NAMES = "|".join(sorted(INT_ATTRS, key=len, reverse=True))
_ATTR_OK = (rf'(?:(?:{_INT_NAMES})="-?(?:0|[1-9][0-9]{{0,8}})"'
            rf'|(?!(?:{_INT_NAMES})=")[A-Za-z_][A-Za-z0-9_.-]*="[^"\n]*")')
# A line that obviously obeys every rule: one tag (or comment), spaces, <= 16 attributes.
_BAD_LINE = re.compile(rf'^(?! *(?:<!--(?:(?!-->).)*-->|</[A-Za-z_][A-Za-z0-9_.-]*>'
                       rf'|<[A-Za-z_][A-Za-z0-9_.-]*(?: {_ATTR_OK}){{0,16}}/?>)? *\r?$).*$', re.MULTILINE)


def lexical_check(text: str) -> list[Diagnostic]:
    """Apply the runtime parser's lexical rules (docs/runtime-model.md) to raw text.

    A fast path accepts files whose every line obviously obeys the rules (what the
    writer prints); anything else is scanned tag by tag for precise messages.
    """
    if _BAD_LINE.search(text) is None:
        return []
    return _scan(text)


def _scan(text: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    pos, n, line = 0, len(text), 1

    def add(msg: str, kind: str = "error") -> None:
        if len(out) < 50:
            out.append(Diagnostic(f"line {line}", msg, kind))

    while pos < n:
        lt = text.find("<", pos)
        gap = text[pos:] if lt < 0 else text[pos:lt]
        for ch in sorted(set(gap) - set(" \n\r")):
            what = "a tab" if ch == "\t" else f"character {ch!r}"
            at = line + gap[:gap.index(ch)].count("\n")
            if len(out) < 50:
                out.append(Diagnostic(f"line {at}", f"{what} between elements: the runtime parser expects '<' "
                                                    f"(indent with spaces)"))
        line += gap.count("\n")
        if lt < 0:
            break
        if text.startswith("<!--", lt):
            end = text.find("-->", lt)
            if end < 0:
                add("unterminated comment")
                break
            line += text.count("\n", lt, end)
            pos = end + 3
            continue
        gt = text.find(">", lt)
        if gt < 0:
            add("unterminated tag")
            break
        tag = text[lt + 1:gt]
        if "\n" in tag or "\r" in tag:
            add("a tag spans several lines: the runtime parser needs every attribute on the tag's line")
        if tag.startswith("?"):
            add("XML declaration '<?xml ...?>': the runtime parser fails with \"expected >, got '?'\"")
        elif tag.startswith("/"):
            if not _TAG_NAME.fullmatch(tag[1:]):
                add(f"closing tag '<{tag}>' must be exactly '</name>'")
        else:
            _check_start_tag(tag.rstrip("/"), add)
        line += tag.count("\n")
        pos = gt + 1
    return out


def _check_start_tag(tag: str, add: Callable[..., None]) -> None:
    m = _TAG_NAME.match(tag)
    if not m:
        add(f"malformed tag '<{tag[:40]}'")
        return
    rest = tag[m.end():]
    if "'" in rest:
        add("single-quoted attribute value: the runtime parser needs double quotes")
        return
    attrs = _ATTR.findall(rest)
    leftover = _ATTR.sub("", rest).strip()
    if leftover:
        add(f"cannot read attributes of <{m.group()}>: {leftover[:40]!r}")
    phantom = rest.count('"  ') + rest.startswith("  ")
    if phantom:
        add(f"<{m.group()}> has repeated spaces between attributes (each wastes one of 16 attribute slots)",
            "warning")
    if len(attrs) + phantom > 16:
        add(f"<{m.group()}> has {len(attrs)} attributes: the runtime keeps 16 and silently drops the rest")
    for key, value in attrs:
        if key in INT_ATTRS and not _DECIMAL.match(value):
            if re.fullmatch(r"-?0[0-9]+", value):
                add(f"{key}=\"{value}\" has a leading zero: strtol reads it as octal")
            else:
                add(f"{key}=\"{value}\" is not a plain decimal integer")
        elif key in INT_ATTRS and key not in INT64_ATTRS and not INT_MIN <= int(value) <= INT_MAX:
            add(f"{key}=\"{_clip(value)}\" is beyond the 32-bit int the runtime parser stores it in")


INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1     # the parser's int (strtol's long, stored in an int)
#: read as int64 by the runtimes (their range is the attribute check's: collc.check.xml.attributes)
INT64_ATTRS = frozenset({"minBytes", "maxBytes"})


def _clip(raw: str) -> str:
    return raw if len(raw) <= 24 else raw[:20] + "..."


def _i32(raw: str) -> int:
    """``raw`` as an int of the parser's range; ValueError when it is not one."""
    v = int(raw, 10)
    if not INT_MIN <= v <= INT_MAX:
        raise ValueError(raw)
    return v


# --------------------------------------------------------------------------- reader
def _int(el: etree._Element, key: str, path: str, missing: list[tuple[str, str]],
         diags: list[Diagnostic], default: int = 0) -> int:
    raw = el.get(key)
    if raw is None:
        missing.append((path, key))
        return default
    try:
        return _i32(raw)
    except ValueError:
        what = "is beyond a 32-bit int" if _DECIMAL.match(raw) else "is not an integer"
        diags.append(Diagnostic(path, f"{key}=\"{_clip(raw)}\" {what}"))
        return default


def read_xml(path: str | os.PathLike[str]) -> ParsedFile:
    """Read an XML file: a regular file of at most ``MAX_XML_BYTES`` (``collc.inputs``)."""
    raw = read_input(path, MAX_XML_BYTES, EmitError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EmitError(f"{show(os.fspath(path))} is not a text file") from None
    return parse_xml(text, os.fspath(path))


# The layout collc itself prints, one element per line: files in it are read line by line
# (several times faster than building an lxml tree for 10^6 steps); anything else, or
# anything that does not nest properly, goes through lxml.
# at most 9 digits: a line with a longer number is read (and its range checked) the slow way
_N = r"(0|[1-9][0-9]{0,8})"
_Z = r"(-?(?:0|[1-9][0-9]{0,8}))"
_STEP_LINE = re.compile(rf'      <step s="{_N}" type="([a-z]+)" srcbuf="([a-z])" srcoff="{_Z}" dstbuf="([a-z])" '
                        rf'dstoff="{_Z}" cnt="{_N}" depid="{_Z}" deps="{_Z}" hasdep="{_N}"/>')
_TB_LINE = re.compile(rf'    <tb id="{_N}" send="{_Z}" recv="{_Z}" chan="{_N}">')
_GPU_LINE = re.compile(rf'  <gpu id="{_N}" i_chunks="{_N}" o_chunks="{_N}" s_chunks="{_N}">')
_STEP_START = "      <step "


_TB_END, _GPU_END = "    </tb>", "  </gpu>"
# whole lines of a text of lines joined by "\n" (a match cannot leave its line: no pattern matches "\n")
_STEPS = re.compile(f"^{_STEP_LINE.pattern}$", re.MULTILINE)
_TBS = re.compile(f"^{_TB_LINE.pattern}$", re.MULTILINE)
_GPUS = re.compile(f"^{_GPU_LINE.pattern}$", re.MULTILINE)
# the codes of collc.check.xml.opstream (TYPES, BUFFERS, BAD_BUFFER; not imported: collc.check
# is a second's start-up that a build without a check does not need)
_OP = {t.value: i for i, t in enumerate(StepType)}     # a step type's code
_BUF = {b: i for i, b in enumerate("ios")}            # a buffer's; any other letter: BAD_BUFFER
BAD_BUFFER = 3
# the kinds of the lines that are not step lines, in a body's codes (a step line's code is its row)
_CLOSE_TB, _CLOSE_GPU, _OPEN_TB, _OPEN_GPU = -1, -2, -3, -4
# collc's nesting of those lines: (<gpu> (<tb> </tb>)* </gpu>)*, kinds as bytes 4 3 1 2
_NESTING = re.compile(rb"(?:\x04(?:\x03\x01)*\x02)*")
_IS_STEP, _IS_TB = methodcaller("startswith", _STEP_START), methodcaller("startswith", "    <tb ")


def _whole_lines(pattern: re.Pattern[str], lines: list[str]) -> list[tuple[str, ...]] | None:
    """The groups of every line, or None if some line does not match all of ``pattern``."""
    got = pattern.findall("\n".join(lines))
    return got if len(got) == len(lines) else None


@dataclass(frozen=True, eq=False)
class Body:
    """The gpus of a body in collc's own layout, as arrays: per gpu its (id, i_chunks, o_chunks,
    s_chunks); per tb (in document order) its gpu's index, (id, send, recv, chan) and its number
    of steps; per step (in document order) its row in the :class:`StepTable` that read it.
    ``gpu_at``: the line of each ``<gpu>`` (its index in the lines scanned)."""

    gpus: np.ndarray
    gpu_at: np.ndarray
    tb_gpu: np.ndarray
    tbs: np.ndarray
    nsteps: np.ndarray
    rows: np.ndarray


class StepTable:
    """The distinct step lines of one or more bodies in collc's layout: line -> row, and each
    row's ten values as :class:`collc.check.xml.opstream.OpStream` holds them (op code, s,
    srcbuf code, srcoff, dstbuf code, dstoff, cnt, depid, deps, hasdep).

    A schedule repeats its step lines many times over (7 to 15 times in Swing and ring files;
    the same lines in many ranks' shards): every line is looked up at C speed (``map``), and the
    lines not seen before are read all at once (one regular expression over their joined
    text, ``int`` by ``map``)."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self._parts: list[np.ndarray] = []
        self._values = np.zeros((0, 10), dtype=np.int64)

    def values(self) -> np.ndarray:
        """The rows' values, int64, one row per distinct line."""
        if self._parts:
            self._values = np.concatenate([self._values, *self._parts])
            self._parts.clear()
        return self._values

    def clear(self) -> None:
        self.rows.clear()
        self._parts.clear()
        self._values = self._values[:0]

    def _add_steps(self, lines: list[str]) -> int | None:
        """Give the new step lines ``lines`` rows (the first one's is returned), or None if one
        is not a step line of collc's layout."""
        got = _whole_lines(_STEPS, lines)
        if got is None:
            return None
        s, ty, sb, so, db, do, cnt, di, ds, h = zip(*got)
        if not set(ty) <= _OP.keys():
            return None
        part = np.empty((len(lines), 10), dtype=np.int64)
        part[:, 0] = np.fromiter(map(_OP.__getitem__, ty), dtype=np.int64, count=len(lines))
        part[:, 2] = np.fromiter(map(_BUF.get, sb, repeat(BAD_BUFFER)), dtype=np.int64, count=len(lines))
        part[:, 4] = np.fromiter(map(_BUF.get, db, repeat(BAD_BUFFER)), dtype=np.int64, count=len(lines))
        for k, col in zip((1, 3, 5, 6, 7, 8, 9), (s, so, do, cnt, di, ds, h)):
            part[:, k] = np.fromiter(map(int, col), dtype=np.int64, count=len(lines))
        self._parts.append(part)
        first = len(self.rows)
        self.rows.update(zip(lines, range(first, first + len(lines))))
        return first

    def scan(self, lines: list[str]) -> Body | None:
        """The :class:`Body` of ``lines`` (a body split at its newlines, without the last empty
        piece), or None if they are not in collc's layout: only the five kinds of line that
        :func:`to_xml` prints, nested as it nests them, step lines only inside a tb."""
        n = len(lines)
        rows = self.rows
        codes: np.ndarray | None = None
        unknown: np.ndarray | None = None
        others = lines                 # a fresh table knows no line
        if rows:
            codes = np.fromiter(map(rows.get, lines, repeat(-1)), dtype=np.int64, count=n)
            unknown = np.flatnonzero(codes < 0)
            others = list(map(lines.__getitem__, unknown.tolist()))
        kinds: dict[str, int] = dict.fromkeys(others, 0)
        # the distinct lines not in the table, sorted by their start at C speed: new step lines,
        # <tb> lines, and a few others (</tb>, </gpu>, <gpu>) looked at one by one
        new = list(filter(_IS_STEP, kinds))
        rest = list(filterfalse(_IS_STEP, kinds))
        tb_lines = list(filter(_IS_TB, rest))
        gpu_lines: list[str] = []
        for line in filterfalse(_IS_TB, rest):
            if line == _TB_END:
                kinds[line] = _CLOSE_TB
            elif line == _GPU_END:
                kinds[line] = _CLOSE_GPU
            elif line.startswith("  <gpu "):
                gpu_lines.append(line)
            else:
                return None
        tb_heads = _whole_lines(_TBS, tb_lines)
        gpu_heads = _whole_lines(_GPUS, gpu_lines)
        if tb_heads is None or gpu_heads is None:
            return None
        if new:
            first = self._add_steps(new)
            if first is None:
                return None
            kinds.update(zip(new, range(first, first + len(new))))
        # a <tb> line: -5 - 2k for the k-th distinct one; a <gpu> line: -6 - 2k
        kinds.update(zip(tb_lines, range(-5, -5 - 2 * len(tb_lines), -2)))
        kinds.update(zip(gpu_lines, range(-6, -6 - 2 * len(gpu_lines), -2)))
        found = np.fromiter(map(kinds.__getitem__, others), dtype=np.int64, count=len(others))
        if codes is None:
            codes = found
        else:
            codes[unknown] = found
        marks = np.flatnonzero(codes < 0)
        code = codes[marks]
        head = (-5 - code) >> 1            # the <tb> or <gpu> line's index (for those)
        kind = np.where(code > -5, code, np.where(code & 1, _OPEN_TB, _OPEN_GPU))
        # the nesting, on the kinds of the lines that are not steps
        if _NESTING.fullmatch((-kind).astype(np.uint8).tobytes()) is None:
            return None
        # step lines only right after a <tb> (up to its </tb>, which the nesting puts next)
        gaps = np.diff(np.append(marks, n)) - 1
        if (len(marks) and marks[0] != 0) or (n and not len(marks)) or gaps[kind != _OPEN_TB].any():
            return None
        is_tb, is_gpu = kind == _OPEN_TB, kind == _OPEN_GPU
        tbs = _int_table(tb_heads, 4)[head[is_tb]]
        gpus = _int_table(gpu_heads, 4)[head[is_gpu]]
        return Body(gpus, marks[is_gpu], np.cumsum(is_gpu)[is_tb] - 1, tbs, gaps[is_tb], codes[codes >= 0])


def _int_table(groups: list[tuple[str, ...]], width: int) -> np.ndarray:
    out = np.empty((len(groups), width), dtype=np.int64)
    for k, col in enumerate(zip(*groups)):
        out[:, k] = np.fromiter(map(int, col), dtype=np.int64, count=len(groups))
    return out


def _canonical_gpus(body: str, cache: dict[str, Step] | None = None) -> list[Gpu] | None:
    """The ``<gpu>`` elements of a body in collc's own layout, or None if it is not in it.

    A step line seen before (in this body, or in ``cache`` when the caller shares one between
    files) gives the same (immutable) Step: a schedule repeats its step lines many times over
    (7 to 15 times in Swing and ring files), and a dictionary look-up is a fraction of reading
    ten integers and building the object."""
    lines = body.split("\n")
    if lines.pop() != "":
        return None                 # the body ends with a newline (the caller cut "</algo>" off)
    if cache is None:
        return _bulk_gpus(lines)
    return _line_gpus(lines, cache)


def _bulk_gpus(lines: list[str]) -> list[Gpu] | None:
    """:func:`_canonical_gpus` of one file: one pass over the lines gives each step its
    distinct line's row (a dictionary look-up), and the distinct step lines are read all at
    once after it (:func:`_read_steps`), each one's Step made once.  MultiTree's files have
    half a million distinct step lines per million: a regular expression over their joined
    text and numpy's parse of their integers cost less than a match object per line (the
    dictionary look-ups and the Steps themselves are most of what is left)."""
    rows: dict[str, int] = {}
    known = rows.get
    distinct: list[str] = []
    new = distinct.append
    flat: list[int] = []            # each step's row, in document order
    add = flat.append
    tbs: list[tuple[int, ...]] = []     # (id, send, recv, chan, its last step's end in flat)
    gpus: list[tuple[int, ...]] = []    # (id, i_chunks, o_chunks, s_chunks, its last tb's end in tbs)
    gpu: tuple[int, ...] | None = None
    tb: tuple[int, ...] | None = None
    for line in lines:
        k = known(line)
        if k is not None:
            if tb is None:
                return None
            add(k)
        elif line.startswith(_STEP_START):
            if tb is None:
                return None
            k = rows[line] = len(distinct)
            new(line)
            add(k)
        elif line == _TB_END:
            if tb is None:
                return None
            tbs.append((*tb, len(flat)))
            tb = None
        elif line == _GPU_END:
            if gpu is None or tb is not None:
                return None
            gpus.append((*gpu, len(tbs)))
            gpu = None
        elif (m := _TB_LINE.fullmatch(line)) is not None:
            if gpu is None or tb is not None:
                return None
            tb = (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        elif (m := _GPU_LINE.fullmatch(line)) is not None:
            if gpu is not None:
                return None
            gpu = (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        else:
            return None
    if gpu is not None:
        return None
    del rows
    made = _read_steps(distinct)
    if made is None:
        return None
    del distinct
    steps = list(map(made.__getitem__, flat))
    del made, flat
    starts = [0, *(t[4] for t in tbs[:-1])]
    made_tbs = [Threadblock(t[0], t[1], t[2], t[3], tuple(steps[a:t[4]])) for t, a in zip(tbs, starts)]
    del steps
    firsts = [0, *(g[4] for g in gpus[:-1])]
    return [Gpu(g[0], g[1], g[2], g[3], tuple(made_tbs[a:g[4]])) for g, a in zip(gpus, firsts)]


# a step line with its three letters as its only groups, and bytes.translate's table that keeps a
# step line's digits and '-' (its seven integers: no name has either) as they are
_LETTERS = re.compile(re.sub(r"\((?!\?)", "(?:", _STEPS.pattern).replace(
    'type="(?:[a-z]+)" srcbuf="(?:[a-z])"', 'type="([a-z]+)" srcbuf="([a-z])"').replace(
    'dstbuf="(?:[a-z])"', 'dstbuf="([a-z])"'), re.MULTILINE)
_INTS_ONLY = bytes(c if c == ord("-") or ord("0") <= c <= ord("9") else ord(" ") for c in range(256))


def _read_steps(lines: list[str]) -> list[Step] | None:
    """The Steps of ``lines`` (distinct lines), or None if one is not a step line of collc's
    layout (what ``_STEP_LINE`` matches, with a known type).  Read ``_CHUNK`` lines at a time:
    their joined text, its bytes and their integers stay a few MiB."""
    made: list[Step] = []
    for at in range(0, len(lines), _CHUNK):
        part = lines[at:at + _CHUNK]
        text = "\n".join(part)
        letters = _LETTERS.findall(text)        # whole lines (a match cannot leave its line): every one?
        if len(letters) != len(part):
            return None
        ints = np.fromstring(text.encode().translate(_INTS_ONLY), dtype=np.int64, sep=" ")
        del text
        if len(ints) != 7 * len(part):
            return None
        ty, sb, db = (list(map(itemgetter(k), letters)) for k in range(3))
        if not set(ty) <= _STEP_TYPES.keys():
            return None
        s, so, do, cnt, di, ds, h = ints.reshape(-1, 7).T.tolist()
        made += _new_steps([s, list(map(_STEP_TYPES.__getitem__, ty)), sb, so, db, do, cnt, di, ds, h])
    return made


_CHUNK = 1 << 15


# Step's slots, written as its constructor writes them (collc.ir.records.fast_init): by ``map`` at
# C speed, a field at a time, instead of one Python call per Step (MultiTree: 10^6 of them)
_STEP_SLOTS = tuple(Step.__dict__[f.name].__set__ for f in dataclasses.fields(Step))
if hasattr(Step, "__post_init__"):
    raise TypeError("_new_steps writes Step's fields only: it would skip __post_init__")


def _new_steps(cols: list[list[Any]]) -> list[Step]:
    """Steps of the ten columns ``cols`` (Step's fields in their order)."""
    made = list(map(Step.__new__, repeat(Step, len(cols[0]))))
    for put, col in zip(_STEP_SLOTS, cols, strict=True):
        deque(map(put, made, col), maxlen=0)
    return made


def _line_gpus(lines: list[str], cache: dict[str, Step]) -> list[Gpu] | None:
    gpus: list[Gpu] = []
    steps: list[Step] = []
    gpu: tuple[int, ...] | None = None
    tbs: list[Threadblock] = []
    tb: tuple[int, ...] | None = None
    types = _STEP_TYPES
    seen = cache
    known = seen.get
    step_line, add = _STEP_LINE.fullmatch, steps.append
    for line in lines:
        st = known(line)
        if st is not None:
            if tb is None:
                return None
            add(st)
        elif line.startswith(_STEP_START):
            m = step_line(line)
            if m is None or tb is None or m[2] not in types:
                return None
            st = Step(int(m[1]), types[m[2]], m[3], int(m[4]), m[5], int(m[6]), int(m[7]), int(m[8]),
                      int(m[9]), int(m[10]))
            seen[line] = st
            add(st)
        elif line == _TB_END:
            if tb is None:
                return None
            tbs.append(Threadblock(tb[0], tb[1], tb[2], tb[3], tuple(steps)))
            tb = None
            steps.clear()
        elif line == _GPU_END:
            if gpu is None or tb is not None:
                return None
            gpus.append(Gpu(gpu[0], gpu[1], gpu[2], gpu[3], tuple(tbs)))
            gpu, tbs = None, []
        elif (m := _TB_LINE.fullmatch(line)) is not None:
            if gpu is None or tb is not None:
                return None
            tb = (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        elif (m := _GPU_LINE.fullmatch(line)) is not None:
            if gpu is not None:
                return None
            gpu = (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        else:
            return None
    return gpus if gpu is None else None


def _quiet_int(raw: str | None) -> int:
    try:
        return int(raw or "0", 10)
    except ValueError:
        return 0


# An ``<algo>`` line whose attributes lxml would read exactly as written: names without a
# namespace, values of printable ASCII without entities or '<' (nothing to decode or normalize).
_PLAIN_HEAD = re.compile(r'<algo((?: [A-Za-z_][A-Za-z0-9_.-]*="[ !#-%\'-;=-~]*")*)>\n')
_PLAIN_ATTR = re.compile(r' ([A-Za-z_][A-Za-z0-9_.-]*)="([^"]*)"')


def _plain_head(line: str) -> dict[str, str] | None:
    """The attributes of a plain ``<algo ...>`` line, or None: duplicates (lxml rejects them,
    and its message is the one to give) and ``xml...`` names (``xmlns`` is no attribute to
    lxml) are left to lxml."""
    m = _PLAIN_HEAD.fullmatch(line)
    if m is None:
        return None
    pairs = _PLAIN_ATTR.findall(m.group(1))
    attrs = dict(pairs)
    if len(attrs) != len(pairs) or any(k.lower().startswith("xml") for k in attrs):
        return None
    return attrs


def _lxml_root(text: str, path: str) -> etree._Element:
    from lxml import etree  # only for files not in collc's own layout: a tenth of the start-up

    parser = etree.XMLParser(huge_tree=True, remove_comments=True, resolve_entities=False, no_network=True)
    try:
        return etree.fromstring(text.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        raise EmitError(f"{path} is not well-formed XML: {exc}") from None


def parse_xml(text: str, path: str = "<string>", step_cache: dict[str, Step] | None = None) -> ParsedFile:
    """Read XML text (``path`` names it in messages).  ``step_cache``: a dictionary shared by the
    calls for several files of one program (a shard directory), so that a step line met in an
    earlier file is not read again (see :func:`_canonical_gpus`)."""
    with gc_paused():   # a file makes 10^5-10^6 objects and no cycle: collections find nothing
        return _parse_xml(text, path, step_cache)


def _parse_xml(text: str, path: str, step_cache: dict[str, Step] | None) -> ParsedFile:
    canon: list[Gpu] | None = None
    first = text.find("\n")
    if text.startswith("<algo ") and text.endswith("\n</algo>\n") and first > 0:
        canon = _canonical_gpus(text[first + 1:-len("</algo>\n")], step_cache)
    root = None
    if canon is not None:
        head = text[:first + 1] + "</algo>\n"   # the body obeys the lexical rules by construction
        diags = lexical_check(head)
        plain = _plain_head(text[:first + 1])
        if plain is None:
            root = _lxml_root(head, path)
    else:
        diags = lexical_check(text)
        root = _lxml_root(text, path)
    if root is not None:
        if root.tag != "algo":
            raise EmitError(f"{path}: the first element is <{root.tag}>, expected <algo>")
        attrs = {str(k): str(v) for k, v in root.attrib.items()}
    else:
        assert plain is not None
        attrs = plain
    missing: list[tuple[str, str]] = []
    proto_raw = attrs.get("proto", "Simple")
    try:
        proto = Proto(proto_raw)
    except ValueError:
        diags.append(Diagnostic("<algo>", f"proto=\"{proto_raw}\" is not Simple, LL or LL128"))
        proto = Proto.SIMPLE
    for key in ("proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace"):
        if key not in attrs:
            missing.append(("<algo>", key))

    def opt(key: str) -> int | None:
        raw_v = attrs.get(key)
        if raw_v is None:
            return None
        try:
            return int(raw_v, 10) if key in INT64_ATTRS else _i32(raw_v)
        except ValueError:
            what = "is beyond a 32-bit int" if _DECIMAL.match(raw_v) else "is not an integer"
            diags.append(Diagnostic("<algo>", f"{key}=\"{_clip(raw_v)}\" {what}"))
            return None

    gpus: list[Gpu] = canon if canon is not None else []
    for g in root.iterchildren("gpu") if root is not None else ():   # (a canonical head has none)
        gid = _int(g, "id", "<gpu>", missing, diags)
        gpath = f"gpu {gid}"
        tbs: list[Threadblock] = []
        for t in g.iterchildren("tb"):
            tid = _int(t, "id", f"{gpath} <tb>", missing, diags)
            tpath = f"{gpath} tb {tid}"
            steps: list[Step] = []
            for s in t.iterchildren("step"):
                a = s.attrib
                try:  # fast path: every attribute present and well formed, within the parser's int
                    ints = (int(a["s"]), int(a["srcoff"]), int(a["dstoff"]), int(a["cnt"]), int(a["depid"]),
                            int(a["deps"]), int(a["hasdep"]))
                    if min(ints) >= INT_MIN and max(ints) <= INT_MAX:
                        steps.append(Step(ints[0], _STEP_TYPES[a["type"]], a["srcbuf"], ints[1], a["dstbuf"],
                                          ints[2], ints[3], ints[4], ints[5], ints[6]))
                        continue
                except (KeyError, ValueError):
                    pass
                spath = f"{tpath} step {len(steps)}"
                type_raw = s.get("type")
                if type_raw is None:
                    missing.append((spath, "type"))
                    stype = StepType.NOP
                else:
                    try:
                        stype = StepType(type_raw)
                    except ValueError:
                        diags.append(Diagnostic(spath, f"unknown step type \"{type_raw}\""))
                        stype = StepType.NOP
                srcbuf, dstbuf = s.get("srcbuf"), s.get("dstbuf")
                if srcbuf is None:
                    missing.append((spath, "srcbuf"))
                if dstbuf is None:
                    missing.append((spath, "dstbuf"))
                steps.append(Step(
                    s=_int(s, "s", spath, missing, diags, len(steps)), type=stype,
                    srcbuf=srcbuf or "i", srcoff=_int(s, "srcoff", spath, missing, diags),
                    dstbuf=dstbuf or "o", dstoff=_int(s, "dstoff", spath, missing, diags),
                    cnt=_int(s, "cnt", spath, missing, diags, 1),
                    depid=_int(s, "depid", spath, missing, diags, -1),
                    deps=_int(s, "deps", spath, missing, diags, -1),
                    hasdep=_int(s, "hasdep", spath, missing, diags)))
            tbs.append(Threadblock(tid, _int(t, "send", tpath, missing, diags, -1),
                                   _int(t, "recv", tpath, missing, diags, -1),
                                   _int(t, "chan", tpath, missing, diags), tuple(steps)))
        gpus.append(Gpu(gid, _int(g, "i_chunks", gpath, missing, diags),
                        _int(g, "o_chunks", gpath, missing, diags),
                        _int(g, "s_chunks", gpath, missing, diags), tuple(tbs)))
    extra = tuple(sorted((k, v) for k, v in attrs.items() if k not in ALGO_ATTRS))
    check_program_size(_quiet_int(attrs.get("ngpus")), _quiet_int(attrs.get("nchunksperloop")),
                       sum(max(g.i_chunks, 0) + max(g.o_chunks, 0) + max(g.s_chunks, 0) for g in gpus),
                       show(path), EmitError)
    program = Program(
        name=attrs.get("name", ""), proto=proto, nchannels=opt("nchannels") or 0,
        nchunksperloop=opt("nchunksperloop") or 0, ngpus=opt("ngpus") or 0,
        coll=attrs.get("coll", ""), inplace=opt("inplace") or 0, outofplace=opt("outofplace"),
        min_bytes=opt("minBytes"), max_bytes=opt("maxBytes"), gpus=tuple(gpus), extra=extra)
    return ParsedFile(path, program, attrs, tuple(diags), tuple(missing))
