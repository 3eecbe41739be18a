"""The nccl-tests / rccl-tests parsers on every log of the shared corpus
(``../shared/corpora/nccl-tests-logs``), read in place.  Each expected fact below
was read off the log by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.cli import main
from collc.runtime_tests.parse import parse_file, parse_text, path_per_size

from tests.runtime_tests._shared import shared

LOGS = shared("corpora", "nccl-tests-logs")

# file stem prefix -> (tool, format, collective, source, nranks, hosts, runs, sizes, first size, last size, verdict)
FACTS = {
    "amd-aac10_2node": ("rccl-tests", "wrong", "allreduce", "inferred from the columns", 16, 2, 1, 32, 8,
                        17179869184, "unknown"),
    "amd-aac8_8x": ("rccl-tests", "wrong", "allreduce", "inferred from the columns", 8, 1, 1, 31, 8, 8589934592,
                    "unknown"),
    "gcp-a3mega_2node": ("nccl-tests", "wrong", "allreduce", "inferred from the columns", 16, 2, 1, 31, 8,
                         8589934592, "unknown"),
    "gcp-a4_2node": ("nccl-tests", "wrong", "allgather", "inferred from the columns", 16, 2, 1, 24, 1024,
                     8589934592, "not-ran"),
    "gke_2node": ("nccl-tests", "wrong", "allreduce", "command line", 2, 2, 1, 24, 1024, 8589934592, "unknown"),
    "nccl-tests-issue256": ("nccl-tests", "wrong", "allreduce", "inferred from the columns", 16, 2, 1, 3,
                            1073741824, 9663676416, "unknown"),
    "oci_4x-gb300": ("nccl-tests", "wrong", "alltoall", "banner", 4, 1, 1, 2, 8589934592, 17179869184, "not-ran"),
    "oci_8x-mi355x": ("rccl-tests", "wrong", "alltoall", "banner", 8, 1, 1, 2, 8589934592, 17179869184,
                      "unknown"),
    "panlichen_4node": ("nccl-tests", "error", "allreduce", "inferred from the columns", 32, 4, 25, 25, 64,
                        1073741824, "unknown"),
    "panlichen_8x-h800_allgather": ("nccl-tests", "error", "allgather", "inferred from the columns", 8, 1, 27, 27,
                                    64, 4294967296, "unknown"),
    "panlichen_8x-h800_reducescatter": ("nccl-tests", "error", "reducescatter", "inferred from the columns", 8, 1,
                                        27, 27, 64, 4294967296, "unknown"),
    "rocm-issue2494": ("rccl-tests", "error", "allreduce", "inferred from the columns", 2, 1, 1, 5, 8388608,
                       134217728, "unknown"),
    "yccl_4x-rtxa6000": ("nccl-tests", "wrong", "allgather", "inferred from the columns", 4, 1, 1, 11, 1048576,
                         1073741824, "not-ran"),
}


def _logs() -> list[Path]:
    return sorted(p for p in LOGS.glob("*.txt")) if LOGS.is_dir() else []


def _params() -> list[object]:
    files = _logs()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"log corpus not found at {LOGS}"))]
    return [pytest.param(p, id=p.name) for p in files]


def _facts(path: Path) -> tuple[object, ...]:
    hits = [v for k, v in FACTS.items() if path.name.startswith(k)]
    assert len(hits) == 1, f"{path.name}: no facts recorded for this log (a new corpus file?)"
    return hits[0]


@pytest.mark.parametrize("path", _params())
def test_every_log_parses_with_its_facts(path: Path) -> None:
    tool, fmt, coll, source, nranks, hosts, runs, nsizes, first, last, status = _facts(path)
    log = parse_file(path)
    assert (log.tool, log.fmt, log.collective, log.collective_source) == (tool, fmt, coll, source)
    assert (log.nranks, len(log.hosts), log.runs, len(log.sizes)) == (nranks, hosts, runs, nsizes)
    assert (log.sizes[0], log.sizes[-1]) == (first, last)
    assert log.verdict.status == status
    # every row has both numbers the report needs, and busbw/algbw is the collective's factor
    n = log.nranks
    assert n is not None
    factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "reducescatter": (n - 1) / n,
              "alltoall": (n - 1) / n}[log.collective]
    for r in log.rows:
        if r.algbw >= 10:   # two printed decimals: the ratio is exact to 1% only for large values
            assert r.busbw / r.algbw == pytest.approx(factor, rel=0.01), (r.size, r.placement)


def test_corpus_count() -> None:
    if not LOGS.is_dir():
        pytest.skip(f"log corpus not found at {LOGS}")
    assert len(_logs()) == 13


def _one(prefix: str) -> Path:
    hits = [p for p in _logs() if p.name.startswith(prefix)]
    if not hits:
        pytest.skip(f"{prefix}* not in the corpus at {LOGS}")
    return hits[0]


def test_values_read_off_the_logs() -> None:
    log = parse_file(_one("amd-aac8_8x"))
    first = [r for r in log.rows if r.size == 8]
    assert [(r.placement, r.time_us, r.busbw, r.wrong) for r in first] == [
        ("out-of-place", 19.28, 0.0, 0), ("in-place", 17.24, 0.0, 0)]
    assert log.avg_busbw == [110.464] and log.out_of_bounds == [0] and not log.failed
    big = parse_file(_one("amd-aac10_2node"))
    assert big.versions == {"RCCL": "2.22.3"} and big.hosts == ("gpu-53", "gpu-56")
    assert [r.time_us for r in big.rows if r.size == 17179869184] == [90115.0, 90127.0]


def test_old_error_column_and_missing_columns() -> None:
    legacy = parse_file(_one("rocm-issue2494"))
    assert {r.error for r in legacy.rows} == {0.0} and all(r.wrong is None for r in legacy.rows)
    assert [r.root for r in legacy.rows] == [-1] * 10
    ag = parse_file(_one("panlichen_8x-h800_allgather"))
    assert {r.redop for r in ag.rows} == {"none"} and {r.placement for r in ag.rows} == {"out-of-place"}
    assert all(r.error is None for r in ag.rows)          # printed N/A (validation 0)
    rs = parse_file(_one("panlichen_8x-h800_reducescatter"))
    assert {r.redop for r in rs.rows} == {"sum"}


def test_alltoall_in_place_is_unchecked() -> None:
    for prefix in ("oci_4x-gb300", "oci_8x-mi355x"):
        log = parse_file(_one(prefix))
        assert all(r.wrong is None for r in log.rows if r.placement == "in-place")
        assert all(r.wrong == 0 for r in log.rows if r.placement == "out-of-place")
        assert any("in-place alltoall is not data-checked" in n for n in log.notes)
    mi = parse_file(_one("oci_8x-mi355x"))      # 11-digit size shifts the columns
    assert [r.count for r in mi.rows] == [268435456, 268435456, 536870912, 536870912]


def test_msccl_executor_log_verdict() -> None:
    log = parse_file(_one("yccl_4x-rtxa6000"))
    assert log.versions["NCCL"] == "2.23.4" and log.env["NCCL_ALGO"] == "MSCCL"
    assert log.info_lines > 2000
    assert any("Using MSCCL Algo files from /home/czy/nccl/msccl/build/lib/msccl-algorithms" in m for m in log.msccl)
    assert log.verdict.status == "not-ran" and "Setup Kernel finished" in log.verdict.reason
    assert log.nccl_lazy and any("Connected all rings" in e for e in log.verdict.evidence)
    assert sum(log.launches.values()) == 0
    assert set(path_per_size(log).values()) == {"NCCL"}
    assert [r.busbw for r in log.rows if r.size == 1073741824] == [8.23, 8.27]


def test_info_lines_inside_rows_are_removed() -> None:
    """Cut every row of a real log after its fifth field and put a real INFO line (from
    the executor log) there, as a second thread printing mid-row does: same rows."""
    base = _one("gcp-a3mega_2node").read_text()
    info = next(line for line in _one("yccl_4x-rtxa6000").read_text().splitlines() if "NCCL INFO" in line)
    cut = []
    for line in base.splitlines():
        toks = line.split()
        if toks and toks[0].isdigit() and len(toks) == 13:
            cut.append(" ".join(toks[:5]) + info)
            cut.append("   " + " ".join(toks[5:]))
        else:
            cut.append(line)
    assert parse_text("\n".join(cut), "cut").rows == parse_text(base, "base").rows


def test_cli_parse_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    path = _one("yccl_4x-rtxa6000")
    assert main(["bench", "parse", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"status": "not-ran"' in out and '"placement": "in-place"' in out
    assert main(["bench", "parse", str(path), "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "\033[31mMSCCL DID NOT RUN" in out


def test_cli_parse_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "parse", str(tmp_path / "missing.log")]) == 2
    empty = tmp_path / "empty.log"
    empty.write_text("hello\n")
    assert main(["bench", "parse", str(empty)]) == 2
    assert "no nccl-tests/rccl-tests result rows" in capsys.readouterr().err


def test_concatenated_tests_are_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two real logs one after the other (as a script looping over the tests writes them): two
    tests, each with exactly the rows it has alone; per-size runs of one test stay one."""
    from collc.runtime_tests.parse import LogParseError, parse_tests

    a, b = _one("gcp-a4_2node"), _one("amd-aac8_8x")
    both = parse_tests(a.read_text() + b.read_text(), "both")
    assert [t.collective for t in both] == ["allgather", "allreduce"]
    assert [t.rows for t in both] == [parse_file(a).rows, parse_file(b).rows]
    assert len(parse_tests(_one("panlichen_4node").read_text())) == 1
    joined = tmp_path / "joined.log"
    joined.write_text(a.read_text() + b.read_text())
    with pytest.raises(LogParseError, match="holds 2 different tests"):
        parse_file(joined)
    assert main(["bench", "parse", str(joined)]) == 0
    assert "2 test(s) in 1 file(s) parsed" in capsys.readouterr().out
