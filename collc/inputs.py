"""Limits on input, checked before any work starts (docs/limits.md).

Every command calls these plain functions on what it is given (numbers, sizes,
topology files, XML files, output paths) so that bad or absurd input fails at
once with one line naming the problem, instead of exhausting memory, blocking on
a FIFO or ending in a traceback after minutes of work.  Each limit is derived
from what the MSCCL runtimes accept (docs: docs/limits.md) or from
memory; each check raises :class:`collc.errors.UsageError` (or the error class
of the file kind it reads).

A new command uses them like the others: ``read_input(path, limit, Error, label)``
for any file it reads (then ``load_json``/``load_yaml`` for structured text),
``output_file``/``output_dir``/``plot_file`` on ``-o``-like paths before its work
starts, ``bounded_int``/``check_bytes``/``finite`` on numbers, and
:mod:`collc.outputs` (``write_file``, ``new_temp_dir`` + ``publish_dir``) to write.

>>> bounded_int(4, "--chunks", 1, MAX_CHUNKS)
4
>>> check_bytes(1 << 63, "--max-bytes")
Traceback (most recent call last):
 ...
collc.errors.UsageError: --max-bytes 9223372036854775808 is beyond int64 (at most 9223372036854775807): \
the runtime reads minBytes/maxBytes as 64-bit integers
>>> one_line("bad\\nname\\x00")
'bad\\\\nname\\\\x00'
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from collc.errors import CollcError, UsageError

__all__ = ["MAX_RANKS", "MAX_BUILD_RANKS", "MAX_SLOTS", "MAX_CHUNKS", "INT64_MAX", "MAX_XML_BYTES",
           "MAX_TOPOLOGY_BYTES", "MAX_NESTING", "MAX_YAML_NODES", "MAX_MESSAGE", "MAX_SPEC_CHARS", "MAX_SIZES",
           "MAX_CANDIDATES", "MAX_MODEL_VALUE", "MIN_LINK_BW", "PLOT_FORMATS", "one_line", "show", "bounded_int",
           "check_build_ranks", "check_bytes", "finite", "check_spec_text", "check_program_size", "input_file",
           "read_input", "load_json", "load_yaml", "output_file", "output_dir", "plot_file"]

#: Ranks of any topology (spec, file) or XML ``ngpus``: the generators' bound, and at this size the
#: rank x chunk state of a check (below) is already at its budget.
MAX_RANKS = 1 << 16
#: Ranks ``build`` accepts: every rank holds at most 4095 XML nodes, so schedules grow with the ranks;
#: a 4096-rank Swing build takes 3.6 GB here, so 16384 ranks is about what a 32 GB machine holds.
MAX_BUILD_RANKS = 1 << 14
#: Rank x chunk slots of one program (ngpus x nchunksperloop, and the sum of every rank's i/o/s
#: buffers): the numeric data check keeps 64-bit values per slot, 2^28 slots = 2 GiB.
MAX_SLOTS = 1 << 28
#: ``--chunks``: the pieces of one chunk need distinct offsets, which the runtime stores as int16.
MAX_CHUNKS = 1 << 15
#: ``minBytes``/``maxBytes`` and message sizes are 64-bit integers in the runtime.
INT64_MAX = (1 << 63) - 1
#: An XML file the runtime can load has at most 1024 ``<gpu>`` of at most 4095 nodes each: at
#: about 128 bytes a line (collc's step lines are 120-130) that is 512 MiB.
MAX_XML_BYTES = 1 << 29
#: A topology file: 64 MiB is half a million links in the JSON that ``topology show --json`` prints.
MAX_TOPOLOGY_BYTES = 1 << 26
#: Nesting of a YAML/JSON topology file (the format itself needs 3 levels).
#: A test log (nccl-tests / rccl-tests output, INFO lines included) or a tuner CSV.
MAX_LOG_BYTES = 1 << 28
#: Characters of one log line that the parser reads (a longer line, never printed by nccl-tests or
#: NCCL, is cut here, which keeps every pattern's work linear in the file's size).
MAX_LOG_LINE = 1 << 16
MAX_NESTING = 32
#: Values of a YAML file after its aliases are expanded (a 64 MiB file holds fewer than this).
MAX_YAML_NODES = 1 << 24
#: Characters of one error message (the rest is replaced by an ellipsis).
MAX_MESSAGE = 300
#: Characters of a topology spec string (no family needs more; bounds integer parsing too).
MAX_SPEC_CHARS = 1024
#: Message sizes of one ``--sizes`` list (1 B .. 8 EiB in powers of two is 64).
MAX_SIZES = 64
#: Candidates of one ``compare`` or ``tune`` (each is a full build).
MAX_CANDIDATES = 256
#: Model parameters (us per message or hop, us per byte, GB/s): far beyond any machine, and small
#: enough that predicted times stay finite (JSON has no infinity).
MAX_MODEL_VALUE = 1e9
MIN_LINK_BW = 1e-9
#: Image formats ``--plot`` writes (by file extension).
PLOT_FORMATS = ("png", "pdf", "svg")

# MSCCL++ execution plans (JSON).  The largest real plans (MSCCL++'s own test and DSL plans) have 16
# GPUs, 32 threadblocks per GPU, 20 ops per threadblock and 544 ops in all; collc's 256-rank
# recursive-halving-doubling allreduce has 8 threadblocks per GPU, 25 ops per threadblock, 46592 ops.
#: A plan file: the biggest real plans are ~100 KB, collc's 256-rank plan 10 MiB.
MAX_PLAN_BYTES = 1 << 26
#: ``num_threads_per_block``: the executor launches its kernel with that many threads per block, and
#: CUDA and HIP launch at most 1024.
MAX_PLAN_THREADS = 1024
#: Threadblocks of one GPU, and ``tbg_size``: they wait on one another, so all must be resident at
#: once (an H100 holds 132 SMs x 32 blocks = 4224).
MAX_PLAN_TBS = 4096
#: Threadblocks of a whole plan: ``check`` simulates the executor with two vector clocks of two
#: entries per threadblock for each of them, 2 x (2 x 4096)^2 = 2^27 entries.
MAX_PLAN_THREADBLOCKS = 4096
#: Ops of one threadblock (a pipeline's inner ops counted): 64 x the executor's limit of 64, so that
#: a plan over that limit still gets the check's op-limit finding.
MAX_PLAN_OPS_PER_TB = 4096
#: Ops of a whole plan: 5 x collc's 256-rank plan; the check's simulation visits each op.
MAX_PLAN_OPS = 1 << 18
#: Entries of one list of a plan (an op's buffers, channels or semaphores, a threadblock's channel
#: ids): the executor's device structures hold at most 16 of any of them.
MAX_PLAN_LIST = 256
#: Integers of a plan: the executor reads every number as at most 64 bits.
MAX_PLAN_INT = (1 << 64) - 1
__all__ += ["MAX_PLAN_BYTES", "MAX_PLAN_THREADS", "MAX_PLAN_TBS", "MAX_PLAN_THREADBLOCKS", "MAX_PLAN_OPS_PER_TB",
            "MAX_PLAN_OPS", "MAX_PLAN_LIST", "MAX_PLAN_INT"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


# --------------------------------------------------------------------------- messages
def show(text: object) -> str:
    """``text`` with control characters (NUL, newline, ESC, C1) and lone surrogates escaped."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}")
                        if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", str(text))


def one_line(text: object, limit: int = MAX_MESSAGE) -> str:
    """An error message as one printable line of at most ``limit`` characters."""
    s = show(text)
    return s if len(s) <= limit else s[:limit - 3] + "..."


# --------------------------------------------------------------------------- numbers
def bounded_int(value: int, flag: str, lo: int, hi: int, why: str = "") -> int:
    """``value`` if ``lo <= value <= hi``, else a UsageError naming the flag and the range."""
    if value < lo:
        raise UsageError(f"{flag} {_short(value)} must be at least {lo}")
    if value > hi:
        reason = f" ({why})" if why else ""
        raise UsageError(f"{flag} {_short(value)} is above the limit of {hi}{reason}")
    return value


def check_bytes(value: int, flag: str) -> int:
    """A byte count the runtime can represent (0 .. int64 max)."""
    if value < 0:
        raise UsageError(f"{flag} {_short(value)} must not be negative")
    if value > INT64_MAX:
        raise UsageError(f"{flag} {_short(value)} is beyond int64 (at most {INT64_MAX}): the runtime reads "
                         f"minBytes/maxBytes as 64-bit integers")
    return value


def finite(value: float, flag: str, minimum: float = 0.0, strict: bool = False,
           maximum: float = MAX_MODEL_VALUE) -> float:
    """A number in ``minimum .. maximum`` (above ``minimum`` with ``strict``)."""
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise UsageError(f"{flag} must be a finite number {bound}, got {value!r}")
    if value > maximum:
        raise UsageError(f"{flag} {value:g} is above {maximum:g}: predicted times would overflow")
    return value


def _short(value: int) -> str:
    s = str(value) if value.bit_length() < 256 else f"{str(value)[:20]}... ({len(str(abs(value)))} digits)"
    return s


def check_build_ranks(nranks: int) -> int:
    """Ranks a build (``build``, ``compare``, ``tune``) may have."""
    if nranks > MAX_BUILD_RANKS:
        raise UsageError(f"{nranks} ranks: collc builds at most {MAX_BUILD_RANKS} (memory grows with the ranks: "
                         f"4096 take up to 4 GB)")
    return nranks


def check_spec_text(text: str, error: type[CollcError] = UsageError) -> str:
    """A spec string of at most ``MAX_SPEC_CHARS`` (this also keeps ``int()`` of its numbers cheap)."""
    if len(text) > MAX_SPEC_CHARS:
        raise error(f"topology spec of {len(text)} characters is longer than {MAX_SPEC_CHARS}")
    return text


def check_program_size(ngpus: int, nchunksperloop: int, buffers: int, where: str,
                       error: type[CollcError] = UsageError) -> None:
    """Bound a program's ranks and rank x chunk slots before anything is allocated for them."""
    if ngpus > MAX_RANKS:
        raise error(f"{where}: ngpus={_short(ngpus)} is more than the {MAX_RANKS} ranks collc handles")
    for what, slots in (("ngpus x nchunksperloop", ngpus * max(nchunksperloop, 0)),
                        ("the ranks' i/o/s buffers", buffers)):
        if slots > MAX_SLOTS:
            raise error(f"{where}: {what} is {_short(slots)} chunk slots, more than the {MAX_SLOTS} "
                        f"(2^28) collc can check in memory")


# --------------------------------------------------------------------------- input files
_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a FIFO (named pipe)"),
          (stat.S_ISCHR, "is a character device"), (stat.S_ISBLK, "is a block device"),
          (stat.S_ISSOCK, "is a socket"))


def _not_regular(mode: int) -> str | None:
    for test, what in _KINDS:
        if test(mode):
            return f"{what}, not a regular file"
    return None if stat.S_ISREG(mode) else "is not a regular file"


def input_file(path: str | os.PathLike[str], limit: int, error: type[CollcError] = UsageError,
               label: str = "") -> int:
    """Size of the regular file ``path``; ``error`` if it is missing, not regular or above ``limit``.

    Messages read "cannot read LABEL: reason" (LABEL defaults to the path).
    """
    p = label or show(os.fspath(path))
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"cannot read {p}: {_reason(exc)}") from None
    bad = _not_regular(st.st_mode)
    if bad:
        raise error(f"cannot read {p}: it {bad}")
    if st.st_size > limit:
        raise error(f"cannot read {p}: it is {st.st_size} bytes, more than the {_size(limit)} limit for this "
                    f"kind of file")
    return st.st_size


def read_input(path: str | os.PathLike[str], limit: int, error: type[CollcError] = UsageError,
               label: str = "") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, read without blocking or overrunning.

    Opened non-blocking (a FIFO swapped in after the check cannot hang the read) and
    re-checked on the open descriptor; reads stop at ``limit + 1`` bytes.
    """
    input_file(path, limit, error, label)
    p = label or show(os.fspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot read {p}: {_reason(exc)}") from None
    try:
        bad = _not_regular(os.fstat(fd).st_mode)
        if bad:
            raise error(f"cannot read {p}: it {bad}")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            block = os.read(fd, min(1 << 24, limit + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
    except OSError as exc:
        raise error(f"cannot read {p}: {_reason(exc)}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise error(f"cannot read {p}: it is more than {_size(limit)}, the limit for this kind of file")
    return b"".join(chunks)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


# --------------------------------------------------------------------------- JSON / YAML
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _json_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text (strings skipped); linear, in C-speed passes."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = deepest = 0
    # runs of equal brackets: count them at once
    for run in re.finditer(r"[\[{]+|[\]}]+", brackets):
        n = len(run.group())
        if run.group()[0] in "[{":
            depth += n
            deepest = max(deepest, depth)
        else:
            depth -= n
    return deepest


def _duplicate_key(where: str, key: object, error: type[CollcError]) -> CollcError:
    return error(f"{where}: key {one_line(key, 40)!s} is given twice in one mapping (the second would silently "
                 f"replace the first)")


def load_json(text: str, where: str, error: type[CollcError] = UsageError, unique_keys: bool = False) -> Any:
    """``json.loads`` with the nesting bounded first (deep nesting ends in RecursionError);
    with ``unique_keys`` a key given twice in one object is an error."""
    depth = _json_depth(text)
    if depth > MAX_NESTING:
        raise error(f"{where}: nested {depth} levels deep, more than {MAX_NESTING}")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise _duplicate_key(where, key, error)
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=pairs if unique_keys else None)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: invalid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:   # e.g. an integer of more than 4300 digits
        raise error(f"{where}: invalid JSON: {exc}") from None


def load_yaml(text: str, where: str, error: type[CollcError] = UsageError, unique_keys: bool = False) -> Any:
    """``yaml.safe_load`` after a pass over the events that bounds nesting and alias expansion;
    with ``unique_keys`` a key given twice in one mapping is an error.

    An alias stands for a whole copy of its anchor's value: ten aliases of ten aliases ...
    expand a few hundred bytes into billions of values (the "billion laughs").
    """
    import yaml  # type: ignore[import-untyped]  # imported lazily: only files need it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []       # [anchor, values so far] per open collection
    total = 0
    try:
        for ev in yaml.parse(text, Loader=loader):
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                stack.append([ev.anchor, 1])
                if len(stack) > MAX_NESTING:
                    raise error(f"{where}: nested more than {MAX_NESTING} levels deep")
                continue
            if isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, n = stack.pop()
            elif isinstance(ev, yaml.ScalarEvent):
                anchor, n = ev.anchor, 1
            elif isinstance(ev, yaml.AliasEvent):
                anchor, n = None, sizes.get(ev.anchor or "", 1)
            else:
                continue
            if anchor:
                sizes[anchor] = n
            if stack:
                stack[-1][1] += n
                n = stack[-1][1]
            else:
                total += n
                n = total
            if n > MAX_YAML_NODES:
                raise error(f"{where}: its aliases expand to more than {MAX_YAML_NODES} values")
        if unique_keys:
            base = loader

            class _Unique(base):  # type: ignore[valid-type,misc]
                def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                    keys = [self.construct_object(k, deep=True) for k, _ in node.value]
                    seen: set[Any] = set()
                    for k in keys:
                        if isinstance(k, (str, int, float, bool)) and k in seen:
                            raise _duplicate_key(where, k, error)
                        if isinstance(k, (str, int, float, bool)):
                            seen.add(k)
                    return super().construct_mapping(node, deep)

            loader = _Unique
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        if "nesting depth" in detail:    # PyYAML >= 6.0.4 scans ahead and may stop at its own bound first
            raise error(f"{where}: nested more than {MAX_NESTING} levels deep") from None
        raise error(f"{where}: invalid YAML: {detail}") from None
    except (ValueError, RecursionError) as exc:
        raise error(f"{where}: invalid YAML: {exc}") from None


# --------------------------------------------------------------------------- output paths
def _name_max(directory: Path) -> int:
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _writable_parent(target: Path, flag: str, error: type[CollcError]) -> Path:
    parent = target.parent if str(target.parent) else Path(".")
    p = f"{flag} {show(target)}".strip()
    if not target.name or target.name in (".", ".."):
        raise error(f"cannot write {p}: give a file or directory name")
    limit = _name_max(parent) if parent.is_dir() else 255
    if len(os.fsencode(target.name)) > limit:
        raise error(f"cannot write {flag} {one_line(target.name, 60)}: file name too long "
                    f"({len(os.fsencode(target.name))} bytes; at most {limit} here)")
    if len(os.fsencode(str(target))) >= 4096:
        raise error(f"cannot write {flag}: the path is longer than 4095 bytes")
    try:
        st = os.stat(parent)
    except OSError as exc:
        why = "does not exist" if exc.errno == errno.ENOENT else f"cannot be used ({_reason(exc)})"
        raise error(f"cannot write {p}: directory {show(parent)} {why}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise error(f"cannot write {p}: {show(parent)} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"cannot write {p}: directory {show(parent)} is not writable")
    return parent


def _existing(target: Path, error: type[CollcError]) -> os.stat_result | None:
    try:
        return os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"cannot write {show(target)}: {_reason(exc)}") from None


def output_file(path: str | os.PathLike[str], flag: str = "-o", error: type[CollcError] = UsageError) -> Path:
    """Check that a file may be written at ``path``: the parent directory exists and is writable,
    the name fits, and nothing but a regular file (which is replaced) is there.

    A directory, device, FIFO, socket or symbolic link at ``path`` is refused, never replaced.
    """
    raw = os.fspath(path)
    target = Path(raw)
    if raw.endswith(os.sep):
        raise error(f"cannot write {flag} {show(raw)}: ends with '/', give a file name")
    _writable_parent(target, flag, error)
    st = _existing(target, error)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise error(f"{flag} {show(target)} is a symbolic link; collc does not replace links "
                        f"(remove it or choose another name)")
        bad = _not_regular(st.st_mode)
        if bad:
            raise error(f"{flag} {show(target)} {bad}; collc only replaces regular files")
    return target


def output_dir(path: str | os.PathLike[str], flag: str = "-o", error: type[CollcError] = UsageError) -> Path:
    """Check that a directory may be written (created, or replaced/updated) at ``path``.

    An existing ``path`` must be a real directory (not a link) that collc may write into.
    """
    target = Path(os.fspath(path))
    _writable_parent(target, flag, error)
    st = _existing(target, error)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise error(f"{flag} {show(target)} is a symbolic link; collc does not write through links")
        if not stat.S_ISDIR(st.st_mode):
            raise error(f"{flag} {show(target)} exists and is not a directory")
        if not os.access(target, os.W_OK | os.X_OK):
            raise error(f"cannot write {flag} {show(target)}: directory is not writable")
    return target


def plot_file(path: str | os.PathLike[str], flag: str = "--plot") -> Path:
    """An image path: an output file whose extension names a format collc writes."""
    target = output_file(path, flag)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in PLOT_FORMATS:
        raise UsageError(f"{flag} {show(target)}: unknown image format {one_line(target.suffix or '(none)', 20)!s} "
                         f"(use {', '.join('.' + f for f in PLOT_FORMATS)})")
    return target
