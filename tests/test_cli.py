"""The ``collc`` command line, run in-process through ``collc.cli.main``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from collc.cli import EXAMPLES, _Stages, main
from collc.errors import CollcError
from collc.frontends.registry import algorithms
from collc.sim.runner import parse_size
from collc.ir.collective import CollKind
from collc.topology import list_families, load_file, parse_spec

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def build(capsys: Capture, out: Path, *extra: str, topology: str = "ring:8", algorithm: str = "ring",
          collective: str = "allreduce") -> tuple[int, str, str]:
    return run(capsys, "build", "--topology", topology, "--algorithm", algorithm, "--collective", collective,
               *extra, "-o", str(out))


# 2-rank exchange in which both ranks send 3 pieces before receiving: hangs with Simple at any size
HANGS = """\
<algo name="x" proto="Simple" nchannels="1" nchunksperloop="6" ngpus="2" coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="3" o_chunks="6" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="3" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="3" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="3" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="3" o_chunks="6" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="3" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="3" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="3" cnt="3" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"""


# ---------------------------------------------------------------------- build + check
@pytest.mark.parametrize("dialect", ["executor", "rccl", "legacy"])
def test_build_then_check(tmp_path: Path, capsys: Capture, dialect: str) -> None:
    out = tmp_path / "ring8.xml"
    code, stdout, err = build(capsys, out, "--dialect", dialect)
    assert code == 0, err
    assert err == ""
    assert stdout.startswith(f"wrote {out}: allreduce on 8 ranks, 14 steps") and f"{dialect} dialect" in stdout
    assert [p.name for p in tmp_path.iterdir()] == ["ring8.xml"]
    code, stdout, err = run(capsys, "check", str(out), "--dialect", dialect)
    assert code == 0, stdout
    assert stdout.splitlines()[0] == f"PASS {out} ({dialect})"
    assert stdout.splitlines()[-1] == "1 passed, 0 failed"


def test_legacy_file_fails_the_executor_check(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "legacy.xml"
    assert build(capsys, out, "--dialect", "legacy")[0] == 0
    code, stdout, _ = run(capsys, "check", str(out))
    assert code == 1
    assert "[attribute]" in stdout and "outofplace" in stdout


@pytest.mark.parametrize("extra", [
    ("--chunks", "2", "--instances", "2"),
    ("--protocol", "LL", "--min-bytes", "1KiB", "--max-bytes", "1MiB"),
    ("--outofplace",),
    ("--param", "bidirectional=true"),
])
def test_build_options(tmp_path: Path, capsys: Capture, extra: tuple[str, ...]) -> None:
    out = tmp_path / "t.xml"
    code, _, err = build(capsys, out, *extra)
    assert code == 0, err
    head = out.read_text().splitlines()[0]
    if "--max-bytes" in extra:
        assert 'proto="LL"' in head and 'minBytes="1024"' in head and 'maxBytes="1048576"' in head
    if "--outofplace" in extra:
        assert 'inplace="0" outofplace="1"' in head
    assert run(capsys, "check", str(out))[0] == 0


@pytest.mark.parametrize("algorithm, topology, collective, extra", [
    ("binomial-tree", "switch:8", "broadcast", ("--root", "3")),
    ("binomial-tree", "switch:6", "reduce", ("--param", "root=5")),
    ("recursive-halving-doubling", "hypercube:3", "reducescatter", ()),
    ("direct", "switch:4", "alltoall", ("--inplace",)),
])
def test_build_other_algorithms(tmp_path: Path, capsys: Capture, algorithm: str, topology: str, collective: str,
                                extra: tuple[str, ...]) -> None:
    out = tmp_path / "t.xml"
    code, _, err = build(capsys, out, *extra, topology=topology, algorithm=algorithm, collective=collective)
    assert code == 0, err
    root = [a for a in extra if a.isdigit() or a.startswith("root=")]
    code, stdout, _ = run(capsys, "check", str(out), *(["--root", root[0].removeprefix("root=")] if root else []))
    assert code == 0, stdout


def test_build_is_deterministic(tmp_path: Path, capsys: Capture) -> None:
    a, b = tmp_path / "a.xml", tmp_path / "b.xml"
    assert build(capsys, a, "--chunks", "2")[0] == 0
    assert build(capsys, b, "--chunks", "2")[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_build_overwrites_atomically(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "t.xml"
    out.write_text("old")
    assert build(capsys, out)[0] == 0
    assert out.read_text().startswith("<algo ")
    assert [p.name for p in tmp_path.iterdir()] == ["t.xml"]


def test_check_json(tmp_path: Path, capsys: Capture) -> None:
    good, bad = tmp_path / "good.xml", tmp_path / "bad.xml"
    assert build(capsys, good)[0] == 0
    bad.write_text(HANGS)
    code, stdout, _ = run(capsys, "check", "--json", str(good), str(bad))
    assert code == 1
    data = json.loads(stdout)
    assert [set(d) >= {"path", "ok", "findings"} for d in data] == [True, True]
    assert [(d["path"], d["ok"]) for d in data] == [(str(good), True), (str(bad), False)]
    assert any(f["code"] == "deadlock" for f in data[1]["findings"])


def test_check_failing_file_exits_1(tmp_path: Path, capsys: Capture) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text(HANGS)
    code, stdout, err = run(capsys, "check", str(bad))
    assert code == 1 and err == ""
    assert stdout.startswith(f"FAIL {bad} (executor)")
    assert "[deadlock]" in stdout and stdout.splitlines()[-1] == "0 passed, 1 failed"


def test_check_directory(tmp_path: Path, capsys: Capture) -> None:
    assert build(capsys, tmp_path / "a.xml")[0] == 0
    assert build(capsys, tmp_path / "sub" / "b.xml", topology="switch:8", algorithm="direct")[0] == 2  # no dir
    (tmp_path / "sub").mkdir()
    assert build(capsys, tmp_path / "sub" / "b.xml", topology="switch:8", algorithm="direct")[0] == 0
    code, stdout, _ = run(capsys, "check", str(tmp_path))
    assert code == 0 and stdout.splitlines()[-1] == "2 passed, 0 failed"


# ---------------------------------------------------------------------- list, topology show
def test_list_algorithms(capsys: Capture) -> None:
    # compact by default (one row per algorithm, at most 100 wide); the full entries with --long
    code, out, _ = run(capsys, "list", "algorithms")
    assert code == 0
    rows = out.splitlines()
    assert max(len(line) for line in rows) <= 100
    assert [line.split()[0] for line in rows[1:len(algorithms()) + 1]] == [a.name for a in algorithms()]
    assert run(capsys, "list")[1] == out  # the default
    code, out, _ = run(capsys, "list", "algorithms", "--long")
    for alg in algorithms():
        assert alg.name in out and alg.example in out
    assert "--param bidirectional=" in out


def test_list_algorithms_on_a_topology_says_what_applies(capsys: Capture) -> None:
    # --why (was the default with --topology): every algorithm and collective, reasons wrapped below
    code, out, _ = run(capsys, "list", "algorithms", "--topology", "ring:8", "--why")
    assert code == 0
    joined = re.sub(r"\n +", " ", out)
    lines = dict((" ".join(line.split()[:2]), line) for line in joined.splitlines())
    assert lines["ring allreduce"].endswith("applies")
    assert "no: recursive-doubling sends between partners r xor 2^k, but ring:8 has no link or switch route" in \
        lines["recursive-doubling allreduce"]
    assert "no: hdrm needs a BiGraph" in lines["hdrm allreduce"]
    assert len(lines) == sum(len(a.collectives) for a in algorithms())
    assert max(len(line) for line in out.splitlines()) <= 100


def test_compare_defaults_to_every_applicable_algorithm(capsys: Capture) -> None:
    code, out, _ = run(capsys, "compare", "--topology", "switch:8", "--collective", "allgather", "--sizes",
                       "64KiB:64KiB", "--no-plot", "--json")
    assert code == 0
    series = set(json.loads(out)["series"])
    topo = parse_spec("switch:8")
    assert series == {a.name for a in algorithms() if a.refusal_of_kind(topo, CollKind.ALLGATHER) is None}
    assert {"direct", "multitree", "recursive-doubling", "ring"} <= series and "swing" not in series


def test_list_topologies(capsys: Capture) -> None:
    code, out, _ = run(capsys, "list", "topologies")
    assert code == 0
    for name, _, example in list_families():
        assert name in out and example in out


def test_list_collectives(capsys: Capture) -> None:
    code, out, _ = run(capsys, "list", "collectives")
    assert code == 0 and out.split() == [k.value for k in CollKind]


def test_topology_show(capsys: Capture) -> None:
    code, out, _ = run(capsys, "topology", "show", "torus:4x4")
    assert code == 0
    assert "name:           torus:4x4" in out and "ranks:          16" in out
    assert "diameter:       4 hops" in out and "ring cycle:     yes" in out


def test_topology_show_json_round_trips(tmp_path: Path, capsys: Capture) -> None:
    code, out, _ = run(capsys, "topology", "show", "torus:4x4", "--json")
    assert code == 0
    data = json.loads(out)
    assert isinstance(data, dict)
    f = tmp_path / "t.json"
    f.write_text(out)
    topo = load_file(f)
    assert topo.nranks == 16
    code, out2, _ = run(capsys, "topology", "show", str(f), "--json")
    assert code == 0 and json.loads(out2)["links"] == data["links"]


# ---------------------------------------------------------------------- bad input: exit 2, one line, no file
BAD_BUILDS = {
    "unknown-family": (["--topology", "foo:8"], "unknown topology family 'foo'"),
    "torus-0x8": (["--topology", "torus:0x8"], "torus:0x8"),
    "unknown-algorithm": (["--algorithm", "nope"], "unknown algorithm 'nope'"),
    "rd-on-ring": (["--algorithm", "recursive-doubling"], "no link or switch route"),
    "rd-on-ring6": (["--algorithm", "recursive-doubling", "--topology", "ring:6", "--collective", "allgather"],
                    "no link or switch route"),
    "unsupported-collective": (["--collective", "alltoall"], "does not implement alltoall"),
    "unknown-collective": (["--collective", "allfoo"], "unknown collective 'allfoo'"),
    "param-without-equals": (["--param", "bidirectional"], "must be KEY=VALUE"),
    "unknown-param": (["--param", "foo=1"], "has no parameter 'foo'"),
    "bad-param-value": (["--param", "bidirectional=maybe"], "not a boolean"),
    "min-above-max": (["--min-bytes", "2MiB", "--max-bytes", "1MiB"], "--min-bytes 2097152 exceeds --max-bytes"),
    "bad-size": (["--max-bytes", "lots"], "cannot read size 'lots'"),
    "zero-chunks": (["--chunks", "0"], "at least 1"),
    "root-for-allreduce": (["--root", "2"], "takes no root"),
    "bad-protocol": (["--protocol", "Fast"], "invalid choice"),
    "bad-dialect": (["--dialect", "nccl"], "invalid choice"),
    "inplace-and-outofplace": (["--inplace", "--outofplace"], "not allowed with"),
}


def _build_args(over: list[str], out: Path) -> list[str]:
    args = {"--topology": "ring:8", "--algorithm": "ring", "--collective": "allreduce"}
    rest: list[str] = []
    it = iter(over)
    for a in it:
        if a in args:
            args[a] = next(it)
        else:
            rest.append(a)
    return ["build", *[x for kv in args.items() for x in kv], *rest, "-o", str(out)]


def assert_one_line_error(err: str, needle: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("collc:") and needle in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("over, needle", BAD_BUILDS.values(), ids=list(BAD_BUILDS))
def test_bad_build_exits_2(tmp_path: Path, capsys: Capture, over: list[str], needle: str) -> None:
    code, out, err = run(capsys, *_build_args(over, tmp_path / "x.xml"))
    assert code == 2
    assert out == ""
    assert_one_line_error(err, needle)
    assert list(tmp_path.iterdir()) == []


def test_build_into_a_missing_directory_exits_2(tmp_path: Path, capsys: Capture) -> None:
    code, _, err = build(capsys, tmp_path / "no" / "x.xml")
    assert code == 2
    assert_one_line_error(err, "cannot write")
    assert list(tmp_path.iterdir()) == []


def test_build_onto_a_directory_exits_2(tmp_path: Path, capsys: Capture) -> None:
    code, _, err = build(capsys, tmp_path)
    assert code == 2
    assert_one_line_error(err, "is a directory")


def test_missing_required_arguments_exit_2(capsys: Capture) -> None:
    code, _, err = run(capsys, "build", "--topology", "ring:8")
    assert code == 2
    assert_one_line_error(err, "required")


def test_unknown_command_exits_2(capsys: Capture) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2
    assert_one_line_error(err, "invalid choice")


@pytest.mark.parametrize("spec, needle", [("foo:8", "unknown topology family"), ("torus:0x8", "torus:0x8"),
                                          ("ring", "has no arguments")])
def test_bad_topology_show_exits_2(capsys: Capture, spec: str, needle: str) -> None:
    code, _, err = run(capsys, "topology", "show", spec)
    assert code == 2
    assert_one_line_error(err, needle)


def test_check_unreadable_path_exits_2(tmp_path: Path, capsys: Capture) -> None:
    code, out, err = run(capsys, "check", str(tmp_path / "absent.xml"))
    assert code == 2 and out == ""
    assert_one_line_error(err, "no such file")


def test_check_directory_without_xml_exits_2(tmp_path: Path, capsys: Capture) -> None:
    code, _, err = run(capsys, "check", str(tmp_path))
    assert code == 2
    assert_one_line_error(err, "no .xml files")


@pytest.mark.parametrize("text", ["<algo><gpu>", "", "<notalgo/>"])
def test_check_malformed_xml_exits_2(tmp_path: Path, capsys: Capture, text: str) -> None:
    f = tmp_path / "bad.xml"
    f.write_text(text)
    code, out, err = run(capsys, "check", str(f))
    assert code == 2 and out == ""
    assert_one_line_error(err, str(f))


def test_check_binary_file_exits_2(tmp_path: Path, capsys: Capture) -> None:
    f = tmp_path / "bin.xml"
    f.write_bytes(b"\x00\xff\xfe")
    code, _, err = run(capsys, "check", str(f))
    assert code == 2
    assert_one_line_error(err, "not a text file")


# ---------------------------------------------------------------------- help
@pytest.mark.parametrize("command", ["list", "topology", "build", "check"])
def test_subcommand_help(capsys: Capture, command: str) -> None:
    code, out, err = run(capsys, command, "--help")
    assert code == 0 and err == ""
    assert "example:" in out and EXAMPLES[command] in out
    assert f"usage: collc {command}" in out


def test_top_level_help(capsys: Capture) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "examples:" in out and all(e in out for e in EXAMPLES.values())


def test_examples_are_runnable_commands() -> None:
    for cmd in EXAMPLES.values():
        assert cmd.startswith("collc ")


# ---------------------------------------------------------------------- helpers
@pytest.mark.parametrize("text, value", [("4096", 4096), ("64KiB", 65536), ("1MB", 1 << 20), ("2G", 2 << 30),
                                         ("1 KiB", 1024), ("0", 0)])
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "-1", "1.5MiB", "KiB", "12 parsecs"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(CollcError, match="cannot read size"):
        parse_size(text)


def test_progress_bar_names_the_stage_and_the_ranks_lowered() -> None:
    stages = _Stages(False)          # not a terminal: the bar draws nothing but keeps its text
    stages.tell("frontend")
    stages.tell("lower")
    stages.ranks(512, 1024)
    assert stages.bar.desc == "lower (512/1024 ranks)"
    stages.tell("emit")
    assert stages.bar.desc == "emit"
    stages.bar.close()


def test_python_dash_m_runs_the_cli() -> None:
    """``python -m collc`` is the ``collc`` command: same exit codes, same one-line errors."""
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-m", "collc", "list", "collectives"], capture_output=True, text=True)
    assert ok.returncode == 0 and "allreduce" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "collc", "build", "--topology", "ring:0", "--algorithm", "ring",
                          "--collective", "allreduce", "-o", "x.xml"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_help_and_argument_errors_import_no_heavy_library() -> None:
    """`collc --help` and a usage error answer without numpy, scipy, lxml, networkx, matplotlib or tqdm
    (each command imports what it uses): the parser is built and run in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys\nfrom collc.cli import main\nmain(['--help']); main(['build'])\n"
            "heavy = ('numpy', 'scipy', 'lxml', 'networkx', 'matplotlib', 'tqdm', 'yaml')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_build_timings_prints_every_stage_and_pass(tmp_path: Path, capsys: Capture) -> None:
    from collc.compiler.pipeline import PASS_NAMES
    code, out, _ = run(capsys, "build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce",
                       "--timings", "-o", str(tmp_path / "r.xml"))
    assert code == 0
    rows = {line.split()[0] for line in out.splitlines()[1:]}
    assert {"frontend", "verify_schedule", "lower", "emit", "check", "total", "peak"} <= rows
    assert set(PASS_NAMES) <= rows
