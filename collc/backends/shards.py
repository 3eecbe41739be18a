"""Per-rank shards: one XML per rank, for programs beyond the parser's 1024 ``<gpu>`` limit.

The runtimes' parser keeps the children of ``<algo>`` in a fixed array of 1024 and
only reads the ``<gpu>`` whose id is the local rank; the metadata pass reads only
the ``<algo>`` start tag (docs/runtime-model.md).  So a file that
carries the full header (with the real ``ngpus``) and only the local rank's
``<gpu>`` loads, and one such file per rank lifts the ceiling.

Layout written by ``write_shards(program, dialect, out)``::

    out/rank-0/<name>.xml ... out/rank-<N-1>/<name>.xml
    out/run-with-msccl.sh    # sets MSCCL_ALGO_DIR (or MSCCL_XML_FILES) for this rank, then execs

Each ``rank-K`` directory holds only its XML, because the runtimes parse every
file of ``MSCCL_ALGO_DIR``.  ``read_shards(out)`` assembles the set back into one
``ParsedFile`` so that ``collc check`` checks it as one program.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from collc.backends.msccl_xml import gpu_text, join_xml, parse_xml
from collc.compiler.msccl.program import Diagnostic, ParsedFile
from collc.limits import Dialect
from collc.compiler.msccl.program import Gpu, Program, Step
from collc.errors import EmitError, UsageError
from collc.memory import gc_paused
from collc.inputs import MAX_RANKS, MAX_XML_BYTES, check_program_size, output_dir, read_input, show
from collc.outputs import discard, new_temp_dir, publish_dir, write_file, write_into

WRAPPER = "run-with-msccl.sh"
_RANK_DIR = re.compile(r"rank-(\d+)\Z")
#: Distinct step lines :func:`read_shards` keeps between files (about 200 bytes each).
MAX_SEEN_STEPS = 1 << 18


def parse_shard(text: str, name: str, seen: dict[str, Step]) -> ParsedFile:
    """Parse one shard's text, sharing one Step per distinct step line with the other shards
    read through ``seen`` (bounded: memory and time at thousands of ranks)."""
    part = parse_xml(text, name, seen)
    if len(seen) > MAX_SEEN_STEPS:
        seen.clear()
    return part


def parse_texts(texts: Iterable[tuple[str, str]]) -> Iterator[ParsedFile]:
    """:func:`parse_shard` over ``(name, text)`` pairs, one at a time, with one shared dictionary."""
    seen: dict[str, Step] = {}
    return (parse_shard(text, name, seen) for name, text in texts)


def wrapper_script(dialect: Dialect, filename: str) -> str:
    if dialect is Dialect.LEGACY:
        export = (f'export MSCCL_XML_FILES="$here/rank-$rank/{filename}"\n'
                  'export NCCL_ALGO="${NCCL_ALGO:-MSCCL,RING,TREE}"\n')
    else:
        export = 'export MSCCL_ALGO_DIR="$here/rank-$rank"\n'
    return ("#!/bin/sh\n"
            "# Written by collc: point this process at its own rank's MSCCL schedule, then run the command.\n"
            "# Usage: mpirun -np N ./run-with-msccl.sh ./all_reduce_perf -g 1 ...\n"
            "#        torchrun --no-python --nproc_per_node=8 ... ./run-with-msccl.sh python train.py\n"
            'here=$(cd "$(dirname "$0")" && pwd)\n'
            "rank=${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-${PMI_RANK:-${RANK:-}}}}\n"
            'if [ -z "$rank" ]; then\n'
            '  echo "run-with-msccl.sh: no rank variable set (OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK, RANK)" >&2\n'
            "  exit 2\n"
            "fi\n"
            'if [ ! -d "$here/rank-$rank" ]; then\n'
            '  echo "run-with-msccl.sh: no schedule for rank $rank in $here" >&2\n'
            "  exit 2\n"
            "fi\n"
            f"{export}"
            'exec "$@"\n')


def shard_texts(program: Program, dialect: Dialect) -> dict[int, str]:
    return {g.id: join_xml(program, dialect, [gpu_text(g)]) for g in program.gpus}


def write_shards(texts: dict[int, str], dialect: Dialect, out: str | os.PathLike[str], filename: str) -> None:
    """Write all shards into a fresh hidden directory next to ``out``, then move it into place.

    ``out`` must not exist, be empty, or be an earlier shard directory (which is replaced).
    The partial directory is removed on any error and on SIGINT/SIGTERM (``collc.outputs``).
    """
    tmp = stage_shards(out)
    try:
        for rank, text in texts.items():
            d = tmp / f"rank-{rank}"
            d.mkdir(0o777)
            write_into(d, filename, text)
    except BaseException:
        discard(tmp)
        raise
    publish_shards(tmp, dialect, out, filename)


def stage_shards(out: str | os.PathLike[str]) -> Path:
    """The pending hidden directory next to ``out`` that a shard set is written into (``out``
    must not exist, be empty, or be an earlier shard directory); :func:`publish_shards` moves it
    into place, ``collc.outputs.discard`` (or an interrupt) removes it."""
    target = output_dir(out)
    if target.is_dir() and any(target.iterdir()) and not (target / WRAPPER).exists():
        raise EmitError(f"{show(target)} is a non-empty directory that collc did not write; choose another -o")
    return new_temp_dir(target)


def publish_shards(tmp: Path, dialect: Dialect, out: str | os.PathLike[str], filename: str) -> None:
    """Add the wrapper to the staged ``rank-K`` directories in ``tmp`` and replace ``out`` with it
    (``tmp`` is removed on any error)."""
    try:
        write_into(tmp, WRAPPER, wrapper_script(dialect, filename), executable=True)
    except BaseException:
        discard(tmp)
        raise
    publish_dir(tmp, output_dir(out), replace=True)


def write_rank_shards(texts: dict[int, str], dialect: Dialect, out: str | os.PathLike[str], filename: str) -> None:
    """Add (or replace) the given ranks' ``rank-K`` directories in ``out`` and write the wrapper.

    For ``collc build --ranks A-B``: every node of a job writes its own ranks into one shared
    directory, so nothing else of ``out`` is touched; each ``rank-K`` appears at once (built in
    a hidden directory, then renamed), and the wrapper is the same text from every node.
    """
    target = output_dir(out)
    if target.is_dir() and any(not (p.name == WRAPPER or p.name.startswith(".") or _RANK_DIR.match(p.name))
                               for p in target.iterdir()):
        raise EmitError(f"{show(target)} holds files other than collc's rank-<K> directories; choose another -o")
    target.mkdir(parents=True, exist_ok=True)
    for rank, text in texts.items():
        dest = target / f"rank-{rank}"
        tmp = new_temp_dir(dest)
        try:
            write_into(tmp, filename, text)
        except BaseException:
            discard(tmp)
            raise
        publish_dir(tmp, dest, replace=True)
    write_file(target / WRAPPER, wrapper_script(dialect, filename), executable=True)


#: The launchers' (task id, task count) variables, in the order ``--ranks auto`` reads them.
TASK_VARIABLES = (("SLURM_PROCID", "SLURM_NTASKS"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("PMI_RANK", "PMI_SIZE"))


def task_ranks(nranks: int, environ: Mapping[str, str]) -> range:
    """``--ranks auto``: this task's share of ``nranks`` from the launcher's task id and count
    (srun's ``SLURM_PROCID``/``SLURM_NTASKS``, Open MPI's ``OMPI_COMM_WORLD_RANK``/``_SIZE``,
    ``PMI_RANK``/``PMI_SIZE``): task i of T writes ranks ``i*N//T .. (i+1)*N//T - 1``, so the
    tasks' ranges cover 0..N-1 once, in blocks that differ by at most one rank
    (docs/building.md, "Each node builds its own shards")."""
    for id_var, count_var in TASK_VARIABLES:
        if id_var in environ or count_var in environ:
            break
    else:
        raise UsageError("--ranks auto: no task id in the environment (SLURM_PROCID/SLURM_NTASKS, "
                         "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE or PMI_RANK/PMI_SIZE); run it under srun or "
                         "mpirun, or give --ranks A-B")
    values = []
    for var in (id_var, count_var):
        text = environ.get(var, "")
        if not re.fullmatch(r"\d{1,9}", text.strip()):
            raise UsageError(f"--ranks auto: {var}={text[:40]!r} is not a whole number")
        values.append(int(text))
    task, ntasks = values
    if ntasks < 1 or task >= ntasks:
        raise UsageError(f"--ranks auto: task {id_var}={task} is not below {count_var}={ntasks}")
    if ntasks > nranks:
        raise UsageError(f"--ranks auto: {count_var}={ntasks} tasks for {nranks} ranks; run at most one task "
                         f"per rank")
    return range(task * nranks // ntasks, (task + 1) * nranks // ntasks)


def is_shard_dir(path: Path) -> bool:
    return path.is_dir() and any(_RANK_DIR.match(p.name) for p in path.iterdir() if p.is_dir())


def rank_dirs(root: Path) -> list[tuple[int, Path]]:
    """The ``rank-K`` directories of a shard directory as (K, path), by K; at least one, at
    most ``MAX_RANKS``."""
    found = sorted((int(m.group(1)), p) for p in root.iterdir() if p.is_dir()
                   for m in [_RANK_DIR.match(p.name)] if m)
    if not found:
        raise EmitError(f"{show(root)}: no rank-<K> directories")
    if len(found) > MAX_RANKS:
        raise EmitError(f"{show(root)}: {len(found)} rank directories, more than the {MAX_RANKS} ranks "
                        f"collc handles")
    return found


def read_shards(path: str | os.PathLike[str]) -> ParsedFile:
    """Read a shard directory and assemble it into one program; problems become diagnostics."""
    root = Path(path)
    parts: list[ParsedFile] = []
    extra: list[Diagnostic] = []
    seen: dict[str, Step] = {}      # step lines already read: ranks repeat each other's lines
    with gc_paused():   # one pause for all files: a collection between two would rescan the earlier ones
        for rank, d in rank_dirs(root):
            files = sorted(p for p in d.iterdir() if p.is_file())
            if len(files) != 1:
                extra.append(Diagnostic(f"rank-{rank}", f"holds {len(files)} files; the runtime parses every file "
                                                        f"of MSCCL_ALGO_DIR, so keep exactly one XML there"))
                if not files:
                    continue
            try:
                text = read_input(files[0], MAX_XML_BYTES, EmitError).decode("utf-8")
            except UnicodeDecodeError:
                raise EmitError(f"{show(files[0])} is not a text file") from None
            part = parse_shard(text, f"rank-{rank}/{files[0].name}", seen)
            if [g.id for g in part.program.gpus] != [rank]:
                extra.append(Diagnostic(f"rank-{rank}", f"holds <gpu> ids {[g.id for g in part.program.gpus][:8]}, "
                                                        f"expected exactly [{rank}]"))
            parts.append(part)
    whole = assemble(parts, str(root))
    check_program_size(whole.program.ngpus, whole.program.nchunksperloop,
                       sum(max(g.i_chunks, 0) + max(g.o_chunks, 0) + max(g.s_chunks, 0) for g in whole.program.gpus),
                       show(root), EmitError)
    return replace(whole, diagnostics=whole.diagnostics + tuple(extra))


def assemble(parts: Iterable[ParsedFile], path: str = "<shards>") -> ParsedFile:
    """One program from per-rank files: headers must agree; each file's gpus are kept."""
    diags: list[Diagnostic] = []
    missing: list[tuple[str, str]] = []
    gpus: list[Gpu] = []
    first: ParsedFile | None = None
    for part in parts:
        diags.extend(Diagnostic(f"{part.path} {x.where}", x.message, x.kind) for x in part.diagnostics)
        missing.extend((w, a) for w, a in part.missing if w != "<algo>" or first is None)
        if first is None:
            first = part
        elif part.attrs != first.attrs:
            diags.append(Diagnostic(part.path, f"its <algo> header differs from {first.path}'s; every shard "
                                               f"must carry the same header"))
        gpus.extend(part.program.gpus)
    if first is None:
        raise EmitError(f"{path}: no shard files")
    program = replace(first.program, gpus=tuple(sorted(gpus, key=lambda g: g.id)))
    return ParsedFile(path, program, first.attrs, tuple(diags), tuple(missing))
