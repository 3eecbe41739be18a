"""Property: any command line drawn from the registry's own lists keeps the CLI contract.

Algorithms, their parameters, collectives and topology families come from the
registries (``algorithms()``, ``CollKind``, ``list_families()``), mixed with small
sizes, odd values and a little garbage.  Whatever the line, ``collc`` exits 0, 1 or 2,
never with a traceback, and on 2 prints exactly one line on stderr.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collc.cli import main
from collc.frontends.registry import algorithms
from collc.ir.collective import CollKind
from collc.outputs import pending
from collc.topology import list_families

ALGOS = [a.name for a in algorithms()]
PARAMS = sorted({(p.name, tuple(p.choices)) for a in algorithms() for p in a.params})
FAMILIES = [name for name, _, _ in list_families()]
COLLECTIVES = [k.value for k in CollKind]
GARBAGE = st.sampled_from(["", "x", "-1", "0", "nan", "inf", "1e400", "9" * 30, "a=b", "\x1b[1m", "é", ":", ","])

small = st.integers(min_value=0, max_value=9).map(str)
dims = st.lists(st.integers(min_value=0, max_value=5).map(str), min_size=1, max_size=3).map("x".join)
options = st.one_of(st.none(), st.sampled_from(["uni", "bw=25", "lat=0.5", "bw=0", "bw=-2", "lat=nan", "bogus",
                                                "bw=1,lat=2", "2x2", "4x4", "2x2,bw=3"]))
EXAMPLES = [example for _, _, example in list_families()]
SMALL_SPECS = ["ring:4", "ring:8", "switch:4", "switch:8", "complete:4", "hypercube:2", "hypercube:3", "torus:4",
               "torus:2x2", "torus:4x4", "mesh:2x2", "mesh:2x4", "dgx2:4", "bigraph:2x4", "hyperx:2x2"]


def mostly(valid: st.SearchStrategy[str], odd: st.SearchStrategy[str] = GARBAGE) -> st.SearchStrategy[str]:
    """``valid`` four times in five, else ``odd``."""
    return st.integers(0, 4).flatmap(lambda i: odd if i == 0 else valid)


@st.composite
def random_specs(draw: st.DrawFn) -> str:
    family = draw(mostly(st.sampled_from(FAMILIES)))
    args = draw(st.one_of(small, dims, GARBAGE))
    opt = draw(options)
    return f"{family}:{args}" + (f":{opt}" if opt is not None else "")


def specs() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(SMALL_SPECS), st.sampled_from(EXAMPLES), random_specs())


@st.composite
def param_args(draw: st.DrawFn, own: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> list[str]:
    """``--param`` pairs, mostly the algorithm's own (``own``), sometimes another's."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        name, choices = draw(mostly(st.sampled_from(own), st.sampled_from(PARAMS)) if own else
                             st.sampled_from(PARAMS))
        value = draw(mostly(st.sampled_from(list(choices) or ["true", "false", "2"]), st.one_of(small, GARBAGE)))
        out += ["--param", f"{name}={value}"]
    return out


def sizes() -> st.SearchStrategy[str]:
    return mostly(st.sampled_from(["1KiB", "1KiB:4KiB", "64KiB,1MiB"]),
                  st.one_of(st.sampled_from(["0", "1ZiB", "4:2", "-3"]), GARBAGE))


@st.composite
def command_lines(draw: st.DrawFn, d: str) -> list[str]:
    cmd = draw(st.sampled_from(["list", "topology", "build", "check", "simulate", "compare", "tune"]))
    algo = draw(st.sampled_from(algorithms()))
    own = tuple((p.name, tuple(p.choices)) for p in algo.params)
    alg = draw(mostly(st.just(algo.name), st.one_of(st.sampled_from(ALGOS), GARBAGE)))
    coll = draw(mostly(st.sampled_from(sorted(k.value for k in algo.collectives)),
                       st.one_of(st.sampled_from(COLLECTIVES), GARBAGE)))
    example = re.search(r"--topology (\S+)", algo.example)
    spec = draw(mostly(st.just(example.group(1)) if example else specs(), specs()))
    if cmd == "list":
        return ["list"] + draw(st.lists(st.one_of(st.sampled_from(["algorithms", "topologies", "collectives"]),
                                                  GARBAGE), max_size=2))
    if cmd == "topology":
        return ["topology", "show", spec] + draw(st.sampled_from([[], ["--json"]]))
    extra: list[str] = []
    for flag, values in (("--chunks", mostly(st.sampled_from(["1", "2", "3"]))),
                         ("--instances", mostly(st.sampled_from(["1", "2"]))),
                         ("--root", mostly(small)),
                         ("--max-bytes", mostly(st.sampled_from(["0", "1MiB", str(1 << 63)]))),
                         ("--protocol", st.sampled_from(["Simple", "LL", "LL128", "x"])),
                         ("--dialect", st.sampled_from(["executor", "rccl", "legacy", "x"]))):
        if draw(st.booleans()) and draw(st.booleans()):
            extra += [flag, draw(values)]
    if cmd == "build":
        out = draw(mostly(st.sampled_from([f"{d}/o.xml", f"{d}/sh"]),
                          st.sampled_from([f"{d}/missing/o.xml", f"{d}", "/dev/null"])))
        shard = ["--shard-per-rank"] if draw(st.booleans()) and draw(st.booleans()) else []
        return ["build", "--topology", spec, "--algorithm", alg, "--collective", coll, *draw(param_args(own)),
                *extra, *shard, "-o", out]
    if cmd == "check":
        return ["check", draw(st.sampled_from([f"{d}/good.xml", f"{d}", "/dev/null", f"{d}/absent.xml"]))] + \
            [e for e in extra if e in ("--dialect",)]
    if cmd == "simulate":
        return ["simulate", f"{d}/good.xml", "--topology", draw(mostly(st.sampled_from(["ring:4", "switch:4"]),
                                                                        specs())),
                "--sizes", draw(sizes()), "--model", draw(st.sampled_from(["event", "step"])), *extra[-2:]]
    with_params = alg + (":" + ",".join(a.split("=", 1)[0] + "=" + a.split("=", 1)[1]
                                        for a in draw(param_args(own))[1::2]) if draw(st.booleans()) else "")
    base = ["--topology", spec, "--collective", coll,
            "--algorithm", with_params, "--sizes", draw(sizes()), "--model", "step"]
    if cmd == "compare":
        return ["compare", *base, "--plot", draw(mostly(st.sampled_from([f"{d}/c.png", f"{d}/c.svg"]),
                                                       st.just(f"{d}/c.txt")))]
    return ["tune", *base, "-o", draw(mostly(st.just(f"{d}/tuned"), st.just(f"{d}/good.xml")))]


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("fuzz")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce",
                     "-o", str(d / "good.xml")]) == 0
    return str(d)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_command_lines_keep_the_contract(good_dir: str, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory(dir=good_dir) as d:
        argv = data.draw(command_lines(d))
        if argv[0] in ("check", "simulate"):
            argv = [a.replace(f"{d}/good.xml", f"{good_dir}/good.xml") for a in argv]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)      # any exception other than the CLI's own would be a traceback
        text = err.getvalue()
        assert code in (0, 1, 2), (argv, code, text)
        assert "Traceback" not in text
        if code == 2:
            assert text.count("\n") == 1 and text.startswith("collc: "), (argv, text)
        assert pending() == []
        leftovers = [n for n in os.listdir(d) if n.startswith(".")]
        assert leftovers == [], (argv, leftovers)
