"""Parsers for nccl-tests / rccl-tests output and the MSCCL-ran verdict.

Formats read (the column layout is taken from each header, never assumed):

* the text table of nccl-tests >= 2.13 (``size count type redop root`` then
  ``time algbw busbw #wrong`` per placement) and of older versions (no ``root``,
  sometimes no ``redop``, a float ``error`` column such as ``2e-07``);
* rccl-tests text (``rccl-tests: Version``, ``#   Rank  0 Pid`` lines without
  Group, ``-O 0`` tables with only the in-place half, the asterisk footer);
* per-size runs concatenated in one file (one header per run);
* numbers in exponent form (``1.2e+07`` times, ``1e+06`` wrong counts);
* NCCL/RCCL ``NCCL_DEBUG=INFO`` lines interleaved anywhere, even inside a row
  (the row is glued back together from its fragments);
* nccl-tests ``-J file.json`` output and rccl-tests ``--output_format csv|json``
  files (their JSON lines leave strings unquoted, so they are read key by key).

The verdict says whether MSCCL ran, from the INFO lines: the executor and RCCL
log ``MSCCL: Setup Kernel finished`` for every launch (counted per size: the
lines between two rows belong to the later row), ``MSCCL: Initialization
finished`` once per rank, ``MSCCL doesn't support multiple GPUs in one process``
when they disable themselves, and parser WARNs naming the missing attribute.
See ``docs/runtime-tests.md`` for the rules and their sources.

>>> log = parse_text('''# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
... #  Rank  0 Group  0 Pid  1 on h device  0 [0x18] GPU
... #  Rank  1 Group  0 Pid  2 on h device  1 [0x19] GPU
... #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
...      1048576        262144     float     sum      -1    28.39   36.94   36.94      0    28.04   37.40   37.40      0
... ''', "x.txt")
>>> log.collective, log.nranks, [(r.placement, r.time_us) for r in log.rows]
('allreduce', 2, [('out-of-place', 28.39), ('in-place', 28.04)])
>>> log.verdict.status
'unknown'
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from collc.errors import CollcError
from collc.inputs import MAX_LOG_BYTES, MAX_LOG_LINE, load_json, read_input

__all__ = ["LogParseError", "Row", "Verdict", "Failure", "BenchLog", "parse_file", "parse_file_tests", "parse_text",
           "parse_tests", "TYPE_SIZES", "PERF_NAMES", "DEBUG_SUBSYS"]

#: The ``NCCL_DEBUG_SUBSYS`` value whose lines the verdict reads: INIT (``NCCL version``, ``Using MSCCL
#: Algo files from``, ``MSCCL: Initialization finished``, and the per-launch ``MSCCL: Setup Kernel finished``
#: of the executor and of older RCCL), ENV (``X set by environment to Y``) and COLL: later RCCL logs its
#: per-launch line, ``MSCCL: typeMask M fnIndex F Setup Kernel finished``, in that subsystem (msccl_setup.cc),
#: so without COLL an RCCL run where MSCCL ran would read as one where it did not.  COLL also logs one line
#: per call and rank; TUNING is not needed.
DEBUG_SUBSYS = "INIT,ENV,COLL"


class LogParseError(CollcError):
    """A file holds no nccl-tests / rccl-tests result we can read."""


#: Bytes per element of every nccl-tests / rccl-tests datatype name.
TYPE_SIZES = {"int8": 1, "uint8": 1, "char": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
              "half": 2, "bfloat16": 2, "bf16": 2, "float": 4, "int32": 4, "uint32": 4, "int": 4,
              "double": 8, "int64": 8, "uint64": 8}
#: Test binary stem -> collc collective name.
PERF_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
              "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv",
              "gather": "gather", "scatter": "scatter", "alltoallv": "alltoallv", "hypercube": "hypercube",
              "all_reduce_bias": "allreduce"}
_RCCL_NAMES = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
               "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv",
               "gather": "gather", "scatter": "scatter", "alltoallv": "alltoallv"}

# An NCCL log line is "host:pid:tid [dev] NCCL INFO msg" (WARN lines put "file.cc:line" before
# "NCCL WARN").  It is found from its literal " NCCL " and read backwards: the text before it,
# reversed, is matched from its start, so the work is bounded by the window whatever the line holds.
_MARK = " NCCL "
_MARK_SCAN = 1024            # the marker follows at most a row fragment and the prefix
_LEVELS = ("INFO", "WARN", "TRACE", "ABORT")
_PREFIX_REV = re.compile(r"(?:(?P<line>\d{1,9}):(?P<src>[^\s:\]\[]{1,200}) )?\](?P<dev>\d{1,6})\[ "
                         r"(?P<tid>\d{1,12}):(?P<pid>\d{1,12}):(?P<host>[^\s:]{1,300})")
_WHOLE = re.compile(r"(?P<host>[A-Za-z][^\s:]{0,299}):(?P<pid>\d{1,12}):\d{1,12} \[\d{1,6}\]"
                    r"(?: [^\s:\]\[]{1,200}:\d{1,9})? NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b")
_ROW_TAIL = ("N/A",)         # row cells that can sit just before a host name
# one way to match each number (no "\d+\.?\d*"): no backtracking inside a long token
_NUM_TEXT = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUM = re.compile(_NUM_TEXT)
_PREAMBLE = re.compile(r"#\s*nThreads?:?\s+(?P<nthreads>\d+)\s+nGpus:?\s+(?P<ngpus>\d+)(?P<rest>.*)")
_SETTINGS = re.compile(r"\b(warmup iters|warmupiters|agg iters|iters|validation|graph)\s*:?\s+(\d+)", re.IGNORECASE)
_ENV_SET = re.compile(r"(\w{1,200}) set by environment to (.*)")
_NRANKS = re.compile(r"\bnranks (\d{1,9})")
_RANK_LINE = re.compile(r"#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+"
                        r"(?P<host>\S+)\s+device\s+(?P<dev>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)")
_PERF = re.compile(r"(?:^|[\s/])(?P<stem>[a-z_]{1,40}?)_perf(?:_mpi)?\b")
_BANNER = re.compile(r"#\s*Collective test (?:starting|concluded):\s*(?P<stem>[a-z_]+?)_perf")
_VERSION = re.compile(r"\b(?P<lib>NCCL|RCCL) version\s{0,10}:?\s{0,10}(?P<version>\d{1,4}\.\d{1,4}\.\d{1,4})")
# How a run fails (nccl-tests' NCCLCHECK/CUDACHECK/TESTCHECK lines, Open MPI, Slurm); each is tried
# only on a line holding its literal key.
_FAILS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("Test ", "nccl-tests", re.compile(r"\s*(?P<host>[^\s:]{1,300}): Test (?:\w{1,10} )?failure \S")),
    ("Test failure", "nccl-tests", re.compile(r"\s*\.\. (?P<host>\S{1,300}) pid (?P<pid>\d{1,12}): Test failure")),
    ("MPI_ABORT", "mpirun", re.compile(r".{0,200}?MPI_ABORT was invoked on rank (?P<rank>\d{1,9})")),
    ("exited on signal", "mpirun", re.compile(r".{0,200}?process rank (?P<rank>\d{1,9}) with PID (?P<pid>\d{1,12}) "
                                               r"on node (?P<host>[^\s,]{1,300}) exited on signal")),
    ("Process name:", "mpirun", re.compile(r"\s*Process name:\s*\[\[\d+,\d+\],(?P<rank>\d{1,9})\]")),
    ("job has been aborted", "mpirun", re.compile(r".{0,200}?job has been aborted")),
    ("srun: error:", "slurm", re.compile(r"\s*srun: error: (?P<host>[^\s:]{1,300}): tasks? (?P<rank>\d{1,9})")),
)
_MSCCL_WARN = re.compile(r"msccl|Attribute \w{1,100} of node", re.IGNORECASE)
_SETUP = "MSCCL: Setup Kernel finished"
#: The per-launch line, both spellings: ``MSCCL: Setup Kernel finished[, smem N]`` (executor, RCCL <= 2.18) and
#: ``MSCCL: typeMask M fnIndex F Setup Kernel finished`` (later RCCL).
_SETUP_LINE = re.compile(r"MSCCL: (?:typeMask \w{1,20} fnIndex -?\d{1,9} )?Setup Kernel finished")


@dataclass(frozen=True)
class Row:
    """One measurement: one message size in one placement."""

    size: int                 # bytes, as printed (max of send and receive bytes)
    count: int                # elements per rank, as printed
    dtype: str
    redop: str                # "none" when the test prints none or has no column
    root: int                 # -1 when not applicable or not printed
    placement: str            # "out-of-place" or "in-place"
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None = None  # #wrong; None when N/A or absent
    error: float | None = None  # the old float error column

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "count": self.count, "type": self.dtype, "redop": self.redop,
                "root": self.root, "placement": self.placement, "time_us": self.time_us,
                "algbw": self.algbw, "busbw": self.busbw, "wrong": self.wrong, "error": self.error}


@dataclass(frozen=True)
class Verdict:
    """Did MSCCL run?  ``status``: ``ran``, ``not-ran`` or ``unknown``."""

    status: str
    reason: str
    evidence: tuple[str, ...] = ()
    stock: bool = False        # not-ran because the library is stock NCCL / no MSCCL is configured at all

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "evidence": list(self.evidence),
                "stock_nccl": self.stock}


@dataclass(frozen=True)
class Failure:
    """One line saying the run failed, with the host and ranks it names (when it does)."""

    source: str                  # nccl-tests, nccl (a WARN), msccl (an MSCCL load error), mpirun, slurm
    line: str
    host: str | None = None
    ranks: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "host": self.host, "ranks": list(self.ranks)}


@dataclass
class BenchLog:
    """Everything read from one log file."""

    path: str
    tool: str = "nccl-tests"          # nccl-tests, rccl-tests (text), nccl-tests-json, rccl-tests-csv/-json
    fmt: str = "wrong"                # wrong (#wrong column), error (old float column), json, csv
    collective: str = "unknown"
    collective_source: str = "unknown"
    nranks: int | None = None
    hosts: tuple[str, ...] = ()
    nthreads: int | None = None
    ngpus: int | None = None
    settings: dict[str, int] = field(default_factory=dict)   # warmup iters, iters, agg iters, validation, graph
    runs: int = 0                     # result tables (per-size runs concatenate several)
    rows: list[Row] = field(default_factory=list)
    launches: dict[int, int] = field(default_factory=dict)   # size -> MSCCL kernel launches logged
    avg_busbw: list[float] = field(default_factory=list)
    out_of_bounds: list[int] = field(default_factory=list)
    failed: bool = False
    versions: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)        # "X set by environment to Y" and JSON env
    info_lines: int = 0
    warns: list[str] = field(default_factory=list)
    msccl: list[str] = field(default_factory=list)           # MSCCL lines, deduplicated, in order
    nccl_lazy: bool = False           # NCCL connected its own rings/trees after the table header
    notes: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    pids: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict)   # pid -> host, its ranks
    long_lines: int = 0               # lines cut at MAX_LOG_LINE characters
    verdict: Verdict = field(default_factory=lambda: Verdict("unknown", "not evaluated"))

    @property
    def run_failed(self) -> bool:
        """The log shows the run itself failing (not a data check)."""
        return bool(self.failures)

    @property
    def msccl_state(self) -> str:
        """``loaded``, ``load failed``, ``not configured`` (INFO lines with no MSCCL at all) or ``unknown``."""
        if self.failures and any(_MSCCL_WARN.search(w) for w in self.warns):
            return "load failed"
        if any(k in m for m in self.msccl for k in ("Algo files from", "MSCCL files from", "Initialization finished",
                                                    "Setup Kernel finished", "MSCCL algorithms")):
            return "loaded"
        if sum(self.launches.values()):
            return "loaded"
        configured = any("MSCCL" in k for k in self.env) or "MSCCL" in self.env.get("NCCL_ALGO", "").upper()
        if self.info_lines > len(self.warns) and not self.msccl and not configured:   # INFO lines, not only WARNs
            return "not configured"
        return "unknown"

    @property
    def sizes(self) -> list[int]:
        return sorted({r.size for r in self.rows})

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "tool": self.tool, "format": self.fmt, "collective": self.collective,
                "collective_source": self.collective_source, "nranks": self.nranks, "hosts": list(self.hosts),
                "nthreads": self.nthreads, "ngpus": self.ngpus, "settings": dict(self.settings),
                "runs": self.runs, "rows": [r.to_json() for r in self.rows],
                "msccl_launches": {str(k): v for k, v in sorted(self.launches.items())},
                "avg_busbw": self.avg_busbw, "out_of_bounds": self.out_of_bounds, "failed": self.failed,
                "versions": dict(self.versions), "env": dict(self.env), "info_lines": self.info_lines,
                "warnings": self.warns, "msccl_lines": self.msccl, "nccl_connected_at_first_call": self.nccl_lazy,
                "notes": self.notes, "run_failed": self.run_failed,
                "failures": [f.to_json() for f in self.failures], "msccl_state": self.msccl_state,
                "long_lines": self.long_lines, "verdict": self.verdict.to_json()}


# --------------------------------------------------------------------------- helpers
def _is_num(tok: str) -> bool:
    return _NUM.fullmatch(tok) is not None


def _int_tok(tok: str) -> int | None:
    try:
        return int(tok)
    except ValueError:
        try:
            value = float(tok)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


def _wrong(tok: str) -> int | None:
    return None if tok.upper() == "N/A" else _int_tok(tok.rstrip("*"))


def collective_from_stem(stem: str) -> str | None:
    """``all_reduce`` (from ``all_reduce_perf``) -> ``allreduce``."""
    return PERF_NAMES.get(stem.lower())


# --------------------------------------------------------------------------- text tables
def _cell_pattern(name: str) -> str:
    if name in ("size", "count", "root"):
        return r"[-+]?\d+"
    if name == "type":
        return "(?i:" + "|".join(sorted(TYPE_SIZES, key=len, reverse=True)) + ")"
    if name == "redop":
        return r"[A-Za-z_]+"
    if name in ("time", "cputime", "algbw", "busbw", "#wrong", "wrong", "error"):
        return rf"(?:N/A|{_NUM_TEXT})\*?"
    return r"\S+"


@dataclass
class _Table:
    lead: list[str]                # column names before the first placement group
    group: list[str]               # the names of one placement group, e.g. time algbw busbw #wrong
    placements: list[str]          # in printed order
    full: int = 0                  # cells of a whole row
    rx: re.Pattern[str] = field(default=re.compile("(?!)"))   # a row of one or more whole groups
    index: dict[str, int] = field(default_factory=dict)      # lead column -> position
    gindex: dict[str, int] = field(default_factory=dict)     # group column -> position in a group
    time_at: int | None = None

    def __post_init__(self) -> None:
        self.full = len(self.lead) + len(self.group) * len(self.placements)
        lead = r"\s+".join(_cell_pattern(n) for n in self.lead)
        group = "".join(r"\s+" + _cell_pattern(n) for n in self.group)
        self.rx = re.compile(rf"\s*{lead}(?:{group}){{1,{max(1, len(self.placements))}}}\s*")
        self.index = {n: k for k, n in enumerate(self.lead)}
        self.gindex = {n: k for k, n in enumerate(self.group)}
        self.time_at = self.gindex.get("time", self.gindex.get("cputime"))


def _header(tokens: list[str], placements: list[str]) -> _Table | None:
    names = [t.lower() for t in tokens]
    if "size" not in names or "count" not in names:
        return None
    time_names = ("time", "cputime")
    starts = [i for i, t in enumerate(names) if t in time_names]
    if not starts:
        return None
    lead = names[:starts[0]]
    end = starts[1] if len(starts) > 1 else len(names)
    group = names[starts[0]:end]
    ngroups = max(1, len(starts))
    if len(placements) != ngroups:
        placements = ["out-of-place", "in-place"][:ngroups] if ngroups <= 2 else placements
    return _Table(lead, group, placements)


def _row(tokens: list[str], table: _Table) -> list[Row] | None:
    nlead = len(table.lead)
    width = len(table.group)
    if len(tokens) < nlead + width:
        return None
    ix = table.index
    size, count = _int_tok(tokens[ix["size"]]), _int_tok(tokens[ix["count"]])
    if size is None or count is None:
        return None
    root = _int_tok(tokens[ix["root"]]) if "root" in ix else -1
    dtype = tokens[ix["type"]] if "type" in ix else "?"
    redop = tokens[ix["redop"]] if "redop" in ix else "none"
    t_at, a_at, b_at = table.time_at, table.gindex.get("algbw"), table.gindex.get("busbw")
    w_at, e_at = table.gindex.get("#wrong"), table.gindex.get("error")
    if a_at is None or b_at is None:
        return None
    out: list[Row] = []
    for gi, placement in enumerate(table.placements):
        base = nlead + gi * width
        if len(tokens) < base + width:
            break
        try:
            time_us = float(tokens[base + t_at]) if t_at is not None else float("nan")
            algbw, busbw = float(tokens[base + a_at]), float(tokens[base + b_at])
        except ValueError:
            return None
        wrong: int | None = None
        error: float | None = None
        if w_at is not None:
            wrong = _wrong(tokens[base + w_at])
        elif e_at is not None:
            text = tokens[base + e_at].rstrip("*")
            error = None if text.upper() == "N/A" else float(text) if _is_num(text) else None
        out.append(Row(size, count, dtype, redop, -1 if root is None else root, placement, time_us, algbw, busbw,
                       wrong, error))
    return out or None


class _Info(NamedTuple):
    host: str
    pid: int
    level: str
    msg: str


def _split_info(line: str, pids: dict[int, tuple[str, tuple[int, ...]]]) -> tuple[str, _Info | None]:
    """Text before an NCCL log line, and that line (None when absent).

    A row fragment can sit right before the host (``... -1gpu-7:1234:1240 [3] NCCL INFO``,
    ``... N/Agpu-7:...``): the host is the one its pid has on a rank line when there is one,
    else the name from its first letter (a host name starts with one)."""
    if _MARK not in line[:_MARK_SCAN + len(_MARK)]:
        return line, None
    whole = _WHOLE.match(line)     # the common case: the line is the log line
    if whole is not None:
        return "", _Info(whole.group("host"), int(whole.group("pid")), whole.group("level"), line[whole.end():].strip())
    start = 0
    while True:
        i = line.find(_MARK, start, _MARK_SCAN + len(_MARK))
        if i < 0:
            return line, None
        start = i + 1
        level = line[i + len(_MARK):i + len(_MARK) + 5].rstrip(" :")
        if level not in _LEVELS:
            continue
        m = _PREFIX_REV.match(line[max(0, i - 700):i][::-1])
        if m is None:
            continue
        host, pid = m.group("host")[::-1], int(m.group("pid")[::-1])
        known = pids.get(pid)
        if known and host.endswith(known[0]):
            host = known[0]
        elif pids and (suffix := _known_suffix(host, pids)) is not None:
            host = suffix
        else:
            for tail in _ROW_TAIL:
                if host.startswith(tail) and len(host) > len(tail):
                    host = host[len(tail):]
            letter = next((k for k, ch in enumerate(host) if ch.isalpha()), None)
            if letter is None:
                continue
            host = host[letter:]
        cut = i - len(m.group(0)) + (len(m.group("host")) - len(host))
        msg = line[i + len(_MARK) + len(level):].strip()
        return line[:cut], _Info(host, pid, level, msg)


def _known_suffix(host: str, pids: dict[int, tuple[str, tuple[int, ...]]]) -> str | None:
    """The longest end of ``host`` that a rank line names (a pid from another run of the log)."""
    names = {h for h, _ in pids.values()}
    return next((host[k:] for k in range(len(host)) if host[k:] in names), None)


#: What each column of a table holds: a cell that does not fit is not part of a row.
def _fits(name: str, tok: str) -> bool:
    if name in ("size", "count", "root"):
        return _int_tok(tok) is not None
    if name == "type":
        return tok.lower() in TYPE_SIZES
    if name == "redop":
        return tok.replace("_", "").isalpha()
    if name in ("time", "cputime", "algbw", "busbw", "#wrong", "wrong", "error"):
        t = tok.rstrip("*")
        return t.upper() == "N/A" or _is_num(t)
    return True


def _fits_at(tokens: list[str], table: _Table, offset: int) -> bool:
    """``tokens`` can be the cells from column ``offset`` of a row of ``table``."""
    if not tokens or offset + len(tokens) > table.full:
        return False
    names = table.lead + table.group * len(table.placements)
    return all(_fits(names[offset + k], t) for k, t in enumerate(tokens))


def _note_failure(log: BenchLog, s: str) -> None:
    for key, source, rx in _FAILS:
        if key not in s:
            continue
        m = rx.match(s)
        if m is None:
            continue
        d = m.groupdict()
        host = d.get("host")
        ranks: tuple[int, ...] = ()
        if d.get("rank") is not None:
            ranks = (int(d["rank"]),)
        elif d.get("pid") is not None and int(d["pid"]) in log.pids:
            ranks = log.pids[int(d["pid"])][1]
        elif host is not None:
            on_host = sorted(r for h, rs in log.pids.values() if h == host for r in rs)
            ranks = tuple(on_host) if len(on_host) == 1 else ()
        f = Failure(source, s.strip()[:300], host, ranks)
        if f not in log.failures and len(log.failures) < 50:
            log.failures.append(f)
        return


def parse_text(text: str, path: str = "<text>", finish: bool = True) -> BenchLog:
    """Parse nccl-tests / rccl-tests stdout as one test (any version; see the module docstring).
    Use :func:`parse_tests` for a log that may hold several different tests."""
    stripped = text.lstrip()
    if stripped.startswith("{") and '"results"' in text:
        return _parse_nccl_json(text, path)
    first = stripped[:MAX_LOG_LINE].splitlines()[0] if stripped else ""
    if first.lower().startswith("collective,") or first.lower().startswith("collective ,"):
        return _parse_rccl_csv(text, path)
    if stripped.startswith('{"name":'):
        return _parse_rccl_jsonl(text, path)
    log = _parse_lines(text.splitlines(), path)
    if not log.rows and not log.failures:
        raise LogParseError(f"{path}: no nccl-tests/rccl-tests result rows found")
    if finish:
        _finish(log)
    return log


def _parse_lines(lines: list[str], path: str) -> BenchLog:
    """The text-table parser: one pass, a bounded amount of work per line."""
    log = BenchLog(path)
    table: _Table | None = None
    placements = ["out-of-place", "in-place"]
    pending: list[str] = []
    ranks: dict[int, str] = {}
    launches_since_row = 0
    wrong_seen = error_seen = False

    def flush() -> None:
        nonlocal pending, launches_since_row
        if table is None or not pending:
            pending = []
            return
        rows = _row(pending, table)
        pending = []
        if rows is None:
            return
        log.rows.extend(rows)
        size = rows[0].size
        log.launches[size] = log.launches.get(size, 0) + launches_since_row
        launches_since_row = 0

    for raw in lines:
        if len(raw) > MAX_LOG_LINE:
            raw = raw[:MAX_LOG_LINE]
            log.long_lines += 1
        body, info = _split_info(raw, log.pids)
        if info is not None:
            log.info_lines += 1
            if "Setup Kernel finished" in info.msg and _SETUP_LINE.search(info.msg):
                launches_since_row += 1
            elif table is not None and info.msg.startswith(("Connected all rings", "Connected all trees")):
                # NCCL connects its own rings/trees lazily, at the first call that uses them
                log.nccl_lazy = True
            _note_info(log, info.level, info.msg)
        line = body.rstrip()
        if not line.strip():
            continue
        s = line.strip()
        if s.startswith("#"):
            flush()
            pre = _PREAMBLE.match(s)
            if pre:
                log.runs += 1
                log.nthreads, log.ngpus = int(pre.group("nthreads")), int(pre.group("ngpus"))
                for key, val in _SETTINGS.findall(pre.group("rest")):
                    key = key.lower()
                    log.settings[key.replace("warmupiters", "warmup iters")] = int(val)
                continue
            rk = _RANK_LINE.match(s)
            if rk:
                rank, host, pid = int(rk.group("rank")), rk.group("host"), int(rk.group("pid"))
                ranks[rank] = host
                prev = log.pids.get(pid, (host, ()))
                log.pids[pid] = (host, prev[1] + (rank,) if rank not in prev[1] else prev[1])
                continue
            ver = re.match(r"#\s*nccl-tests version (\S+).*?nccl-library=(\d+)", s)
            if ver:   # newer nccl-tests: the library's version code, e.g. 22703 = 2.27.3
                code = int(ver.group(2)[:9])
                log.versions["nccl-tests"] = ver.group(1)
                log.versions.setdefault("NCCL", f"{code // 10000}.{code % 10000 // 100}.{code % 100}")
                continue
            ban = _BANNER.match(s)
            if ban:
                _set_collective(log, ban.group("stem"), "banner")
                continue
            tokens = s.lstrip("#").split()
            low = [t.lower() for t in tokens]
            if low and all(t in ("out-of-place", "in-place") for t in low):
                placements = low
                continue
            hdr = _header(tokens, placements)
            if hdr is not None:
                table = hdr
                wrong_seen |= "#wrong" in hdr.group
                error_seen |= "error" in hdr.group
                continue
            if "Errors with asterisks" in s:
                log.tool = "rccl-tests"   # only rccl-tests prints this footer
            if "Out of bounds values" in s:
                nums = re.findall(r":\s*(\d+)", s)
                if nums:
                    log.out_of_bounds.append(int(nums[0]))
                log.failed |= "FAILED" in s
            elif "Avg bus bandwidth" in s:
                m2 = re.search(r":\s*(\S+)", s)
                if m2 and _is_num(m2.group(1)):
                    log.avg_busbw.append(float(m2.group(1)))
                log.failed |= "FAILED" in s
            continue
        if table is not None and not pending and s[0].isdigit() and table.rx.fullmatch(s):
            pending = s.split()       # a row on one line: the common case
            if len(pending) >= table.full:
                flush()
            continue
        if "version" in s:
            vm = _VERSION.search(s)
            if vm and not s[:1].isdigit():
                log.versions.setdefault(vm.group("lib"), vm.group("version"))
        if s.startswith("rccl-tests:") or s.startswith("RCCL version"):
            log.tool = "rccl-tests"
        if log.collective == "unknown" and "_perf" in s:
            pm = _PERF.search(s)
            if pm and collective_from_stem(pm.group("stem")):
                _set_collective(log, pm.group("stem"), "command line")
        if "fail" in s or "MPI_ABORT" in s or "aborted" in s or "exited" in s or "srun: error" in s \
                or "Process name:" in s:
            _note_failure(log, s)
        if table is None:
            continue
        tokens = s.split()
        if pending and len(pending) < table.full and _fits_at(tokens, table, len(pending)):
            pending.extend(tokens)   # the rest of a row that an INFO line cut
            if len(pending) >= table.full:
                flush()
        elif _int_tok(tokens[0]) is not None and _fits_at(tokens, table, 0):
            flush()
            pending = tokens
            if len(pending) >= table.full:
                flush()
        else:
            flush()
    flush()
    if ranks:
        log.nranks = max(ranks) + 1
        log.hosts = tuple(dict.fromkeys(ranks[r] for r in sorted(ranks)))
    log.fmt = "error" if error_seen and not wrong_seen else "wrong"
    if any(r.wrong == -1 for r in log.rows):
        log.notes.append("a #wrong value of -1 means the data check was not run")
    if log.long_lines:
        log.notes.append(f"{log.long_lines} line(s) longer than {MAX_LOG_LINE} characters: only their start was read")
    return log


_PREAMBLE_LINE = re.compile(r"\s*#\s*nThreads?:?\s+\d+\s+nGpus")
_LEADS_PREAMBLE = re.compile(r"\s*#\s*(Collective test starting:|nccl-tests version )")


def _multiplier(log: BenchLog) -> float | None:
    r = log.rows[0]
    ts = TYPE_SIZES.get(r.dtype)
    return r.size / (r.count * ts) if ts and r.count else None


def _same_test(a: BenchLog, b: BenchLog, a_redops: set[str]) -> bool:
    named = {x.collective for x in (a, b) if x.collective_source in ("banner", "command line")}
    return (len(named) <= 1 and a.nranks == b.nranks and a.tool == b.tool and a.fmt == b.fmt
            and a_redops == {r.redop for r in b.rows} and _multiplier(a) == _multiplier(b))


def _merge(a: BenchLog, b: BenchLog) -> None:
    a.rows.extend(b.rows)
    for size, k in b.launches.items():
        a.launches[size] = a.launches.get(size, 0) + k
    a.runs += b.runs
    a.avg_busbw.extend(b.avg_busbw)
    a.out_of_bounds.extend(b.out_of_bounds)
    a.failed |= b.failed
    a.nccl_lazy |= b.nccl_lazy
    a.info_lines += b.info_lines
    a.long_lines += b.long_lines
    a.hosts = tuple(dict.fromkeys(a.hosts + b.hosts))
    for key, val in b.versions.items():
        a.versions.setdefault(key, val)
    for key, val in b.env.items():
        a.env.setdefault(key, val)
    for mine, theirs in ((a.warns, b.warns), (a.msccl, b.msccl), (a.notes, b.notes)):
        _extend_new(mine, theirs)
    for pid, hr in b.pids.items():
        a.pids.setdefault(pid, hr)
    a.failures.extend(f for f in b.failures if f not in a.failures)
    if a.collective_source not in ("banner", "command line") and b.collective_source in ("banner", "command line"):
        a.collective, a.collective_source = b.collective, b.collective_source


def _extend_new(mine: list[str], theirs: list[str]) -> None:
    seen = set(mine)
    for x in theirs:
        if x not in seen:
            seen.add(x)
            mine.append(x)


def parse_tests(text: str, path: str = "<text>") -> list[BenchLog]:
    """Every test in a log, in order.  A log may concatenate runs: per-size runs of one test
    stay one :class:`BenchLog`; a different test (another collective, rank count or column
    layout) starts a new one.  A run without result rows (a crash) is kept with the test before
    it (or the one after, at the start); a log of nothing but failed runs is one test without rows."""
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.lower().startswith("collective") or not stripped:
        return [parse_text(text, path)]
    lines = text.splitlines()
    cuts = [0]
    for i, ln in enumerate(lines):
        if "nGpus" in ln[:200] and _PREAMBLE_LINE.match(ln) and i > 0:
            j = i
            while j > cuts[-1] and _LEADS_PREAMBLE.match(lines[j - 1][:200]):
                j -= 1
            if j > cuts[-1]:
                cuts.append(j)
    cuts.append(len(lines))
    logs: list[BenchLog] = []
    redops: list[set[str]] = []
    early: BenchLog | None = None      # runs without rows before the first with rows
    for lo, hi in zip(cuts, cuts[1:]):
        seg = _parse_lines(lines[lo:hi], path)
        if not seg.rows:
            if logs:
                _merge(logs[-1], seg)
            elif early is None:
                early = seg
            else:
                _merge(early, seg)
            continue
        if early is not None:      # its lines came first: keep their order, take this run's table facts
            _merge(early, seg)
            early.tool, early.fmt, early.nranks = seg.tool, seg.fmt, seg.nranks
            early.nthreads, early.ngpus, early.settings = seg.nthreads, seg.ngpus, dict(seg.settings)
            if early.collective_source == "unknown":
                early.collective, early.collective_source = seg.collective, seg.collective_source
            early.hosts = seg.hosts or early.hosts
            seg, early = early, None
        if logs and _same_test(logs[-1], seg, redops[-1]):
            _merge(logs[-1], seg)
            redops[-1].update(r.redop for r in seg.rows)
        else:
            logs.append(seg)
            redops.append({r.redop for r in seg.rows})
    if not logs:
        if early is None or not early.failures:
            raise LogParseError(f"{path}: no nccl-tests/rccl-tests result rows found")
        logs.append(early)
    for lg in logs:
        _finish(lg)
    return logs


def parse_text_info(text: str, path: str) -> BenchLog:
    """The INFO/WARN lines, footers and failure lines of text that holds no result rows."""
    log = _parse_lines(text.splitlines(), path)
    log.rows.clear()
    return log


def _set_collective(log: BenchLog, stem: str, source: str) -> None:
    coll = collective_from_stem(stem)
    if coll is not None and log.collective_source not in ("banner",):
        log.collective, log.collective_source = coll, source


def _note_info(log: BenchLog, level: str, msg: str) -> None:
    msg = msg[:1000]
    if "version" in msg:
        vm = _VERSION.search(msg)
        if vm:
            log.versions.setdefault(vm.group("lib"), vm.group("version"))
    if " set by environment to " in msg:
        env = _ENV_SET.match(msg)
        if env:
            log.env.setdefault(env.group(1), env.group(2).strip())
    if "nranks " in msg:
        nr = _NRANKS.search(msg)
        if nr and log.nranks is None:
            log.settings.setdefault("nranks", int(nr.group(1)))
    if level in ("WARN", "ABORT"):
        if msg not in log.warns and len(log.warns) < 1000:
            log.warns.append(msg)
    if ("MSCCL" in msg or "msccl" in msg) and not _SETUP_LINE.search(msg) and msg not in log.msccl and len(log.msccl) < 1000:
        log.msccl.append(msg)


# --------------------------------------------------------------------------- structured files
def _parse_nccl_json(text: str, path: str) -> BenchLog:
    data = load_json(text, f"{path}: nccl-tests JSON", LogParseError)   # nesting bounded first
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise LogParseError(f"{path}: JSON without a 'results' list is not nccl-tests -J output")
    log = BenchLog(path, tool="nccl-tests-json", fmt="json")
    args = data.get("args") or []
    if args and isinstance(args[0], str):
        m = _PERF.search(" " + args[0])
        if m:
            _set_collective(log, m.group("stem"), "command line")
    for item in data.get("env") or []:
        if isinstance(item, str) and "=" in item:
            k, v = item.split("=", 1)
            if k.startswith(("NCCL_", "MSCCL_", "RCCL_")) or k == "LD_PRELOAD":
                log.env[k] = v
    cfg = data.get("config") or {}
    log.nthreads, log.ngpus = cfg.get("nthreads"), cfg.get("ngpus")
    for key, name in (("warmup_iters", "warmup iters"), ("iterations", "iters"),
                      ("aggregated_iterations", "agg iters"), ("validation", "validation"), ("graph", "graph")):
        if isinstance(cfg.get(key), int):
            log.settings[name] = cfg[key]
    devices = cfg.get("devices") or data.get("devices") or []
    if devices:
        log.nranks = len(devices)
        log.hosts = tuple(dict.fromkeys(str(d.get("hostname")) for d in devices))
    log.runs = 1
    for res in data["results"]:
        root = _int_tok(str(res.get("root", "-1")).strip())
        for key, placement in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
            body = res.get(key)
            if not body:
                continue
            nwrong = body.get("nwrong")
            log.rows.append(Row(int(res["size"]), int(res["count"]), str(res.get("type")), str(res.get("redop")),
                                -1 if root is None else root, placement,
                                float(body.get("time", body.get("cpu_time", "nan"))),
                                float(body["alg_bw"]), float(body["bus_bw"]),
                                None if nwrong is None else int(float(nwrong))))
    oob = data.get("out_of_bounds") or {}
    if isinstance(oob.get("count"), int):
        log.out_of_bounds.append(oob["count"])
        log.failed |= oob["count"] != 0
    avg = data.get("average_bus_bandwidth") or {}
    if isinstance(avg.get("bandwidth"), (int, float)):
        log.avg_busbw.append(float(avg["bandwidth"]))
    if not log.rows:
        raise LogParseError(f"{path}: nccl-tests JSON holds no results")
    _finish(log)
    return log


def _rccl_record(log: BenchLog, name: str, fields: dict[str, str]) -> None:
    coll = _RCCL_NAMES.get(re.sub(r"[^a-z]", "", name.lower()).removesuffix("perf"))
    if coll and log.collective == "unknown":
        log.collective, log.collective_source = coll, "csv/json name"
    size = _int_tok(fields["size"])
    if size is None:
        raise LogParseError(f"{log.path}: bad size {fields['size']!r}")
    ranks = _int_tok(fields.get("ranks", fields.get("gpus", "")) or "")
    if ranks:
        log.nranks = ranks
    dtype = fields.get("type", "?")
    placement = "in-place" if fields.get("inplace", "0").strip() == "1" else "out-of-place"
    count = size // TYPE_SIZES.get(dtype, 1)
    log.rows.append(Row(size, count, dtype, fields.get("redop", "none"), -1, placement,
                        float(fields["time"]), float(fields["algbw"]), float(fields["busbw"]),
                        _wrong(fields.get("#wrong", fields.get("wrong", "N/A")))))


def _parse_rccl_csv(text: str, path: str) -> BenchLog:
    log = BenchLog(path, tool="rccl-tests-csv", fmt="csv", runs=1)
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    header = [h.strip().lower() for h in next(reader)]
    tail = ["size", "type", "redop", "inplace", "time", "algbw", "busbw", "#wrong"]
    for rec in reader:
        if not rec or not any(x.strip() for x in rec):
            continue
        rec = [x.strip() for x in rec]
        if len(rec) < len(tail) + 1:
            raise LogParseError(f"{path}: short CSV record {rec!r}")
        fields = dict(zip(tail, rec[-len(tail):]))
        # the MPI build writes a "nodes" value its header does not name: read the front by position from the end
        front = rec[1:-len(tail)]
        names = [h for h in header[1:-len(tail)]]
        if len(front) == len(names) + 1:
            names = ["nodes"] + names
        fields.update({("ranks" if n == "ranks" else n): v for n, v in zip(names, front)})
        _rccl_record(log, rec[0], fields)
    if not log.rows:
        raise LogParseError(f"{path}: rccl-tests CSV holds no results")
    _finish(log)
    return log


_JSON_PAIR = re.compile(r'"(?P<key>[^"]+)":\s*(?P<val>"[^"]*"|[^,}]*)')


def _parse_rccl_jsonl(text: str, path: str) -> BenchLog:
    log = BenchLog(path, tool="rccl-tests-json", fmt="json", runs=1)
    keymap = {"name": "name", "nodes": "nodes", "ranks": "ranks", "gpus": "gpus", "size": "size", "type": "type",
              "redop": "redop", "inPlace": "inplace", "time": "time", "algBw": "algbw", "busBw": "busbw",
              "wrong": "#wrong", "ranksPerNode": "rankspernode", "gpusPerRank": "gpusperrank"}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        pairs = {keymap.get(m.group("key"), m.group("key")): m.group("val").strip().strip('"')
                 for m in _JSON_PAIR.finditer(line)}
        if "size" not in pairs:
            raise LogParseError(f"{path}: rccl-tests JSON record without size: {line[:80]!r}")
        _rccl_record(log, pairs.get("name", ""), pairs)
    _finish(log)
    return log


def _read(path: str | Path) -> str:
    """A log's text: a regular file of at most MAX_LOG_BYTES, read without blocking."""
    return read_input(path, MAX_LOG_BYTES, LogParseError).decode("utf-8", errors="replace")


def parse_file_tests(path: str | Path) -> list[BenchLog]:
    """Every test in a log file (see :func:`parse_tests`)."""
    return parse_tests(_read(path), str(path))


def parse_file(path: str | Path) -> BenchLog:
    """The one test of a log file; a log holding several different tests is an error."""
    tests = parse_file_tests(path)
    if len(tests) > 1:
        raise LogParseError(f"{path}: holds {len(tests)} different tests ("
                            f"{', '.join(t.collective for t in tests)}); use collc bench parse, or split the log")
    return tests[0]


# --------------------------------------------------------------------------- inference and verdict
def _infer_collective(log: BenchLog) -> None:
    if log.collective != "unknown" or not log.rows:
        return
    r = max(log.rows, key=lambda x: (x.algbw, x.size))   # tiny sizes print 0.00 bandwidths
    ts = TYPE_SIZES.get(r.dtype)
    n = log.nranks
    if not ts or not n or r.count == 0:
        return
    mult = r.size / (r.count * ts)
    ratio = r.busbw / r.algbw if r.algbw > 0 else 0.0
    reducing = r.redop != "none"
    if abs(mult - 1) < 1e-9:
        if reducing and abs(ratio - 2 * (n - 1) / n) < 0.05:
            coll = "allreduce"
        else:
            coll = "reduce" if reducing else "broadcast"
    elif abs(mult - n) < 1e-9:
        coll = "reducescatter" if reducing else "allgather"
    else:
        return
    log.collective, log.collective_source = coll, "inferred from the columns"


def _finish(log: BenchLog) -> None:
    # "host: Test NCCL failure" names no rank when the host runs several: take the ranks another
    # failure line of that host names (" .. host pid P: Test failure", an NCCL WARN of pid P)
    named: dict[str, tuple[int, ...]] = {}
    for f in log.failures:
        if f.host and f.ranks:
            named.setdefault(f.host, f.ranks)
    log.failures = [Failure(f.source, f.line, f.host, named[f.host]) if f.host in named and not f.ranks else f
                    for f in log.failures]
    if log.nranks is None and "nranks" in log.settings:
        log.nranks = log.settings["nranks"]
    _infer_collective(log)
    if log.collective == "alltoall" and any(r.placement == "in-place" and r.wrong is None for r in log.rows):
        log.notes.append("in-place alltoall is not data-checked by nccl-tests (#wrong N/A); "
                         "its in-place numbers prove nothing about correctness")
    log.verdict = verdict(log)


def _major_minor(version: str) -> tuple[int, int, int]:
    parts = [int(x) for x in re.findall(r"\d+", version)[:3]]
    return (parts + [0, 0, 0])[0], (parts + [0, 0, 0])[1], (parts + [0, 0, 0])[2]


def verdict(log: BenchLog) -> Verdict:
    """Whether MSCCL ran, with the reason the log gives (see the module docstring)."""
    ev: list[str] = []
    launched = sum(log.launches.values())
    if launched:
        sizes = sorted(s for s, k in log.launches.items() if k)
        ev.append(f"{launched} 'MSCCL: Setup Kernel finished' lines over {len(sizes)} size(s)")
        return Verdict("ran", f"MSCCL kernels launched at {len(sizes)} of {len(log.sizes)} sizes", tuple(ev))
    for msg in log.msccl:
        if "doesn't support multiple GPUs in one process" in msg:
            return Verdict("not-ran", "MSCCL disabled itself: more than one GPU per process (use mpirun -np N "
                           "with -g 1)", (msg,))
    rejects = [w for w in log.warns if re.search(r"msccl|Attribute \w+ of node", w, re.IGNORECASE)]
    if rejects:
        return Verdict("not-ran", f"the MSCCL runtime rejected an algorithm: {rejects[0]}", tuple(rejects[:5]))
    for key in ("NCCL_MSCCL_ENABLE", "RCCL_MSCCL_ENABLE"):
        if log.env.get(key, "").strip() in ("0", "false"):
            return Verdict("not-ran", f"{key}=0 in the environment", (f"{key} set by environment to 0",))
    connected = [m for m in log.msccl if re.search(r"Connected (\d+) MSCCL algorithms", m)]
    if connected:
        n = int(re.search(r"Connected (\d+)", connected[0]).group(1))  # type: ignore[union-attr]
        if n == 0:
            return Verdict("not-ran", "old microsoft/msccl runtime connected 0 MSCCL algorithms", (connected[0],))
        return Verdict("unknown", f"old microsoft/msccl runtime connected {n} algorithm(s); it logs no per-launch "
                       f"line, so compare the placement the XML targets with the other one", (connected[0],))
    if log.msccl:
        init = [m for m in log.msccl if "Initialization finished" in m or "Algo files from" in m
                or "MSCCL files from" in m]
        why = ("MSCCL initialised but no 'MSCCL: Setup Kernel finished' line follows: no call matched a loaded "
               "algorithm (ngpus, collective, placement, size window or nchunksperloop divisibility), so NCCL's "
               "own algorithms ran every size")
        if log.env.get("NCCL_ALGO", "").upper().startswith("MSCCL") and log.versions.get("NCCL", "").startswith("2.23"):
            why += "; NCCL_ALGO=MSCCL is the old microsoft/msccl switch and does nothing in the executor"
        ev = list(init[:4] or log.msccl[:4])
        if log.nccl_lazy:
            ev.append("NCCL connected its own rings/trees at the first call ('Connected all rings' after the "
                      "table header)")
        return Verdict("not-ran", why, tuple(ev))
    nccl = log.versions.get("NCCL")
    if nccl and _major_minor(nccl) > (2, 23, 4) and log.tool != "rccl-tests":
        return Verdict("not-ran", f"NCCL {nccl} is stock NCCL: the MSCCL executor is a fork of NCCL 2.23.4 "
                       f"(no MSCCL XML support in newer NCCL)", (f"NCCL version {nccl}",), stock=True)
    if log.info_lines:
        return Verdict("not-ran", "NCCL_DEBUG=INFO lines are present but none mentions MSCCL: this library has "
                       "no MSCCL, or MSCCL is off", (), stock=log.msccl_state == "not configured")
    return Verdict("unknown", f"no NCCL_DEBUG=INFO lines: rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS={DEBUG_SUBSYS} "
                   "to see whether MSCCL ran", ())


def path_per_size(log: BenchLog) -> dict[int, str]:
    """Per size, which path ran as far as the log shows: ``MSCCL``, ``NCCL`` or ``unknown``."""
    out: dict[int, str] = {}
    for s in log.sizes:
        if log.launches.get(s):
            out[s] = "MSCCL"
        elif log.verdict.status in ("ran", "not-ran"):
            out[s] = "NCCL"
        else:
            out[s] = "unknown"
    return out
