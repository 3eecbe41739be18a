"""Output a person can read: compact listings, one row per compare candidate with ties, plots
with a colour and marker per series and sizes in B/KiB/MiB/GiB, tune's count multiples."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from collc.backends.msccl_xml import read_xml
from collc.cli import main
from collc.frontends.registry import algorithms
from collc.ir.collective import CollKind
from collc.sim.runner import ModelParams, Row, count_multiple, selected
from collc.topology import parse_spec
from collc.tuning import TIE_TOLERANCE, Comparison, comparison_figure

Capture = pytest.CaptureFixture[str]
REPO = Path(__file__).resolve().parent.parent
STEP = ["--model", "step"]


def _rows(out: str) -> list[str]:
    """The algorithms of a compact listing (rows with the six collective marks)."""
    return [line.split()[0] for line in out.splitlines()
            if len(line.split()) > 7 and set(line.split()[1:7]) <= {"x", "."}]


def _out(capsys: Capture, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


# ---------------------------------------------------------------------- list algorithms
def test_list_algorithms_on_a_topology_shows_only_what_applies(capsys: Capture) -> None:
    out = _out(capsys, "list", "algorithms", "--topology", "ring:8")
    assert max(map(len, out.splitlines())) <= 100
    topo = parse_spec("ring:8")
    applies = [a.name for a in algorithms() if any(a.refusal_of_kind(topo, k) is None for k in a.collectives)]
    assert _rows(out) == applies and "hdrm" not in out and len(applies) < len(algorithms())
    assert _out(capsys, "list", "algorithms", "--topology", "ring:8", "--applicable") == out


def test_list_algorithms_for_one_collective(capsys: Capture) -> None:
    out = _out(capsys, "list", "algorithms", "--topology", "switch:8", "--collective", "alltoall")
    topo = parse_spec("switch:8")
    want = {a.name for a in algorithms() if CollKind.ALLTOALL in a.collectives
            and a.refusal_of_kind(topo, CollKind.ALLTOALL) is None}
    assert set(_rows(out)) == want and "ring" not in _rows(out)
    # without a topology: every algorithm implementing it
    out = _out(capsys, "list", "algorithms", "--collective", "broadcast")
    assert set(_rows(out)) == \
        {a.name for a in algorithms() if CollKind.BROADCAST in a.collectives}


def test_list_why_is_width_limited(capsys: Capture) -> None:
    out = _out(capsys, "list", "algorithms", "--topology", "torus:4x4", "--all")
    assert max(map(len, out.splitlines())) <= 100 and "applies" in out and "no: " in out


# ---------------------------------------------------------------------- compare
def _comparison(values: dict[str, list[float]], sizes: list[int]) -> Comparison:
    series = {lab: [Row(s, 1.0, b, b, True) for s, b in zip(sizes, bw)] for lab, bw in values.items()}
    return Comparison("ring:4", CollKind.ALLREDUCE, sizes, series, {}, [10.0] * len(sizes), "step model")


def test_ties_within_the_tolerance_are_not_a_winner() -> None:
    sizes = [1 << 10, 1 << 20, 1 << 25]
    c = _comparison({"a": [1.0, 5.0, 0.998], "b": [2.0, 4.0, 0.998 * (1 - TIE_TOLERANCE / 2)]}, sizes)
    assert c.standings() == [("b",), ("a",), ("a", "b")]
    rows = {line.split()[0]: line for line in c.table().splitlines()[2:4]}
    assert rows["a"].endswith("1MiB; tie at 32MiB") and rows["b"].endswith("1KiB; tie at 32MiB")
    assert "tie (within 1%): 32MiB a = b" in c.table()
    assert c.to_json()["ties"] == [[], [], ["a", "b"]]
    # just outside the tolerance is a winner again
    c = _comparison({"a": [1.0], "b": [1.0 * (1 - 2 * TIE_TOLERANCE)]}, [1024])
    assert c.standings() == [("a",)] and "tie" not in c.table()


def test_compare_is_one_row_per_candidate_and_writes_no_file(tmp_path: Path, capsys: Capture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = _out(capsys, "compare", "--topology", "torus:4x4", "--collective", "allreduce", "--sizes", "1KiB:1GiB",
               *STEP)
    assert list(tmp_path.iterdir()) == []
    lines = out.splitlines()
    topo = parse_spec("torus:4x4")
    n = sum(a.refusal_of_kind(topo, CollKind.ALLREDUCE) is None for a in algorithms())
    assert lines[1].split()[0] == "candidate" and len(lines[2:2 + n]) == n
    assert lines[2 + n].startswith("upper bound (bandwidth model)")
    assert max(map(len, lines)) <= 100
    assert "best for" in lines[1] and "links 1 GB/s, 5 us per message" in lines[0]


def test_compare_plot_only_where_asked_and_not_both(tmp_path: Path, capsys: Capture) -> None:
    base = ["compare", "--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring", "--sizes", "1KiB"]
    assert main([*base, "--plot", str(tmp_path / "c.svg"), "--no-plot"]) == 2
    assert "not allowed with" in capsys.readouterr().err
    assert main([*base, "--plot", str(tmp_path / "c.svg")]) == 0
    assert (tmp_path / "c.svg").stat().st_size > 1000


def test_no_stray_plots_in_the_repository() -> None:
    assert not list(REPO.glob("compare-*.png"))


# ---------------------------------------------------------------------- plot
def test_plot_has_a_colour_and_marker_per_series_and_readable_sizes() -> None:
    from collc.sim.runner import parse_sizes

    topo = parse_spec("torus:4x4")
    names = [a.name for a in algorithms() if a.refusal_of_kind(topo, CollKind.ALLREDUCE) is None]
    assert len(names) >= 12       # more than the 10 colours of matplotlib's default cycle
    sizes = parse_sizes("1KiB:1GiB")
    # cheap series: the styling does not depend on the values
    c = Comparison("torus:4x4", CollKind.ALLREDUCE, sizes,
                   {n: [Row(s, 1.0, 1.0 + i, 1.0 + i, True) for s in sizes] for i, n in enumerate(names)}, {},
                   [20.0] * len(sizes), "step model, links 50 GB/s, 5 us per message")
    fig, ax = comparison_figure(c)
    fig.canvas.draw()
    lines = ax.get_lines()
    series = [ln for ln in lines if ln.get_label() in names]
    assert len(series) == len(names)
    assert len({ln.get_color() for ln in series}) == len(names)
    assert len({(ln.get_color(), ln.get_marker()) for ln in series}) == len(names)
    assert len({ln.get_marker() for ln in series}) >= 9
    assert [ln.get_label() for ln in lines if ln not in series] == ["upper bound (bandwidth model)"]
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert all(re.fullmatch(r"[0-9.]+(B|KiB|MiB|GiB)", t) for t in ticks), ticks     # no 2^12
    assert {t[-3:] for t in ticks} >= {"KiB", "MiB", "GiB"}
    assert "links 50 GB/s" in ax.get_title() and "5 us per message" in ax.get_title()
    import matplotlib.pyplot as plt
    plt.close(fig)


# ---------------------------------------------------------------------- tune and selection
def test_count_multiple_follows_the_runtime_rule() -> None:
    for path in sorted((REPO / "schedules").glob("*/*.xml")):
        p = read_xml(path).program
        m = count_multiple(p)
        mult = p.ngpus if p.kind in (CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL) else 1
        assert (m * mult) % p.nchunksperloop == 0, path
        assert m == p.nchunksperloop // math.gcd(p.nchunksperloop, mult)
        if p.max_bytes == 0 and p.min_bytes <= (1 << 30):
            assert selected(p, 4 * m * mult * (1 << 20))    # a count of m x 2^20 elements is picked
    fc = read_xml(REPO / "schedules" / "a100-2x8-executor" / "02-allreduce-forestcoll.xml").program
    assert count_multiple(fc) == 256
    assert not selected(fc, 4 * 10_000_000) and selected(fc, 4 * 256 * (1 << 16))   # both in its window


def test_tune_reports_count_multiples_and_its_model(tmp_path: Path, capsys: Capture) -> None:
    out = _out(capsys, "tune", "--topology", "dgx-a100:2", "--collective", "allreduce", "--algorithm", "forestcoll",
               "--algorithm", "ring", "--sizes", "64MiB", *STEP, "-o", str(tmp_path / "t"))
    manifest = json.loads((tmp_path / "t" / "MANIFEST.json").read_text())
    (w,) = manifest["windows"]
    p = read_xml(tmp_path / "t" / w["file"]).program
    assert w["count_multiple"] == count_multiple(p) == 256 and w["candidate"] == "forestcoll"
    assert manifest["model_summary"] == "step model, links 300/25 GB/s, 5 us per message"
    assert "count_multiple" in manifest["count_multiple_note"]
    assert "step model, links 300/25 GB/s" in out and " 256 " in out and "note:" not in out
    out = _out(capsys, "tune", "--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring",
               "--sizes", "1KiB", "-o", str(tmp_path / "e"))
    assert "note: schedules/ was tuned with --model step --alpha 5" in out and "event model" in out


def test_simulate_explains_selected(tmp_path: Path, capsys: Capture) -> None:
    xml = tmp_path / "r.xml"
    _out(capsys, "build", "--topology", "ring:8", "--algorithm", "ring", "--collective", "allreduce", "-o", str(xml))
    out = _out(capsys, "simulate", str(xml), "--topology", "ring:8", "--sizes", "1KiB", *STEP)
    assert "selected: whether the runtime picks this file" in out and "multiple of 8" in out
    assert max(map(len, out.splitlines())) <= 100
    capsys.readouterr()
    assert main(["simulate", "--help"]) == 0
    assert "`selected` column" in capsys.readouterr().out


def test_model_params_default_is_not_the_prebuilt_model() -> None:
    from collc.tuning import PREBUILT_MODEL
    assert ModelParams() != PREBUILT_MODEL and ModelParams("step", 5.0) == PREBUILT_MODEL
