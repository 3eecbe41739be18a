"""ForestColl pipelining that follows the packing (issue 29): the emitted file reaches 90% of
its own congestion bound in the event model at 1 GiB, or the build says why it cannot
(docs/forestcoll.md, "Pipelining that follows the packing")."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from collc.cli import main
from collc.limits import Dialect
from collc.driver import compile_xml
from collc.frontends.forestcoll import (LayoutWarning, forest, messages, pick_pieces, plan_and_prediction, rail_of,
                                        tree_pieces)
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.sim.event import simulate_program
from collc.topology import parse_spec

SIZE = 1 << 30


def _fraction(spec: str, k: str, dialect: Dialect = Dialect.EXECUTOR) -> tuple[float, list[str]]:
    """Event-model algbw of the default build over its model algbw, and the warnings it gave."""
    topo = parse_spec(spec)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        out = compile_xml(topo, "forestcoll", CollKind.ALLGATHER, params={"k": k}, dialect=dialect)
    assert out.report.ok, [f.message for f in out.report.errors()][:3]
    # the runtime's limits in both dialects: 32 channels, 64 tbs per rank, 64 steps per tb
    assert out.program.nchannels <= 32 and max(len(g.tbs) for g in out.program.gpus) <= 64
    assert max(len(t.steps) for g in out.program.gpus for t in g.tbs) <= 64
    sim = simulate_program(out.program, topo, [SIZE], alpha_us=5.0)[0].algbw
    return sim / float(forest(topo, k).algbw), [str(w.message) for w in said if w.category is LayoutWarning]


def test_a100_2x8_at_the_optimal_k_reaches_90_percent() -> None:
    """k = 13, 26 trees of multiplicity up to 13 on a lane each: 320.67 of 346.67 GB/s (92.5%)."""
    frac, said = _fraction("a100:2x8", "opt")
    assert frac >= 0.9 and not said


def test_pieces_count_the_runtime_messages_of_trees_with_multiplicity() -> None:
    """At k = 4 every a100:2x8 tree carries 4 chunks a piece.  25 pieces (the k = 1 choice) send
    two messages a step (671 KB chunks, 3 to a 2 MiB slice), 32 pieces one, so the message count is
    not monotone in P; 32 pieces simulate 95.5% (the former 25: 90.8%)."""
    fo = forest(parse_spec("a100:2x8"), "4")
    assert messages(fo.trees, 64, 25) == 50 and messages(fo.trees, 64, 32) == 32
    assert pick_pieces(fo, fo.trees, 48) == 32
    frac, said = _fraction("a100:2x8", "4")
    assert frac >= 0.9 and not said


def test_mi250_8_plus_8_default_reaches_90_percent_in_both_dialects() -> None:
    for dialect in (Dialect.EXECUTOR, Dialect.RCCL):
        frac, said = _fraction("mi250:8+8", "auto", dialect)
        assert frac >= 0.9 and not said


def test_shared_lanes_within_the_limits_or_a_warning() -> None:
    """mi250:8+8 at k = 13: 38 trees, more than a lane each fits in 64 tbs per rank, so they
    share 16 lanes, 2 to a tb; 34 trees take 24 pieces and 4 take 48 (87.0%; one count for all,
    24, gave 86.8%, the former budgeted layout 7 lanes and 2 pieces 61.5%).  Below 90%, so the
    build warns and names k = auto."""
    frac, said = _fraction("mi250:8+8", "opt")
    assert 0.8 <= frac < 0.9
    assert len(said) == 1 and "k=13 is predicted at" in said[0] and "k=auto (k=1" in said[0]
    # shared_prediction: within 3 points of the event model here (87% and 87.0%), and the limit named
    predicted = int(said[0].split("predicted at ")[1].split("%")[0])
    assert abs(predicted - frac * 100) <= 3
    assert "needs 87 tbs on a rank, above the 64 allowed" in said[0]


def test_build_prints_the_layout_warning_as_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fc.xml"
    rc = main(["build", "--topology", "mi250:8+8", "--algorithm", "forestcoll", "--collective", "allgather",
               "--param", "k=opt", "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 0 and out.exists()
    assert len(err) == 1 and err[0].startswith("collc: warning: forestcoll: k=13 is predicted at")


def test_pieces_per_tree_keep_the_fine_pieces_where_a_tree_has_its_tbs_alone() -> None:
    """mi250:8+8 at k = 4: 31 trees on 20 lanes, 2 trees in a few of the tbs.  One count of pieces
    for all held 24 (89.3% of the model); pieces per tree give 25 trees 48 and the 6 that share a
    tb 24, every tb within 48 steps: 90.6%, no warning, in both dialects' limits."""
    topo = parse_spec("mi250:8+8")
    fo = forest(topo, "4")
    lanes, _, share, _ = plan_and_prediction(fo, fo.trees, 16, 1, 1, 16, False, False, rail_of(topo))
    assert share == 2
    cuts = tree_pieces(fo.trees, lanes, 48, 1, 16, 16)
    assert cuts is not None and sorted(set(cuts)) == [24, 48] and cuts.count(48) > cuts.count(24)
    frac, said = _fraction("mi250:8+8", "4")
    assert frac >= 0.9 and not said
    out = compile_xml(topo, "forestcoll", CollKind.ALLGATHER, params={"k": "4"}, dialect=Dialect.RCCL)
    assert out.report.ok and max(len(g.tbs) for g in out.program.gpus) <= 64
    params = dict(out.schedule.provenance.params)
    assert (params["pieces"], params["coarsest"], params["finest"]) == ("48", "24", "48")


@pytest.mark.parametrize("chunks", [2, 3])
def test_pieces_per_tree_count_the_chunks(chunks: int) -> None:
    """With --chunks c a tb's steps are c per piece: the finest pieces are 48 / c and every tb
    still fits the runtime's 64 steps."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LayoutWarning)     # 16 pieces at --chunks 3 are predicted below 90%
        out = compile_xml(parse_spec("mi250:8+8"), "forestcoll", CollKind.ALLGATHER, params={"k": "4"},
                          chunks=chunks)
    assert out.report.ok, [f.message for f in out.report.errors()][:3]
    assert dict(out.schedule.provenance.params)["pieces"] == str(48 // chunks)
    assert max(len(t.steps) for g in out.program.gpus for t in g.tbs) <= 64


def test_tree_pieces_fit_every_tb_or_refuse() -> None:
    """Every tb's steps (a tree's pieces times the steps of one) within 48; a tree that meets
    no other in its tbs keeps the finest pieces; None when a tb cannot hold one piece each."""
    for spec, k, n in (("mi250:8+8", "4", 16), ("mi250:2", "2", 32)):
        topo = parse_spec(spec)
        fo = forest(topo, k)
        lanes, _, _, _ = plan_and_prediction(fo, fo.trees, n, 1, 1, n, False, False, rail_of(topo))
        cuts = tree_pieces(fo.trees, lanes, 48, 1, n, n)
        assert cuts is not None and all(48 % c == 0 for c in cuts)
        per: dict[tuple[int, int, int, int], list[int]] = {}
        for i, t in enumerate(fo.trees):
            for p, c in t.edges:
                per.setdefault((lanes[i], p, c, 0), []).append(i)
                per.setdefault((lanes[i], c, p, 1), []).append(i)
        assert max(sum(cuts[i] for i in on) for on in per.values()) <= 48
        shared = {i for on in per.values() if len(on) > 1 for i in on}
        assert all(cuts[i] == 48 for i in range(len(fo.trees)) if i not in shared)
        assert len(shared) < len(fo.trees) if spec == "mi250:8+8" else len(shared) == len(fo.trees)
    fo = forest(parse_spec("mi250:2"), "opt")     # 72 of its 121 trees on one connection of one lane
    assert tree_pieces(fo.trees, [0] * len(fo.trees), 12, 1, 32, 32) is None


def test_trees_that_share_tbs_three_to_one_are_sent_two_steps_a_hop() -> None:
    """a100:8x8 (k = 1, 64 trees of height 14 on 31 lanes, 3 to a tb): the build warned at
    89.8% of the model; two steps a hop in the tbs' order (``stretch``) and pieces per tree
    give 93.5% (92.6% without the stretch) and no warning."""
    s = build_schedule("forestcoll", parse_spec("a100:8x8"), CollKind.ALLGATHER, params={"k": "1"}, chunks=1,
                       instances=1)
    assert dict(s.provenance.params)["stretch"] == "2"
    frac, said = _fraction("a100:8x8", "1")
    assert frac >= 0.9 and not said
