"""Real logs that ``collc bench parse`` could not read before (issue 27 B, issue 33): rows cut by
other ranks' NCCL lines, failed runs, many logs at once, a long sweep.  Every log is built from
the real lines of the shared corpus (``tests/runtime_tests/_logs.py``); the failure lines use
nccl-tests', NCCL's and Open MPI's own format strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collc.cli import main
from collc.runtime_tests.parse import parse_tests

from tests.runtime_tests._logs import GCP, LOGS, PANLICHEN, YCCL, corpus, interleave, sweep_log

Capture = pytest.CaptureFixture[str]

pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason=f"log corpus not found at {LOGS}")


def _rows(text: str) -> list[tuple[int, str, float, float, int | None, float | None]]:
    return [(r.size, r.placement, r.time_us, r.busbw, r.wrong, r.error) for t in parse_tests(text) for r in t.rows]


# nccl-tests prints the lead cells of a row, then each placement's cells after that test ran: the
# cut points are after the lead (5 cells new format, 4 old) and after each group; every other cut
# is tried too (a thread may print anywhere)
@pytest.mark.parametrize("name, cuts", [
    (GCP, (5,)), (GCP, (9,)), (GCP, (5, 9)), (GCP, (1, 2, 3)), (GCP, (3, 4, 7, 12)),
    (PANLICHEN, (4,)), (PANLICHEN, (3,)), (PANLICHEN, (1, 6)), (PANLICHEN, (2, 4, 7))])
def test_rows_cut_by_other_ranks_info_lines(name: str, cuts: tuple[int, ...]) -> None:
    """Old (``error`` column, ``N/A`` cells, ``sum`` before the host) and new formats: same rows as the
    uncut log, and every inserted line counted as an NCCL line."""
    text = corpus(name).read_text()
    cut = interleave(text, cuts)
    assert cut != text
    assert _rows(cut) == _rows(text)
    inserted = sum(t.info_lines for t in parse_tests(cut)) - sum(t.info_lines for t in parse_tests(text))
    assert inserted == sum(1 for ln in cut.splitlines() if " NCCL INFO " in ln) - text.count(" NCCL INFO ")


def test_warn_line_with_its_source_location_inside_a_row() -> None:
    """NCCL's WARN lines carry ``file.cc:line`` before ``NCCL WARN`` and start with a newline."""
    text = corpus(GCP).read_text()
    cut = interleave(text, (5, 9), warn=True)
    log = parse_tests(cut)[0]
    assert _rows(cut) == _rows(text)
    assert any(w.startswith("NET/IB : Got completion from peer") for w in log.warns)
    assert not log.run_failed          # a WARN alone does not fail the run


def _failed_nccl_log() -> str:
    """The 16-rank log's preamble, a WARN from rank 9 and nccl-tests' and mpirun's failure lines."""
    head = [ln for ln in corpus(GCP).read_text().splitlines() if ln.startswith("#")][:23]
    return "\n".join(head + [
        "ztan-mig-gq73:6734:6801 [1] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.3",
        "ztan-mig-gq73: Test NCCL failure common.cu:1005 'remote process exited or there was a network error / "
        "NET/IB : Got completion from peer 10.0.0.2<45678> with status=12'",
        " .. ztan-mig-gq73 pid 6734: Test failure common.cu:891",
        " .. ztan-mig-gq73 pid 6734: Test failure all_reduce.cu:90",
        "-------------------------------------------------------",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "-------------------------------------------------------",
        "--------------------------------------------------------------------------",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        "  Process name: [[20250,1],9]",
        "  Exit code:    3",
        "--------------------------------------------------------------------------"]) + "\n"


def _failed_msccl_log() -> str:
    """The executor log up to rank 1 loading its algorithm files, then the parser's WARN (a string of
    the executor's msccl_parser) and nccl-tests' failure lines."""
    lines = corpus(YCCL).read_text().splitlines()
    stop = next(i for i, ln in enumerate(lines) if "Using MSCCL Algo files from" in ln)
    return "\n".join(lines[:stop + 1] + [
        "",
        "lm2:1708222:1708256 [1] misc/msccl/msccl_parser.cc:331 NCCL WARN MSCCL: protocol LL256 is not supported.",
        "lm2: Test NCCL failure common.cu:1279 'invalid usage (run with NCCL_DEBUG=WARN for details) / '",
        " .. lm2 pid 1708222: Test failure common.cu:1147"]) + "\n"


def test_failed_run_names_rank_host_and_line(tmp_path: Path, capsys: Capture) -> None:
    log_path = tmp_path / "failed.log"
    log_path.write_text(_failed_nccl_log())
    (log,) = parse_tests(log_path.read_text(), str(log_path))
    assert log.run_failed and not log.rows
    by_source = {(f.source, f.host, f.ranks) for f in log.failures}
    assert ("nccl-tests", "ztan-mig-gq73", (9,)) in by_source          # pid 6734 is rank 9 on the rank lines
    assert ("mpirun", None, (9,)) in by_source                         # Process name: [[20250,1],9]
    assert log.failures[0].line.startswith("ztan-mig-gq73: Test NCCL failure common.cu:1005")
    assert main(["bench", "parse", str(log_path)]) == 1                # the run failed: a failed check, not bad input
    out = capsys.readouterr().out
    assert "RUN FAILED" in out and "nccl-tests (host ztan-mig-gq73, rank 9): ztan-mig-gq73: Test NCCL failure" in out
    assert "NCCL WARN: NET/IB : Got completion from peer" in out
    assert main(["bench", "parse", str(log_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)[0]
    assert doc["run_failed"] is True and doc["rows"] == []
    assert doc["failures"][0] == {"source": "nccl-tests", "line": log.failures[0].line, "host": "ztan-mig-gq73",
                                  "ranks": [9]}


def test_failed_msccl_load(tmp_path: Path, capsys: Capture) -> None:
    log_path = tmp_path / "msccl.log"
    log_path.write_text(_failed_msccl_log())
    (log,) = parse_tests(log_path.read_text(), str(log_path))
    assert log.run_failed and log.msccl_state == "load failed"
    assert any(f.source == "nccl-tests" and f.ranks == (1,) for f in log.failures)      # pid 1708222
    assert log.verdict.status == "not-ran" and "protocol LL256 is not supported" in log.verdict.reason
    assert main(["bench", "parse", str(log_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)[0]
    assert doc["msccl_state"] == "load failed" and doc["verdict"]["status"] == "not-ran"
    assert main(["bench", "parse", str(log_path)]) == 1
    assert "MSCCL load failed" in capsys.readouterr().out


def test_log_with_rows_then_a_crash_is_a_failed_run(tmp_path: Path, capsys: Capture) -> None:
    text = corpus(GCP).read_text().splitlines()
    crash = "\n".join(text[:30] + _failed_nccl_log().splitlines()[23:]) + "\n"
    (log,) = parse_tests(crash)
    assert len(log.rows) == 2 * 7 and log.run_failed       # file lines 24-30: 7 sizes, then the crash
    p = tmp_path / "crash.log"
    p.write_text(crash)
    assert main(["bench", "parse", str(p)]) == 1
    assert "1 failed run(s)" in capsys.readouterr().out


def test_summary_over_many_logs_and_require_msccl(capsys: Capture) -> None:
    paths = [str(p) for p in sorted(LOGS.glob("*.txt"))]
    assert main(["bench", "parse", *paths]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("summary:")
    lines = out[start + 1:start + 1 + len(paths)]
    assert [ln.split(":")[0].strip() for ln in lines] == paths
    gcp = next(ln for ln in lines if GCP in ln)
    assert gcp.endswith("allreduce, 8B..8GiB (31 sizes), MSCCL unknown, peak busbw 338.82 GB/s")
    stock = [ln for ln in lines if "stock NCCL (no MSCCL configured)" in ln]
    assert len(stock) == 2 and all(("gcp-a4" in ln) or ("oci_4x" in ln) for ln in stock)
    assert out[start + 1 + len(paths)].startswith("total: 13 test(s) in 13 file(s): MSCCL ran in 0, did not run in 1, "
                                                  "stock NCCL in 2, unknown in 10")
    assert main(["bench", "parse", *paths, "--require-msccl"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("collc: --require-msccl: MSCCL did not run in 13 of 13 test(s)")


def test_stock_nccl_is_called_stock(capsys: Capture) -> None:
    path = next(LOGS.glob("gcp-a4_*"))
    assert main(["bench", "parse", str(path)]) == 0
    out = capsys.readouterr().out
    assert "STOCK NCCL RUN (no MSCCL configured)" in out and "the XML was not used" not in out
    assert "#wrong format" not in out and "table with a #wrong column (nccl-tests >= 2.13)" in out


def test_long_sweep_parses_every_row() -> None:
    """A sweep of 20 000 sizes with three INFO lines of other ranks per row and every tenth row cut:
    every row, in order (the full-size figure is ``benchmarks/bench_parse_speed.py``)."""
    text = sweep_log(20_000)
    (log,) = parse_tests(text)
    assert len(log.rows) == 40_000
    assert log.sizes == [8 * (k + 1) for k in range(20_000)]
    assert log.info_lines == 3 * 20_000 + 2_000
    assert log.rows[-1].busbw == pytest.approx(160000 / (120.0 + 19_999 % 97) / 1e3 * 1.875, abs=0.01)


def test_the_later_rccl_launch_line_counts_as_a_launch() -> None:
    """Later RCCL logs its per-launch line as ``MSCCL: typeMask M fnIndex F Setup Kernel finished`` (subsystem
    COLL, hence ``NCCL_DEBUG_SUBSYS=INIT,ENV,COLL``): a run logged that way ran MSCCL, exactly as one logged
    with the executor's spelling."""
    from collc.runtime_tests.parse import parse_text, verdict

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "dgx-a100-schedule.log").read_text()
    rccl = text.replace("MSCCL: Setup Kernel finished", "MSCCL: typeMask 3 fnIndex 12 Setup Kernel finished")
    assert rccl != text
    ours, theirs = verdict(parse_text(text)), verdict(parse_text(rccl))
    assert ours.status == theirs.status == "ran", (ours, theirs)
