"""Logs built from the real lines of the shared corpus: rows cut by other ranks' NCCL lines, and a
long sweep.  Used by the tests and by ``benchmarks/bench_parse_speed.py``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.runtime_tests._shared import shared

LOGS = shared("corpora", "nccl-tests-logs")
GCP = "gcp-a3mega_2node-16x-h100_allreduce.txt"                       # new format, 2 hosts x 8
PANLICHEN = "panlichen_4node-32x-rtx3090_allreduce_per-size-runs_oldfmt.txt"   # old format, 4 hosts
YCCL = "yccl_4x-rtxa6000_msccl-executor_allgather_nccl-info.txt"     # real INFO lines (MSCCL executor)

_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)")
_INFO = re.compile(r"^[^\s:]+:\d+:\d+ \[\d+\] (NCCL (?:INFO|WARN) .*)$")


def corpus(name: str) -> Path:
    return LOGS / name


def info_messages(limit: int = 200) -> list[str]:
    """Real ``NCCL INFO ...`` texts (without their host:pid:tid [dev] prefix) from the executor log."""
    out: list[str] = []
    for line in corpus(YCCL).read_text().splitlines():
        m = _INFO.match(line)
        if m and m.group(1) not in out:
            out.append(m.group(1))
        if len(out) >= limit:
            break
    return out


def _is_row(tokens: list[str]) -> bool:
    return len(tokens) >= 8 and tokens[0].isdigit() and tokens[1].isdigit()


def interleave(text: str, cuts: tuple[int, ...], warn: bool = False) -> str:
    """Cut every result row of ``text`` after the given token counts and put, at each cut, an NCCL
    line of another rank of the same run (its host, pid and device from the rank lines), as mpirun
    forwards a line of rank k while rank 0's row is half printed.  ``warn`` also puts a real-format
    WARN line (``[dev] file.cc:line NCCL WARN``, after the newline NCCL prints first) at the first cut."""
    msgs = info_messages()
    ranks: list[tuple[str, str, str]] = []
    out: list[str] = []
    n = 0
    for line in text.splitlines():
        rk = _RANK.match(line.strip())
        if rk and rk.group(1) == "0":
            ranks = []
        if rk:
            ranks.append((rk.group(3), rk.group(2), rk.group(4)))
        toks = line.split()
        if not (_is_row(toks) and ranks):
            out.append(line)
            continue
        pieces, last = [], 0
        for c in cuts:
            if last < c < len(toks):
                pieces.append(toks[last:c])
                last = c
        pieces.append(toks[last:])
        text_line = "  " + "  ".join(pieces[0])
        for k, piece in enumerate(pieces[1:]):
            host, pid, dev = ranks[(n + k) % len(ranks)] if len(ranks) == 1 else ranks[1 + (n + k) % (len(ranks) - 1)]
            n += 1
            if warn and k == 0:
                out.append(text_line)
                out.append(f"{host}:{pid}:{int(pid) + 77} [{dev}] transport/net_ib.cc:1296 NCCL WARN NET/IB : "
                           f"Got completion from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129")
            else:
                out.append(text_line + f"{host}:{pid}:{int(pid) + 77} [{dev}] {msgs[n % len(msgs)]}")
            text_line = "   " + "  ".join(piece)
        out.append(text_line)
    return "\n".join(out) + "\n"


def sweep_log(sizes: int, info_per_row: int = 3) -> str:
    """A long nccl-tests sweep (``-b 8 -i 8``: ``sizes`` lines, two rows each) with the preamble, rank
    lines and table header of the real 16-rank log, ``info_per_row`` real INFO lines of other ranks
    between rows and every tenth row cut by one, as NCCL_DEBUG=INFO prints through mpirun."""
    base = corpus(GCP).read_text().splitlines()
    head = [ln for ln in base if ln.startswith("#") and "Avg bus" not in ln and "Out of bounds" not in ln]
    ranks = [(m.group(3), m.group(2), m.group(4)) for ln in head if (m := _RANK.match(ln.strip()))]
    msgs = info_messages()
    out = list(head)
    for k in range(sizes):
        size = 8 * (k + 1)
        count = size // 4
        t = 120.0 + k % 97
        bw = size / t / 1e3
        cells = [f"{size:12d}", f"{count:12d}", f"{'float':>8s}", f"{'sum':>6s}", f"{-1:6d}",
                 f"{t:7.1f}", f"{bw:6.2f}", f"{bw * 1.875:6.2f}", f"{0:6d}",
                 f"{t - 1:7.1f}", f"{bw:6.2f}", f"{bw * 1.875:6.2f}", f"{0:6d}"]
        for j in range(info_per_row):
            host, pid, dev = ranks[1 + (k + j) % (len(ranks) - 1)]
            out.append(f"{host}:{pid}:{int(pid) + 77} [{dev}] {msgs[(k + j) % len(msgs)]}")
        if k % 10 == 0:
            host, pid, dev = ranks[1 + k % (len(ranks) - 1)]
            out.append(" ".join(cells[:5]) + f"{host}:{pid}:{int(pid) + 77} [{dev}] {msgs[k % len(msgs)]}")
            out.append("  " + " ".join(cells[5:]))
        else:
            out.append(" ".join(cells))
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 12.3456", "#"]
    return "\n".join(out) + "\n"
