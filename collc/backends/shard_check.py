"""``collc check DIR`` of a shard directory: the per-rank files read and checked in workers.

A shard directory of N ranks is N files of one program (:mod:`collc.backends.shards`).  Each
worker reads a block of ranks straight into the columns of :class:`OpStream` (no Step
objects: a line met before is a row number in the worker's table), runs the per-gpu rules
on its block over the arrays (:func:`collc.check.xml.structure.suspect_gpus` for those of
:func:`collc.check.xml.structure.check_gpu`, :func:`collc.check.xml.structure.suspect_tbs`
for the per-step ones), and sends back numpy arrays,
which pickle as raw buffers.  The parent joins them and runs the whole-program rules and the
simulation over the arrays (:func:`collc.check.xml.checker.check_columns`).

Only a directory that is clean as far as a worker can tell goes this way: every file in
collc's own layout with no reader diagnostic, one ``<gpu>`` of its rank, the same ``<algo>``
line everywhere, nothing flagged by the per-gpu rules.  Anything else (and any run the
kernel does not pass) is read again as objects and checked by
:func:`collc.check.xml.checker.check_program`, so the findings, their order and the
verdict are the same for any number of workers (docs/building.md, "Checking a shard
directory").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import repeat
from pathlib import Path

import numpy as np

from collc.backends.msccl_xml import _GPU_LINE, _STEP_LINE, _STEP_START, _STEP_TYPES, _TB_LINE, parse_xml
from collc.backends.shards import MAX_SEEN_STEPS, rank_dirs, read_shards
from collc.check.findings import Report
from collc.check.xml.checker import check_columns, check_parsed
from collc.check.xml.executor import NeedsSteps
from collc.check.xml.opstream import BAD_BUFFER, BUFFERS, TYPES, OpStream, narrow
from collc.check.xml.structure import suspect_gpus, suspect_tbs
from collc.compiler.msccl.program import Gpu, ParsedFile, Program, Threadblock
from collc.errors import CollcError, EmitError
from collc.inputs import MAX_XML_BYTES, check_program_size, read_input, show
from collc.limits import LIMITS, Dialect

_CODE = {t.value: TYPES.index(t) for t in TYPES}
_BUF = {b: i for i, b in enumerate(BUFFERS)}
_I64 = np.iinfo(np.int64)


@dataclass(frozen=True, eq=False)
class _Block:
    """What a worker sends back for a block of ranks: numpy arrays and one string per rank."""

    clean: bool
    heads: list[str]          # per rank: its <algo> line
    gpus: np.ndarray          # per rank: (id, i_chunks, o_chunks, s_chunks)
    tbs: np.ndarray           # per tb: (gpu, id, send, recv, chan)
    nsteps: np.ndarray        # per tb
    cols: list[np.ndarray]    # the ten per-step columns (opstream.COLUMNS), narrowed


_UNCLEAN = _Block(False, [], np.zeros((0, 4), dtype=np.int64), np.zeros((0, 5), dtype=np.int64),
                  np.zeros(0, dtype=np.int64), [])


class _Table:
    """A worker's distinct step lines: line -> row, and the rows as int64 columns."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.pending: list[tuple[int, ...]] = []
        self.array = np.zeros((1024, 10), dtype=np.int64)
        self.n = 0

    def add(self, line: str) -> int | None:
        known = self.rows.get(line)       # met earlier in the same file
        if known is not None:
            return known
        m = _STEP_LINE.fullmatch(line)
        if m is None or m[2] not in _STEP_TYPES:
            return None
        values = (_CODE[m[2]], int(m[1]), _BUF.get(m[3], BAD_BUFFER), int(m[4]), _BUF.get(m[5], BAD_BUFFER),
                  int(m[6]), int(m[7]), int(m[8]), int(m[9]), int(m[10]))
        if max(values) > _I64.max or min(values) < _I64.min:
            return None                 # beyond the columns: the objects' reader decides
        row = len(self.rows)
        self.rows[line] = row
        self.pending.append(values)
        return row

    def flush(self) -> np.ndarray:
        if self.pending:
            new = np.array(self.pending, dtype=np.int64).reshape(-1, 10)
            if self.n + len(new) > len(self.array):
                grown = np.zeros((max(2 * len(self.array), self.n + len(new)), 10), dtype=np.int64)
                grown[:self.n] = self.array[:self.n]
                self.array = grown
            self.array[self.n:self.n + len(new)] = new
            self.n += len(new)
            self.pending.clear()
        return self.array[:self.n]

    def bound(self) -> None:
        """Forget every line once there are too many (memory at thousands of ranks)."""
        if len(self.rows) > MAX_SEEN_STEPS:
            self.rows.clear()
            self.n = 0


_TABLE: _Table | None = None
_HEADS: dict[str, ParsedFile] = {}


def _body(body: str, table: _Table, rows: list[np.ndarray]) -> tuple[tuple[int, ...], list[tuple[int, ...]]] | None:
    """The one ``<gpu>`` of a body in collc's layout as (id, i, o, s) and its tbs as (id, send,
    recv, chan, steps), the rows of its step lines appended to ``rows``; None for anything
    else (the layout rules of :func:`collc.backends.msccl_xml._canonical_gpus`).

    Every line is looked up in the table at C speed (``map``); only the lines it does not know
    (the gpu and tb lines, step lines met for the first time) go through Python."""
    lines = body.split("\n")
    if lines.pop() != "":
        return None
    found = np.fromiter(map(table.rows.get, lines, repeat(-1)), dtype=np.int64, count=len(lines))
    gpu: tuple[int, ...] | None = None
    done: tuple[int, ...] | None = None
    tbs: list[tuple[int, ...]] = []
    spans: list[tuple[int, int]] = []
    tb: tuple[int, ...] | None = None
    opened = 0
    for i in np.flatnonzero(found < 0).tolist():
        line = lines[i]
        if line.startswith(_STEP_START):
            row = table.add(line)
            if row is None or tb is None:
                return None
            found[i] = row
        elif line == "    </tb>":
            if tb is None:
                return None
            tbs.append((*tb, i - opened - 1))
            spans.append((opened + 1, i))
            tb = None
        elif tb is not None:        # only step lines inside a tb
            return None
        elif line == "  </gpu>":
            if gpu is None or done is not None:
                return None
            done, gpu = gpu, None
        elif (m := _TB_LINE.fullmatch(line)) is not None:
            if gpu is None:
                return None
            tb, opened = (int(m[1]), int(m[2]), int(m[3]), int(m[4])), i
        elif (m := _GPU_LINE.fullmatch(line)) is not None:
            if gpu is not None or done is not None:
                return None
            gpu = (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        else:
            return None
    if gpu is not None or done is None or tb is not None:
        return None
    # a known step line outside every tb: the tbs' lines are not all the step lines
    if sum(b - a for a, b in spans) != int(np.count_nonzero(found >= 0)):
        return None
    rows.extend(found[a:b] for a, b in spans)
    return done, tbs


def _head(line: str, name: str) -> ParsedFile | None:
    hit = _HEADS.get(line)
    if hit is None:
        try:
            hit = parse_xml(line + "</algo>\n", name)
        except CollcError:
            return None
        if len(_HEADS) < 64:
            _HEADS[line] = hit
    return None if hit.diagnostics or hit.missing else hit


def read_block(root: Path, ranks: list[tuple[int, Path]], dialect: Dialect) -> _Block:
    """Read and check the per-rank files of ``ranks`` (rank, its directory) into columns."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _Table()
    table = _TABLE
    table.bound()
    heads: list[str] = []
    gpus: list[tuple[int, ...]] = []
    tbs: list[tuple[int, ...]] = []
    counts: list[int] = []
    rows: list[np.ndarray] = []
    hollow: list[Gpu] = []
    program: Program | None = None
    for rank, d in ranks:
        files = sorted(p for p in d.iterdir() if p.is_file())
        if len(files) != 1:
            return _UNCLEAN
        try:
            text = read_input(files[0], MAX_XML_BYTES, EmitError).decode("utf-8")
        except (CollcError, UnicodeDecodeError):
            return _UNCLEAN
        first = text.find("\n")
        if not (text.startswith("<algo ") and text.endswith("\n</algo>\n") and first > 0):
            return _UNCLEAN
        head = _head(text[:first + 1], f"rank-{rank}/{files[0].name}")
        got = _body(text[first + 1:-len("</algo>\n")], table, rows)
        if head is None or got is None or got[0][0] != rank:
            return _UNCLEAN
        (gid, i_chunks, o_chunks, s_chunks), gtbs = got
        program = head.program
        try:
            check_program_size(program.ngpus, program.nchunksperloop, max(i_chunks, 0) + max(o_chunks, 0) +
                               max(s_chunks, 0), "", EmitError)
        except CollcError:
            return _UNCLEAN
        heads.append(text[:first + 1])
        gpus.append((gid, i_chunks, o_chunks, s_chunks))
        tbs.extend((gid, *t[:4]) for t in gtbs)
        counts.extend(t[4] for t in gtbs)
        hollow.append(Gpu(gid, i_chunks, o_chunks, s_chunks, tuple(Threadblock(t[0], t[1], t[2], t[3], ()) for t in gtbs)))
    ntb = len(tbs)
    head_arr = np.array(tbs, dtype=np.int64).reshape(ntb, 5)
    nsteps = np.array(counts, dtype=np.int64)
    idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    cols = [col[idx] for col in narrow([c for c in table.flush().T])]
    if program is not None:
        ops = OpStream.of_columns(head_arr, nsteps, cols)
        block = replace(program, gpus=tuple(hollow))
        # the per-gpu rules (check_gpu) and the per-step ones, over the arrays: a gpu they flag
        # may have a finding, which the objects then explain
        suspect = suspect_tbs(block, ops, LIMITS[dialect])
        if suspect is None or suspect.any() or suspect_gpus(block, ops, dialect, 1).any():
            return _UNCLEAN
    return _Block(True, heads, np.array(gpus, dtype=np.int64).reshape(-1, 4), head_arr, nsteps, cols)


def _read_block_task(task: tuple[Path, list[tuple[int, Path]], Dialect]) -> _Block:
    return read_block(*task)


def check_shard_dir(path: str | Path, dialect: Dialect, root: int | None = None, data_check: str = "auto",
                    jobs: int = 1) -> Report:
    """The report :func:`check_parsed` gives for ``read_shards(path)``, with the files read and
    their per-gpu rules run in ``jobs`` worker processes (1: in this process)."""
    from collc.compiler.pipeline import _worker_signals, workers

    top = Path(path)
    dirs = rank_dirs(top)
    n = len(dirs)
    jobs = workers(jobs, n)
    size = max(1, -(-n // (jobs * 8))) if jobs > 1 else max(1, n)
    tasks = [(top, dirs[lo:lo + size], dialect) for lo in range(0, n, size)]
    blocks: list[_Block] = []
    if jobs == 1:
        for task in tasks:
            blocks.append(_read_block_task(task))
            if not blocks[-1].clean:
                break
    else:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_signals) as pool:
            # every block, then close and join: leaving the pool (terminate) while a worker still
            # reads its task queue can deadlock on the queue's lock
            blocks = list(pool.imap(_read_block_task, tasks))
            pool.close()
            pool.join()
    distinct = len({rank for rank, _ in dirs}) == n      # rank-1 and rank-01 would be one rank twice
    if distinct and all(b.clean for b in blocks) and len({h for b in blocks for h in b.heads}) == 1:
        report = _check_blocks(top, blocks, dialect, root, data_check)
        if report is not None:
            return report
    return check_parsed(read_shards(top), dialect, root=root, sharded=True, data_check=data_check)


def _check_blocks(top: Path, blocks: list[_Block], dialect: Dialect,
                  root: int | None, data_check: str) -> Report | None:
    head = parse_xml(blocks[0].heads[0] + "</algo>\n", str(top))
    gpus = np.concatenate([b.gpus for b in blocks])
    tbs = np.concatenate([b.tbs for b in blocks])
    nsteps = np.concatenate([b.nsteps for b in blocks])
    joined: list[np.ndarray] = []
    for k in range(10):         # a column at a time, each block's part dropped once joined (peak memory)
        joined.append(np.concatenate([b.cols[k] for b in blocks]))
        for b in blocks:
            b.cols[k] = joined[-1][:0]
    cols = narrow(joined)
    del joined
    blocks.clear()              # the caller's list too
    check_program_size(head.program.ngpus, head.program.nchunksperloop,
                       int(np.maximum(gpus[:, 1:], 0).sum()), show(top), EmitError)
    ops = OpStream.of_columns(tbs, nsteps, cols)
    start = np.zeros(len(gpus) + 1, dtype=np.int64)
    np.cumsum(np.bincount(np.searchsorted(gpus[:, 0], tbs[:, 0]), minlength=len(gpus)), out=start[1:])
    heads = tbs.tolist()
    hollow = tuple(Gpu(g[0], g[1], g[2], g[3], tuple(Threadblock(t[1], t[2], t[3], t[4], ())
                                                     for t in heads[start[k]:start[k + 1]]))
                   for k, g in enumerate(gpus.tolist()))
    program = replace(head.program, gpus=hollow)
    try:
        return check_columns(program, ops, dialect, path=str(top), attrs=head.attrs, root=root,
                             data_check=data_check)
    except NeedsSteps:
        return None
