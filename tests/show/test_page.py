"""``collc show`` without a browser: every golden file, a shard directory, a third-party file, the
pages' content (self-contained, bounded size) and the --html of compare and tune."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collc.cli import main
from collc.show.data import AGGREGATE_RANKS
from tests._shared import have, missing, shared
from tests.show._pages import golden_cases, show

#: plotly.js alone is about 4.9 MB; what a page adds must stay small.
PLOTLY_JS = 5_000_000
MAX_DATA = 1_500_000


def _self_contained(text: str) -> None:
    assert not re.search(r"<script[^>]+src=", text), "a script loaded from elsewhere"
    assert "cdn.plot.ly" not in text.split("</script>", 1)[1]     # no CDN reference after the inlined library
    assert text.count("Plotly.newPlot") >= 1
    assert len(text.encode()) < PLOTLY_JS + MAX_DATA


@pytest.mark.parametrize("case", golden_cases(), ids=lambda c: f"{c[0].parent.name}/{c[0].name}")
def test_every_golden_file(case: tuple[Path, str], tmp_path: Path) -> None:
    path, topo = case
    dialect = ["--dialect", "legacy"] if "legacy" in path.name else []
    text = show(path, topo, tmp_path / "p.html", "--no-others", *dialect).read_text()
    _self_contained(text)
    assert "check</td><td class=\"ok\">passed" in text
    assert 'data-links="' in text and 'data-timeline-rows="0"' not in text


def test_shard_directory(tmp_path: Path) -> None:
    assert main(["build", "--topology", "torus:4x4", "--algorithm", "swing", "--collective", "allreduce",
                 "--shard-per-rank", "-o", str(tmp_path / "shards")]) == 0
    text = show(tmp_path / "shards", "torus:4x4", tmp_path / "s.html", "--no-others").read_text()
    _self_contained(text)
    assert "one file per rank" in text and 'data-links="64"' in text


def test_others_and_facts(tmp_path: Path) -> None:
    """The per-size view holds the other algorithms that apply; the facts name the command."""
    assert main(["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce",
                 "-o", str(tmp_path / "r.xml")]) == 0
    text = show(tmp_path / "r.xml", "ring:4", tmp_path / "r.html").read_text()
    assert "collc show" in text and "--topology ring:4" in text
    assert "other algorithms: as collc compare times them" in text
    assert '"name":"recursive-doubling"' in text or "recursive-doubling" in text   # another family
    assert "threadblocks per GPU" in text and "parser nodes per rank" in text


@pytest.mark.skipif(not have("msccl-corpus"), reason=missing("msccl-corpus") if not have("msccl-corpus") else "")
def test_third_party_file(tmp_path: Path) -> None:
    path = shared("msccl-corpus", "rccl", "msccl-algorithms", "allreduce-allpairs-8n-ll-32tb.xml")
    if not path.exists():
        pytest.skip(f"{path} is not in the corpus")
    text = show(path, "switch:8", tmp_path / "t.html", "--no-others", "--dialect", "rccl").read_text()
    _self_contained(text)
    assert "allreduce_pairs" in text


def test_aggregate_mode(tmp_path: Path) -> None:
    """Above 256 ranks the page draws aggregates and says so (a 288-rank torus keeps the test short)."""
    assert AGGREGATE_RANKS == 256
    assert main(["build", "--topology", "torus:16x18", "--algorithm", "ring", "--collective", "allgather",
                 "-o", str(tmp_path / "big.xml")]) == 0
    text = show(tmp_path / "big.xml", "torus:16x18", tmp_path / "big.html", "--no-others").read_text()
    _self_contained(text)
    assert 'data-aggregate="1"' in text and "drawn as aggregates per torus dimension" in text
    assert "sampled ranks" in text


def test_compare_and_tune_html(tmp_path: Path) -> None:
    common = ["--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring", "--algorithm",
              "recursive-halving-doubling", "--model", "step", "--sizes", "1KiB:1MiB"]
    assert main(["compare", *common, "--html", str(tmp_path / "c.html")]) == 0
    text = (tmp_path / "c.html").read_text()
    _self_contained(text)
    assert "recursive-halving-doubling" in text and "upper bound" in text
    assert main(["tune", *common, "-o", str(tmp_path / "tuned"), "--html", str(tmp_path / "t.html")]) == 0
    assert "window " in (tmp_path / "t.html").read_text()


def test_bench_report_html(tmp_path: Path) -> None:
    # a log the repository ships (a DGX A100 allreduce run where MSCCL ran): no corpus needed
    log = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "dgx-a100-schedule.log"
    algos = tmp_path / "algos"
    algos.mkdir()
    assert main(["build", "--topology", "dgx-a100", "--algorithm", "ring", "--collective", "allreduce",
                 "--min-bytes", "1MiB", "--max-bytes", "64MiB", "-o", str(algos / "ar.xml")]) == 0
    assert main(["bench", "report", str(log), "--xml", str(algos), "--topology", "dgx-a100",
                 "-o", str(tmp_path / "rep"), "--html", str(tmp_path / "rep.html")]) == 0
    text = (tmp_path / "rep.html").read_text()
    _self_contained(text)
    assert "measured (in-place" in text and "collc prediction" in text
