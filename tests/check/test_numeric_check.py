"""The randomized numeric data check (random 64-bit inputs, sums modulo 2^64) for huge programs."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.backends.msccl_xml import parse_xml
from collc.check.xml import checker
from collc.limits import Dialect
from collc.check import check_parsed
from collc.driver import compile_xml
from collc.ir.collective import CollKind
from collc.ir.symbolic import leaf_at, leaf_values
from collc.topology import parse_spec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ring" / "allreduce-ring4.xml"


def _first_step_of(text: str, kind: str, gpu: int) -> int:
    start = text.index(f'<gpu id="{gpu}"')
    return text.index(f'type="{kind}"', start)


def test_leaf_values_are_deterministic_and_addressable() -> None:
    row = leaf_values(7, 3, 8)
    assert (row == leaf_values(7, 3, 8)).all() and len(set(row.tolist())) == 8
    assert row[5] == leaf_at(7, row[:1] * 0 + 3, row[:1] * 0 + 5)[0]
    assert (leaf_values(8, 3, 8) != row).all()


@pytest.mark.parametrize("spec, alg, kind", [("ring:8", "ring", CollKind.ALLREDUCE),
                                             ("switch:8", "direct", CollKind.ALLTOALL),
                                             ("hypercube:3", "recursive-halving-doubling", CollKind.REDUCESCATTER),
                                             ("torus:4x4", "multitree", CollKind.ALLGATHER)])
def test_numeric_check_accepts_correct_programs(spec: str, alg: str, kind: CollKind) -> None:
    text = compile_xml(parse_spec(spec), alg, kind).text
    rep = check_parsed(parse_xml(text), Dialect.EXECUTOR, data_check="numeric")
    assert rep.ok, [f.message for f in rep.errors()]
    assert rep.info["data_check"].startswith("numeric")


def test_numeric_check_finds_a_missing_contribution() -> None:
    text = GOLDEN.read_text()
    at = _first_step_of(text, "rrs", 1)   # receive-reduce-send becomes receive-copy-send
    bad = text[:at] + 'type="rcs"' + text[at + len('type="rrs"'):]
    rep = check_parsed(parse_xml(bad), Dialect.EXECUTOR, data_check="numeric")
    assert not rep.ok
    assert any(f.code == "data" and "wrong sum" in f.message for f in rep.errors())


def test_numeric_check_finds_a_doubled_contribution() -> None:
    text = GOLDEN.read_text()
    at = _first_step_of(text, "rcs", 2)   # forwarding the result becomes reducing it again
    bad = text[:at] + 'type="rrcs"' + text[at + len('type="rcs"'):]
    exact = check_parsed(parse_xml(bad), Dialect.EXECUTOR, data_check="exact")
    numeric = check_parsed(parse_xml(bad), Dialect.EXECUTOR, data_check="numeric")
    assert any("twice" in f.message for f in exact.errors())
    assert any(f.code == "data" and "wrong sum" in f.message for f in numeric.errors())


def test_auto_switches_to_numeric_for_large_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    text = GOLDEN.read_text()
    assert check_parsed(parse_xml(text), Dialect.EXECUTOR).info["data_check"].startswith("exact")
    monkeypatch.setattr(checker, "EXACT_LIMIT", 4)
    assert check_parsed(parse_xml(text), Dialect.EXECUTOR).info["data_check"].startswith("numeric")
