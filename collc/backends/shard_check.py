"""``collc check DIR`` of a shard directory: the per-rank files read and checked in workers.

A shard directory of N ranks is N files of one program (:mod:`collc.backends.shards`).  Each
worker reads a block of ranks straight into the columns of :class:`OpStream` (no Step
objects: a line met before is a row number in the worker's
:class:`collc.backends.msccl_xml.StepTable`, which scans 64 files' lines at a time), runs the per-gpu rules
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

import os
from dataclasses import dataclass, replace
from itertools import repeat
from pathlib import Path

import numpy as np

from collc.backends.msccl_xml import StepTable, parse_xml
from collc.backends.shards import MAX_SEEN_STEPS, rank_dirs, read_shards
from collc.check.findings import Report
from collc.check.xml.checker import check_columns, check_parsed
from collc.check.xml.executor import NeedsSteps
from collc.check.xml.opstream import OpStream, narrow
from collc.check.xml.structure import suspect_gpus, suspect_tbs
from collc.compiler.msccl.program import Gpu, ParsedFile, Program, Threadblock
from collc.errors import CollcError, EmitError
from collc.inputs import MAX_XML_BYTES, check_program_size, read_input, show
from collc.limits import LIMITS, Dialect

@dataclass(frozen=True, eq=False)
class _Block:
    """What a worker sends back for a block of ranks: numpy arrays and one string per rank."""

    clean: bool
    heads: list[str]          # per rank: its <algo> line
    gpus: np.ndarray          # per rank: (id, i_chunks, o_chunks, s_chunks)
    tbs: np.ndarray           # per tb: (gpu, id, send, recv, chan)
    nsteps: np.ndarray        # per tb
    cols: list[np.ndarray]    # the ten per-step columns (opstream.COLUMNS), narrowed
    # read in the parent as the only block: the gpus without their steps and the OpStream that
    # its checks made, which the whole-program check would make again
    kept: tuple[tuple[Gpu, ...], OpStream] | None = None


_UNCLEAN = _Block(False, [], np.zeros((0, 4), dtype=np.int64), np.zeros((0, 5), dtype=np.int64),
                  np.zeros(0, dtype=np.int64), [])


_TABLE: StepTable | None = None
_HEADS: dict[str, ParsedFile] = {}
#: files whose lines one :meth:`StepTable.scan` reads (a few MiB of text at a time)
_CHUNK = 64


def _only_file(d: Path) -> Path | None:
    """The one file of a rank's directory (following links, as ``Path.is_file``), or None."""
    try:
        with os.scandir(d) as it:
            files = [Path(e.path) for e in it if e.is_file()]
    except OSError:
        return None
    return files[0] if len(files) == 1 else None


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


def read_block(root: Path, ranks: list[tuple[int, Path]], dialect: Dialect, keep: bool = False) -> _Block:
    """Read and check the per-rank files of ``ranks`` (rank, its directory) into columns
    (``keep``: with :attr:`_Block.kept`)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = StepTable()
    table = _TABLE
    if len(table.rows) > MAX_SEEN_STEPS:        # forget every line (memory at thousands of ranks)
        table.clear()
    got = _read(ranks, table)
    if got is None:
        table.clear()           # lines of a file that is not in collc's layout may be in it
        return _UNCLEAN
    heads, program, gpus, tb_rows, counts, rows = got
    per_gpu = np.concatenate(gpus) if gpus else np.zeros((0, 5), dtype=np.int64)
    gpu_arr = per_gpu[:, :4]
    head_arr = np.concatenate(tb_rows) if tb_rows else np.zeros((0, 5), dtype=np.int64)
    nsteps = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    cols = [col[idx] for col in narrow(list(table.values().T))]
    if program is not None:
        ops = OpStream.of_columns(head_arr, nsteps, cols)
        hollow = _hollow(per_gpu, head_arr)
        block = replace(program, gpus=hollow)
        # the per-gpu rules (check_gpu) and the per-step ones, over the arrays: a gpu they flag
        # may have a finding, which the objects then explain
        suspect = suspect_tbs(block, ops, LIMITS[dialect])
        if suspect is None or suspect.any() or suspect_gpus(block, ops, dialect, 1).any():
            return _UNCLEAN
        return _Block(True, heads, np.ascontiguousarray(gpu_arr), head_arr, nsteps, cols,
                      (hollow, ops) if keep else None)
    return _Block(True, heads, np.ascontiguousarray(gpu_arr), head_arr, nsteps, cols)


def _hollow(per_gpu: np.ndarray, tbs: np.ndarray) -> tuple[Gpu, ...]:
    """The gpus of (id, i_chunks, o_chunks, s_chunks, number of tbs) rows, with their tbs of
    (gpu, id, send, recv, chan) rows, without steps."""
    made = list(map(Threadblock, *tbs[:, 1:].T.tolist(), repeat(()))) if len(tbs) else []
    ends = np.cumsum(per_gpu[:, 4]).tolist()
    return tuple(Gpu(g[0], g[1], g[2], g[3], tuple(made[end - g[4]:end])) for g, end in zip(per_gpu.tolist(), ends))


_Read = tuple[list[str], Program | None, list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]]


def _read(ranks: list[tuple[int, Path]], table: StepTable) -> _Read | None:
    """The ranks' files in collc's layout, ``_CHUNK`` at a time: their ``<algo>`` lines, the
    program of the last, and per chunk the gpus' (id, i, o, s, number of tbs) rows, the tbs' (gpu, id, send,
    recv, chan) rows, their step counts and the steps' rows in ``table``; None for anything else
    (one ``<gpu>``, of its rank, per file; a clean header; the program size limits)."""
    heads: list[str] = []
    program: Program | None = None
    gpus: list[np.ndarray] = []
    tbs: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    for lo in range(0, len(ranks), _CHUNK):
        chunk = ranks[lo:lo + _CHUNK]
        lines: list[str] = []
        starts: list[int] = []
        programs: list[Program] = []
        for rank, d in chunk:
            file = _only_file(d)
            if file is None:
                return None
            try:
                text = read_input(file, MAX_XML_BYTES, EmitError).decode("utf-8")
            except (CollcError, UnicodeDecodeError):
                return None
            first = text.find("\n")
            if not (text.startswith("<algo ") and text.endswith("\n</algo>\n") and first > 0):
                return None
            head = _head(text[:first + 1], f"rank-{rank}/{file.name}")
            if head is None:
                return None
            program = head.program
            programs.append(program)
            heads.append(text[:first + 1])
            starts.append(len(lines))
            # the lines between the <algo> line and "</algo>" (the text ends "\n</algo>\n")
            lines += text.split("\n")[1:-2]
        body = table.scan(lines)
        if body is None or body.gpu_at.tolist() != starts:
            return None         # not one <gpu> at the top of each file
        if (body.gpus[:, 0] != [rank for rank, _ in chunk]).any():
            return None
        for p, size in zip(programs, np.maximum(body.gpus[:, 1:], 0).sum(axis=1).tolist()):
            try:
                check_program_size(p.ngpus, p.nchunksperloop, size, "", EmitError)
            except CollcError:
                return None
        gpus.append(np.column_stack([body.gpus, np.bincount(body.tb_gpu, minlength=len(chunk))]))
        tbs.append(np.column_stack([body.gpus[body.tb_gpu, 0], body.tbs]).reshape(-1, 5))
        counts.append(body.nsteps)
        rows.append(body.rows)
    return heads, program, gpus, tbs, counts, rows


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
            blocks.append(read_block(*task, keep=len(tasks) == 1))
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
    kept = blocks[0].kept if len(blocks) == 1 else None
    if kept is not None:
        gpus = blocks[0].gpus
        blocks.clear()
        check_program_size(head.program.ngpus, head.program.nchunksperloop,
                           int(np.maximum(gpus[:, 1:], 0).sum()), show(top), EmitError)
        return _check_columns(top, replace(head.program, gpus=kept[0]), kept[1], head, dialect, root, data_check)
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
    per_gpu = np.bincount(np.searchsorted(gpus[:, 0], tbs[:, 0]), minlength=len(gpus))
    hollow = _hollow(np.column_stack([gpus, per_gpu]), tbs)
    return _check_columns(top, replace(head.program, gpus=hollow), ops, head, dialect, root, data_check)


def _check_columns(top: Path, program: Program, ops: OpStream, head: ParsedFile, dialect: Dialect,
                   root: int | None, data_check: str) -> Report | None:
    try:
        return check_columns(program, ops, dialect, path=str(top), attrs=head.attrs, root=root,
                             data_check=data_check)
    except NeedsSteps:
        return None
