"""Names people type: machine aliases, --version, and "did you mean" for every unknown name.

The error cases reuse the bad-input harness (exit 2, one line of at most 300 characters that
names the value, no traceback, nothing left behind) and add that the line offers the nearest
names and the command listing them all instead of a list cut short.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

import collc
from collc.cli import _parser, main
from collc.inputs import MAX_MESSAGE
from collc.topology import parse_spec
from collc.topology.model import Topology
from collc.topology.spec import ALIASES, FAMILIES, expand_alias, list_aliases
from tests.test_bad_input import _snapshot

Capture = pytest.CaptureFixture[str]
REPO = Path(__file__).resolve().parent.parent


def _fabric(t: Topology) -> tuple[int, int, list[tuple[int, int, float, float, int]]]:
    """What a schedule sees of a topology: ranks, switches and links (not its name)."""
    return t.nranks, t.nswitches, sorted((x.src, x.dst, x.bandwidth, x.latency, x.multiplicity) for x in t.links)


# ---------------------------------------------------------------------- aliases
@pytest.mark.parametrize("alias, spec", [
    ("dgx-a100", "a100:1x8"), ("dgx-a100:1", "a100:1x8"), ("dgx-a100:4", "a100:4x8"),
    ("dgx-h100", "h100:1x8"), ("dgx-h100:2", "h100:2x8"), ("mi300x", "mi300x:1"), ("mi250", "mi250:1"),
    ("h100", "h100:1x8"), ("a100", "a100:1x8"),
])
def test_alias_expands_to_its_family(alias: str, spec: str) -> None:
    assert expand_alias(alias) == spec
    assert parse_spec(alias) == parse_spec(spec)


def test_a_family_name_with_arguments_stays_the_family() -> None:
    assert expand_alias("mi250:2") is None and parse_spec("mi250:2").nranks == 32
    assert parse_spec("mi300x:2").nranks == 16


def _tuned_specs() -> dict[str, str]:
    """scripts/build_schedules.py's TUNED and FABRICS: directory -> the spec it was built on."""
    spec = importlib.util.spec_from_file_location("build_schedules", REPO / "scripts" / "build_schedules.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {d: s for d, s, _, _ in [*mod.TUNED, *mod.FABRICS]}


@pytest.mark.parametrize("alias, directory", [
    ("dgx-a100", "dgx-a100-executor"), ("dgx-h100", "dgx-h100-executor"), ("mi300x", "mi300x-rccl"),
    ("mi250", "mi250-16gcd-rccl"), ("dgx-a100:2", "a100-2x8-executor"), ("mi250:2", "mi250-2x16-rccl"),
])
def test_alias_is_the_fabric_its_prebuilt_directory_was_tuned_on(alias: str, directory: str) -> None:
    built_on = _tuned_specs()[directory]
    assert (REPO / "schedules" / directory).is_dir()
    assert _fabric(parse_spec(alias)) == _fabric(parse_spec(built_on)), (alias, built_on)


def test_h100_and_mi300x_figures() -> None:
    h = parse_spec("dgx-h100:2")
    assert h.link(0, 16).bandwidth == 450.0                  # NVLink4: 900 GB/s bidirectional per GPU
    nic_bw = {x.bandwidth for x in h.links if x.src < 16 and x.dst >= 18}
    assert nic_bw == {50.0}                                   # 400 Gb/s per NIC
    m = parse_spec("mi300x")
    assert all(len(m.out_neighbors(r)) == 7 for r in m.ranks)          # 7 xGMI links per GPU
    assert sum(m.link(0, p).bandwidth for p in range(1, 8)) * 2 == 896.0   # AMD's aggregate figure
    assert parse_spec("mi300x:3").hamiltonian_cycle() is not None


def test_list_topologies_shows_aliases_and_expansions(capsys: Capture) -> None:
    assert main(["list", "topologies"]) == 0
    out = capsys.readouterr().out
    for typed, expands, _ in list_aliases():
        assert any(line.split()[:3] == [typed, "=", expands] for line in out.splitlines()), typed
    assert "dgx-a100[:N]" in out and "a100:Nx8" in out
    assert set(ALIASES) - set(FAMILIES) >= {"dgx-a100", "dgx-h100"}


@pytest.mark.parametrize("argv", [
    ["topology", "show", "dgx-h100"],
    ["list", "algorithms", "--topology", "dgx-a100:2", "--collective", "allgather"],
    ["compare", "--topology", "mi300x", "--collective", "allreduce", "--algorithm", "ring", "--sizes", "1MiB",
     "--model", "step"],
])
def test_aliases_are_accepted_everywhere_a_spec_is(argv: list[str], capsys: Capture) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().out


def test_build_on_an_alias(tmp_path: Path, capsys: Capture) -> None:
    assert main(["build", "--topology", "dgx-h100", "--algorithm", "ring", "--collective", "allreduce",
                 "-o", str(tmp_path / "r.xml")]) == 0
    assert "allreduce on 8 ranks" in capsys.readouterr().out


# ---------------------------------------------------------------------- --version
def test_version_matches_pyproject(capsys: Capture) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert collc.__version__ == version
    with pytest.raises(SystemExit) as info:
        _parser(bench=False).parse_args(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"collc {version}\n"
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"collc {version}\n"


# ---------------------------------------------------------------------- did you mean
def _topo_args(spec: str) -> list[str]:
    return ["topology", "show", spec]


BUILD = ["build", "--topology", "ring:8", "--collective", "allreduce", "-o", "{d}/out.xml"]

#: (id, argv, what the line must contain: the offending value, the suggestion, the listing)
CASES = [
    ("algorithm-forestcol", [*BUILD, "--algorithm", "forestcol"],
     ["'forestcol'", "did you mean 'forestcoll'", "`collc list algorithms`"]),
    ("algorithm-unrelated", [*BUILD, "--algorithm", "zzzzzz"], ["'zzzzzz'", "`collc list algorithms`"]),
    ("family-mi300", _topo_args("mi300:8"), ["'mi300'", "did you mean 'mi300x'", "`collc list topologies`"]),
    ("family-toru", _topo_args("toru:4x4"), ["'toru'", "'torus'", "`collc list topologies`"]),
    ("alias-dgx-a10", _topo_args("dgx-a10:2"), ["'dgx-a10'", "'dgx-a100'"]),
    ("alias-options", _topo_args("dgx-a100:2:bw=5"), ["dgx-a100", "no options"]),
    ("alias-zero-boxes", _topo_args("dgx-h100:0"), ["dgx-h100", "at least 1"]),
    ("family-long", _topo_args("x" * 300 + ":4"), ["unknown topology family", "`collc list topologies`"]),
    ("collective", ["build", "--topology", "ring:8", "--algorithm", "ring", "--collective", "allredcue",
                    "-o", "{d}/out.xml"], ["'allredcue'", "did you mean 'allreduce'", "`collc list collectives`"]),
    ("compare-collective", ["compare", "--topology", "ring:4", "--collective", "alltoal", "--algorithm", "ring"],
     ["'alltoal'", "'alltoall'"]),
    ("choice-list", ["list", "algorithm"], ["invalid choice", "'algorithm'", "did you mean 'algorithms'"]),
    ("choice-command", ["bulid"], ["invalid choice", "did you mean 'build'"]),
    ("choice-protocol", [*BUILD, "--algorithm", "ring", "--protocol", "ll"], ["invalid choice", "'LL'"]),
    ("choice-dialect", [*BUILD, "--algorithm", "ring", "--dialect", "rcl"], ["did you mean 'rccl'"]),
    ("choice-action", ["topology", "shw", "ring:8"], ["did you mean 'show'"]),
    ("unrecognized-option", [*BUILD, "--algorithm", "ring", "--instanses", "2"],
     ["unrecognized arguments: --instanses 2", "did you mean '--instances'", "`collc build --help`"]),
    ("unrecognized-subaction", ["topology", "show", "ring:8", "--jsn"],
     ["--jsn", "did you mean '--json'", "`collc topology show --help`"]),
    ("unrecognized-compare", ["compare", "--topology", "ring:4", "--collective", "allreduce", "--plto", "x.png"],
     ["--plto", "did you mean '--plot'"]),
    ("list-why-needs-topology", ["list", "algorithms", "--why"], ["--topology"]),
    ("list-filter-on-topologies", ["list", "topologies", "--collective", "allreduce"], ["list algorithms"]),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("names")


@pytest.mark.parametrize("argv, needles", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unknown_names_suggest_and_never_truncate(scratch: Path, capsys: Capture, argv: list[str],
                                                  needles: list[str]) -> None:
    args = [a.replace("{d}", str(scratch)) for a in argv]
    before = _snapshot(scratch)
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("collc: "), err
    assert len(lines[0]) <= len("collc: ") + MAX_MESSAGE and not lines[0].endswith("..."), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in err and _snapshot(scratch) == before


# ---------------------------------------------------------------------- help on every option
def _walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            missing += [f"{path} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
            if not (action.help or "").strip():
                missing.append(f"{path} (its subcommand)")
            for name, sub in action.choices.items():
                if name != "bench":    # bench's options are documented on their own branch
                    missing += _walk(sub, f"{path} {name}")
            continue
        if not (action.help or "").strip():
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_subcommand_has_help() -> None:
    parser = _parser(bench=False)
    assert _walk(parser, "collc") == []
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0].choices
    assert {"list", "topology", "build", "check", "simulate", "compare", "tune"} <= set(commands)


def test_module_entry_point_prints_version() -> None:
    import subprocess
    out = subprocess.run([sys.executable, "-m", "collc", "--version"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and out.stdout == f"collc {collc.__version__}\n"
