"""What ``collc list algorithms`` says applies is what ``collc build`` builds (issue: an algorithm was listed
for a topology and a dialect that the build then refused).

Over topologies of every family and odd sizes, every (algorithm, collective) whose registration says it
applies builds, lowers and passes its check for the executor; with ``--dialect``, the listing builds for that
runtime, so a schedule over its limits (threadblocks per GPU) is not listed, and ``tune`` leaves it out of the
comparison with its reason instead of failing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collc.cli import main
from collc.limits import Dialect
from collc.driver import compile_xml
from collc.errors import CollcError
from collc.frontends.registry import algorithms
from collc.ir.collective import CollKind
from collc.topology import parse_spec

SPECS = ("dfc:2x3x4", "dfc:2x2x2", "dfc:3x4", "torus:3x5", "mesh:3x3", "ring:5", "ring:7:uni", "hypercube:2",
         "switch:3", "kautz:2,1", "circulant:8:1,3", "bigraph:2x2", "complete:5", "mi300x", "dgx-h100",
         "torus:2x2x2", "mesh:2x5")


def build_what_applies(spec: str) -> tuple[int, int]:
    """Build every (algorithm, collective) the registry says applies on ``spec``, each passing its check;
    every other one must give a reason.  Returns how many built and how many were refused."""
    topo = parse_spec(spec)
    built = refused = 0
    for alg in algorithms():
        for kind in sorted(alg.collectives, key=lambda k: k.value):
            why = alg.refusal_of_kind(topo, kind)
            if why is not None:
                assert why.strip(), (alg.name, kind.value)
                refused += 1
                continue
            try:
                report = compile_xml(topo, alg.name, kind).report
            except CollcError as exc:
                pytest.fail(f"{alg.name} {kind.value} on {spec} is listed as applying but refused: {exc}")
            assert report.ok, (alg.name, kind.value, spec, report.errors()[:1])
            built += 1
    return built, refused


@pytest.mark.parametrize("spec", SPECS)
def test_what_applies_builds(spec: str) -> None:
    built, _ = build_what_applies(spec)
    assert built > 0


def test_dfc_md_alltoall_on_unequal_sizes_is_refused_by_both() -> None:
    from collc.frontends.registry import get

    topo = parse_spec("dfc:2x3x4")
    why = get("dfc-md").refusal_of_kind(topo, CollKind.ALLTOALL)
    assert why is not None and "equal sizes" in why
    with pytest.raises(CollcError, match="equal sizes"):
        compile_xml(topo, "dfc-md", CollKind.ALLTOALL)
    assert get("dfc-md").refusal_of_kind(parse_spec("dfc:3x3x3"), CollKind.ALLTOALL) is None


def _listed(capsys: pytest.CaptureFixture[str], *argv: str) -> set[str]:
    assert main(["list", "algorithms", *argv]) == 0
    out = capsys.readouterr().out
    return {line.split()[0] for line in out.splitlines()[1:] if line and not line.startswith(("key:", " "))
            and "algorithm(s)" not in line}


def test_list_with_a_dialect_lists_only_what_builds_for_it(capsys: pytest.CaptureFixture[str]) -> None:
    rules = _listed(capsys, "--topology", "switch:64", "--collective", "allreduce")
    rccl = _listed(capsys, "--topology", "switch:64", "--collective", "allreduce", "--dialect", "rccl")
    assert "direct" in rules and "direct" not in rccl and rccl and rccl < rules
    with pytest.raises(CollcError, match="rccl limit"):
        compile_xml(parse_spec("switch:64"), "direct", CollKind.ALLREDUCE, dialect=Dialect.RCCL)
    assert main(["list", "algorithms", "--topology", "switch:64", "--collective", "allreduce", "--dialect", "rccl",
                 "--why"]) == 0
    why = [line for line in capsys.readouterr().out.splitlines() if line.startswith("direct ")]
    assert why and "does not fit the rccl runtime" in why[0]


def test_tune_for_rccl_leaves_out_what_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert main(["tune", "--topology", "switch:64", "--collective", "allreduce", "--dialect", "rccl",
                 "--algorithm", "direct", "--algorithm", "ring", "--sizes", "1KiB,1MiB", "-o", str(out)]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert "direct" in manifest["not_compared"] and "rccl limit" in manifest["not_compared"]["direct"]
    assert {w["candidate"] for w in manifest["windows"]} == {"ring"}
