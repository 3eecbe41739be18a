"""Bad input to every command: exit 2, exactly one line on stderr, no traceback, no file left.

Each row of ``CASES`` is a command line (``{d}`` stands for a scratch directory that
``_scratch`` fills with a good XML, a FIFO, links, odd files ...) run in-process through
``collc.cli.main``; after it the scratch directory must hold exactly what it held before
(no temporary file, no partial output, links and devices untouched).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from collc.cli import main
from collc.inputs import INT64_MAX, MAX_TOPOLOGY_BYTES, MAX_XML_BYTES
from collc.outputs import pending

Capture = pytest.CaptureFixture[str]

BUILD = ["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce"]
SIM = ["simulate", "{d}/good.xml", "--topology", "ring:4", "--sizes", "1KiB:4KiB"]
CMP = ["compare", "--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring", "--sizes", "1KiB",
       "--plot", "{d}/cmp.png"]
TUNE = ["tune", "--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring", "--sizes", "1KiB"]


def _alias_bomb() -> str:
    doc = ["  n0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    doc += [f"  n{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return "defs:\n" + "\n".join(doc) + "\nnranks: 4\nname: *a8\n"


def _scratch(d: Path) -> None:
    """The files the cases refer to."""
    assert main([*BUILD, "-o", str(d / "good.xml")]) == 0
    good = (d / "good.xml").read_text()
    os.mkfifo(d / "fifo")
    os.mkfifo(d / "fifo.json")
    os.mkfifo(d / "fifo.xml")
    (d / "dir").mkdir()
    (d / "dir.json").mkdir()
    (d / "emptydir").mkdir()
    (d / "notmine").mkdir()
    (d / "notmine" / "keep.txt").write_text("user data\n")
    (d / "afile").write_text("not a directory\n")
    (d / "target.txt").write_text("keep me\n")
    os.symlink(d / "target.txt", d / "link.xml")
    os.symlink(d / "target.txt", d / "link.png")
    os.symlink(d / "dir", d / "linkdir")
    os.symlink(d / "absent", d / "dangling.xml")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "deep.yaml").write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    (d / "bomb.yaml").write_text(_alias_bomb())
    (d / "big.json").write_text(json.dumps({"nranks": 10 ** 8}))
    (d / "huge.json").write_text('{"nranks": 1' + "0" * 400 + "}")
    (d / "digits.json").write_text('{"nranks": 1' + "0" * 5000 + "}")
    (d / "digits.yaml").write_text("nranks: 1" + "0" * 5000 + "\n")
    (d / "switches.json").write_text(json.dumps({"nranks": 4, "nswitches": 10 ** 9}))
    (d / "mult.json").write_text(json.dumps({"nranks": 2, "links": [{"src": 0, "dst": 1, "multiplicity": 10 ** 30}]}))
    (d / "list.json").write_text("[1, 2]")
    (d / "empty.json").write_text("")
    (d / "unknown.json").write_text(json.dumps({"nranks": 2, "bogus": 1}))
    (d / "links.json").write_text(json.dumps({"nranks": 2, "links": "0-1"}))
    (d / "binary.yaml").write_bytes(b"\xff\xfe\x00\x01")
    with open(d / "sparse.json", "wb") as fh:
        fh.truncate(MAX_TOPOLOGY_BYTES + 1)
    with open(d / "sparse.xml", "wb") as fh:
        fh.truncate(MAX_XML_BYTES + 1)
    (d / "nul.xml").write_text(good.replace('name="', 'name="a\x00b', 1))
    (d / "esc.xml").write_text("\x1b[31m<algo>\n")
    (d / "binary.xml").write_bytes(b"\xff\xfe\x00<algo>")
    (d / "notxml.xml").write_text("not xml at all\n")
    (d / "ngpus.xml").write_text(good.replace('ngpus="4"', 'ngpus="1000000000"'))
    (d / "nchunks.xml").write_text(good.replace('nchunksperloop="4"', 'nchunksperloop="1000000000"'))
    (d / "ichunks.xml").write_text(re.sub(r'i_chunks="\d+"', 'i_chunks="1000000000"', good))
    (d / "deep.xml").write_text("<a>" * 5000 + "</a>" * 5000)
    ents = ['<!ENTITY e0 "lollollollollol">'] + [f'<!ENTITY e{i} "' + f"&e{i - 1};" * 10 + '">' for i in range(1, 10)]
    (d / "laughs.xml").write_text("<!DOCTYPE algo [" + "".join(ents) + ']>\n<algo name="&e9;"></algo>\n')
    nl = d / "new\nline.xml"
    nl.write_text("<notalgo/>\n")
    algos = d / "tuned" / "msccl-algorithms"
    algos.mkdir(parents=True)
    (algos / "README").write_text("the runtime would parse this\n")


def _readonly(d: Path) -> str:
    """A directory this process cannot create files in (as root, chmod does not stop it: /sys does)."""
    if os.geteuid() == 0:
        return "/sys"
    ro = d / "ro"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    return str(ro)


LONG = "n" * 300
DIGITS = "9" * 5000

# (id, argv, word the one stderr line must contain)
CASES: list[tuple[str, list[str], str]] = [
    # ---- usage, list
    ("no-command", [], "required"),
    ("unknown-command", ["bogus"], "invalid choice"),
    ("unknown-flag", ["--bogus", "list"], "unrecognized"),
    ("list-bogus", ["list", "bogus"], "invalid choice"),
    ("list-extra", ["list", "algorithms", "extra"], "unrecognized"),
    ("topology-no-action", ["topology"], "required"),
    ("topology-bad-action", ["topology", "hide", "ring:4"], "invalid choice"),
    ("show-no-spec", ["topology", "show"], "required"),
    # ---- topology specs
    ("spec-unknown-family", ["topology", "show", "bogus:4"], "unknown topology family"),
    ("spec-no-args", ["topology", "show", "ring:"], "no arguments"),
    ("spec-letters", ["topology", "show", "ring:abc"], "positive integer"),
    ("spec-too-many-ranks", ["topology", "show", "ring:9999999"], "65536"),
    ("spec-5000-digits", ["topology", "show", f"ring:{DIGITS}"], "longer than"),
    ("spec-torus-zero", ["topology", "show", "torus:0x4"], ">= 2"),
    ("spec-torus-huge", ["topology", "show", "torus:256x257"], "more than"),
    ("spec-complete-links", ["topology", "show", "complete:1025"], "links"),
    ("spec-hyperx-links", ["topology", "show", "hyperx:256x256"], "links"),
    ("spec-bigraph-links", ["topology", "show", "bigraph:1x65536"], "links"),
    ("spec-hypercube-huge", ["topology", "show", "hypercube:40"], "hypercube"),
    ("spec-bw-nan", ["topology", "show", "ring:8:bw=nan"], "bw"),
    ("spec-bw-negative", ["topology", "show", "ring:8:bw=-1"], "bw"),
    ("spec-lat-inf", ["topology", "show", "ring:8:lat=inf"], "lat"),
    ("spec-bw-tiny", ["topology", "show", "ring:8:bw=1e-308"], "bandwidth"),
    ("spec-lat-huge", ["topology", "show", "ring:8:lat=1e300"], "latency"),
    ("spec-bad-option", ["topology", "show", "ring:8:foo"], "unknown option"),
    ("spec-escape", ["topology", "show", "ring:\x1b[31m8"], "ring"),
    ("spec-newline", ["topology", "show", "torus:4x4\nmesh:2x2"], "torus"),
    # ---- topology files
    ("file-deep-json", ["topology", "show", "{d}/deep.json"], "nested"),
    ("file-deep-yaml", ["topology", "show", "{d}/deep.yaml"], "nested"),
    ("file-alias-bomb", ["topology", "show", "{d}/bomb.yaml"], "aliases"),
    ("file-nranks-1e8", ["topology", "show", "{d}/big.json"], "nranks"),
    ("file-nranks-1e400", ["topology", "show", "{d}/huge.json"], "nranks"),
    ("file-5000-digits-json", ["topology", "show", "{d}/digits.json"], "invalid JSON"),
    ("file-5000-digits-yaml", ["topology", "show", "{d}/digits.yaml"], "invalid YAML"),
    ("file-nswitches", ["topology", "show", "{d}/switches.json"], "nswitches"),
    ("file-multiplicity", ["topology", "show", "{d}/mult.json"], "multiplicity"),
    ("file-fifo", ["topology", "show", "{d}/fifo.json"], "FIFO"),
    ("file-directory", ["topology", "show", "{d}/dir.json"], "directory"),
    ("file-binary", ["topology", "show", "{d}/binary.yaml"], "cannot read"),
    ("file-too-big", ["topology", "show", "{d}/sparse.json"], "limit"),
    ("file-empty", ["topology", "show", "{d}/empty.json"], "invalid JSON"),
    ("file-list", ["topology", "show", "{d}/list.json"], "mapping"),
    ("file-unknown-key", ["topology", "show", "{d}/unknown.json"], "unknown key"),
    ("file-links-string", ["topology", "show", "{d}/links.json"], "links"),
    ("file-missing", ["topology", "show", "{d}/absent.yaml"], "No such file"),
    ("file-newline-name", ["topology", "show", "{d}/x\ny.json"], "No such file"),
    ("show-json-deep", ["topology", "show", "{d}/deep.json", "--json"], "nested"),
    # ---- build: numbers
    ("build-no-topology", ["build", "--algorithm", "ring", "--collective", "allreduce", "-o", "{d}/o.xml"], "required"),
    ("build-no-output", [*BUILD], "required"),
    ("build-chunks-zero", [*BUILD, "--chunks", "0", "-o", "{d}/o.xml"], "at least 1"),
    ("build-chunks-negative", [*BUILD, "--chunks", "-5", "-o", "{d}/o.xml"], "at least 1"),
    ("build-chunks-million", [*BUILD, "--chunks", "1000000", "-o", "{d}/o.xml"], "int16"),
    ("build-chunks-text", [*BUILD, "--chunks", "abc", "-o", "{d}/o.xml"], "invalid int"),
    ("build-chunks-digits", [*BUILD, "--chunks", DIGITS, "-o", "{d}/o.xml"], "--chunks"),
    ("build-chunks-steps", [*BUILD, "--chunks", "1000", "-o", "{d}/o.xml"], "4095"),
    ("build-instances-zero", [*BUILD, "--instances", "0", "-o", "{d}/o.xml"], "at least 1"),
    ("build-instances-33", [*BUILD, "--instances", "33", "-o", "{d}/o.xml"], "32"),
    ("build-instances-million", [*BUILD, "--instances", "1000000", "-o", "{d}/o.xml"], "channels"),
    ("build-instances-rccl", [*BUILD, "--dialect", "rccl", "--instances", "129", "-o", "{d}/o.xml"], "128"),
    ("build-max-bytes-2^63", [*BUILD, "--max-bytes", str(INT64_MAX + 1), "-o", "{d}/o.xml"], "int64"),
    ("build-max-bytes-1e20", [*BUILD, "--max-bytes", "100000000000000000000", "-o", "{d}/o.xml"], "int64"),
    ("build-max-bytes-tib", [*BUILD, "--max-bytes", "99999999999T", "-o", "{d}/o.xml"], "int64"),
    ("build-max-bytes-negative", [*BUILD, "--max-bytes", "-1", "-o", "{d}/o.xml"], "--max-bytes"),
    ("build-max-bytes-text", [*BUILD, "--max-bytes", "lots", "-o", "{d}/o.xml"], "cannot read size"),
    ("build-min-over-max", [*BUILD, "--min-bytes", "5", "--max-bytes", "4", "-o", "{d}/o.xml"], "exceeds"),
    ("build-min-bytes-huge", [*BUILD, "--min-bytes", DIGITS, "-o", "{d}/o.xml"], "int64"),
    ("build-protocol", [*BUILD, "--protocol", "Fast", "-o", "{d}/o.xml"], "invalid choice"),
    ("build-dialect", [*BUILD, "--dialect", "nccl", "-o", "{d}/o.xml"], "invalid choice"),
    ("build-collective", ["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allsum",
                          "-o", "{d}/o.xml"], "allsum"),
    ("build-algorithm", ["build", "--topology", "ring:4", "--algorithm", "nosuch", "--collective", "allreduce",
                         "-o", "{d}/o.xml"], "nosuch"),
    ("build-param-no-eq", [*BUILD, "--param", "bidirectional", "-o", "{d}/o.xml"], "KEY=VALUE"),
    ("build-param-root", [*BUILD, "--param", "root=abc", "-o", "{d}/o.xml"], "root"),
    ("build-root-range", ["build", "--topology", "switch:4", "--algorithm", "binomial-tree", "--collective",
                          "broadcast", "--root", "99", "-o", "{d}/o.xml"], "root"),
    ("build-root-negative", ["build", "--topology", "switch:4", "--algorithm", "binomial-tree", "--collective",
                             "broadcast", "--root", "-1", "-o", "{d}/o.xml"], "root"),
    ("build-too-many-ranks", ["build", "--topology", "ring:20000", "--algorithm", "ring", "--collective",
                              "allreduce", "--shard-per-rank", "-o", "{d}/sh"], "16384"),
    ("build-not-applicable", ["build", "--topology", "ring:6", "--algorithm", "recursive-doubling",
                              "--collective", "allreduce", "-o", "{d}/o.xml"], "recursive-doubling"),
    ("build-deep-topology", ["build", "--topology", "{d}/deep.json", "--algorithm", "ring", "--collective",
                             "allreduce", "-o", "{d}/o.xml"], "nested"),
    # ---- build: output paths
    ("out-missing-dir", [*BUILD, "-o", "{d}/missing/x.xml"], "does not exist"),
    ("out-trailing-slash", [*BUILD, "-o", "{d}/new/"], "file name"),
    ("out-directory", [*BUILD, "-o", "{d}/dir"], "directory"),
    ("out-fifo", [*BUILD, "-o", "{d}/fifo"], "FIFO"),
    ("out-device", [*BUILD, "-o", "/dev/null"], "device"),
    ("out-symlink", [*BUILD, "-o", "{d}/link.xml"], "symbolic link"),
    ("out-dangling-symlink", [*BUILD, "-o", "{d}/dangling.xml"], "symbolic link"),
    ("out-name-too-long", [*BUILD, "-o", "{d}/" + LONG + ".xml"], "too long"),
    ("out-empty", [*BUILD, "-o", ""], "name"),
    ("out-parent-is-file", [*BUILD, "-o", "{d}/afile/x.xml"], "not a directory"),
    ("out-readonly", [*BUILD, "-o", "{ro}/collc-test.xml"], "cannot write"),
    ("out-newline-name", [*BUILD, "-o", "{d}/missing\n/x.xml"], "does not exist"),
    ("shard-not-mine", [*BUILD, "--shard-per-rank", "-o", "{d}/notmine"], "did not write"),
    ("shard-onto-file", [*BUILD, "--shard-per-rank", "-o", "{d}/afile"], "not a directory"),
    ("shard-onto-link", [*BUILD, "--shard-per-rank", "-o", "{d}/linkdir"], "symbolic link"),
    ("shard-readonly", [*BUILD, "--shard-per-rank", "-o", "{ro}/collc-shards"], "cannot write"),
    # ---- check
    ("check-no-path", ["check"], "required"),
    ("check-dev-zero", ["check", "/dev/zero"], "character device"),
    ("check-fifo", ["check", "{d}/fifo.xml"], "FIFO"),
    ("check-missing", ["check", "{d}/absent.xml"], "no such file"),
    ("check-empty-dir", ["check", "{d}/emptydir"], "no .xml"),
    ("check-nul", ["check", "{d}/nul.xml"], "not well-formed"),
    ("check-esc", ["check", "{d}/esc.xml"], "not well-formed"),
    ("check-newline-name", ["check", "{d}/new\nline.xml"], "expected <algo>"),
    ("check-binary", ["check", "{d}/binary.xml"], "not a text file"),
    ("check-not-xml", ["check", "{d}/notxml.xml"], "not well-formed"),
    ("check-ngpus-1e9", ["check", "{d}/ngpus.xml"], "ngpus"),
    ("check-nchunks-1e9", ["check", "{d}/nchunks.xml"], "chunk slots"),
    ("check-ichunks-1e9", ["check", "{d}/ichunks.xml"], "chunk slots"),
    ("check-too-big", ["check", "{d}/sparse.xml"], "limit"),
    ("check-deep", ["check", "{d}/deep.xml"], "XML"),
    ("check-laughs", ["check", "{d}/laughs.xml"], "XML"),
    ("check-good-and-bad", ["check", "{d}/good.xml", "{d}/notxml.xml"], "not well-formed"),
    ("check-two-bad", ["check", "{d}/notxml.xml", "{d}/good.xml", "/dev/zero"], "2 of 3"),
    ("check-dialect", ["check", "{d}/good.xml", "--dialect", "nccl"], "invalid choice"),
    ("check-data", ["check", "{d}/good.xml", "--data", "fuzzy"], "invalid choice"),
    ("check-root-text", ["check", "{d}/good.xml", "--root", "x"], "invalid int"),
    # ---- simulate
    ("sim-no-topology", ["simulate", "{d}/good.xml"], "required"),
    ("sim-missing", ["simulate", "{d}/absent.xml", "--topology", "ring:4"], "no such file"),
    ("sim-fifo", ["simulate", "{d}/fifo.xml", "--topology", "ring:4"], "FIFO"),
    ("sim-dev-zero", ["simulate", "/dev/zero", "--topology", "ring:4"], "character device"),
    ("sim-directory", ["simulate", "{d}/emptydir", "--topology", "ring:4"], "directory"),
    ("sim-ngpus", ["simulate", "{d}/ngpus.xml", "--topology", "ring:4"], "ngpus"),
    ("sim-rank-mismatch", ["simulate", "{d}/good.xml", "--topology", "ring:8"], "ranks"),
    ("sim-sizes-zero", [*SIM[:4], "--sizes", "0:1"], "positive"),
    ("sim-sizes-unit", [*SIM[:4], "--sizes", "1KiB:1ZiB"], "cannot read size"),
    ("sim-sizes-huge", [*SIM[:4], "--sizes", "99999999999999999999"], "int64"),
    ("sim-sizes-many", [*SIM[:4], "--sizes", ",".join(str(i) for i in range(1, 101))], "at most"),
    ("sim-alpha-nan", [*SIM, "--alpha", "nan"], "--alpha"),
    ("sim-alpha-negative", [*SIM, "--alpha", "-1"], "--alpha"),
    ("sim-link-bw-zero", [*SIM, "--link-bw", "0"], "--link-bw"),
    ("sim-link-bw-inf", [*SIM, "--link-bw", "inf"], "--link-bw"),
    ("sim-link-bw-tiny", [*SIM, "--link-bw", "1e-308"], "--link-bw"),
    ("sim-alpha-huge", [*SIM, "--alpha", "1e308"], "overflow"),
    ("sim-hop-nan", [*SIM, "--hop-latency", "nan"], "--hop-latency"),
    ("sim-reduce-negative", [*SIM, "--reduce-cost", "-1"], "--reduce-cost"),
    ("sim-model", [*SIM, "--model", "fluid"], "invalid choice"),
    ("sim-plot-missing-dir", [*SIM, "--plot", "{d}/missing/p.png"], "does not exist"),
    ("sim-plot-directory", [*SIM, "--plot", "{d}/dir"], "directory"),
    ("sim-plot-format", [*SIM, "--plot", "{d}/p.xyz"], "image format"),
    ("sim-plot-symlink", [*SIM, "--plot", "{d}/link.png"], "symbolic link"),
    ("sim-plot-readonly", [*SIM, "--plot", "{ro}/collc-plot.png"], "cannot write"),
    # ---- bench and topology import (the harness reads logs, CSVs and topology files the same way)
    ("bench-parse-fifo", ["bench", "parse", "{d}/fifo"], "FIFO"),
    ("bench-parse-device", ["bench", "parse", "/dev/zero"], "character device"),
    ("bench-parse-missing", ["bench", "parse", "{d}/none.log"], "cannot read"),
    ("bench-parse-dir", ["bench", "parse", "{d}"], "directory"),
    ("bench-no-action", ["bench"], "required"),
    ("bench-run-runtime", ["bench", "run", "--xml", "{d}/good.xml", "--dry-run", "--runtime", "bogus"],
     "invalid choice"),
    ("bench-run-missing-xml", ["bench", "run", "--xml", "{d}/none.xml", "--dry-run"], "no such file"),
    ("bench-report-missing-log", ["bench", "report", "{d}/none.log", "--xml", "{d}/good.xml", "-o", "{d}/rep"],
     "cannot read"),
    ("import-fifo", ["topology", "import", "{d}/fifo.xml"], "FIFO"),
    ("import-device", ["topology", "import", "/dev/zero"], "character device"),
    ("import-out-suffix", ["topology", "import", "{d}/good.xml", "-o", "{d}/t.txt"], ".yaml"),
    ("import-out-fifo", ["topology", "import", "{d}/good.xml", "-o", "{d}/fifo.json"], "FIFO"),
    # ---- compare
    ("cmp-nothing-applies", ["compare", "--topology", "ring:4:uni", "--collective", "broadcast"],
     "no registered algorithm runs broadcast on ring:4:uni"),
    ("cmp-collective", ["compare", "--topology", "ring:4", "--collective", "allsum", "--algorithm", "ring",
                        "--plot", "{d}/c.png"], "allsum"),
    ("cmp-param-syntax", [*CMP, "--algorithm", "ring:bidirectional"], "key=value"),
    ("cmp-plot-missing-dir", [*CMP[:-1], "{d}/missing/c.png"], "does not exist"),
    ("cmp-plot-format", [*CMP[:-1], "{d}/c.txt"], "image format"),
    ("cmp-sizes-zero", [*CMP, "--sizes", "0"], "positive"),
    ("cmp-alpha-inf", [*CMP, "--alpha", "inf"], "--alpha"),
    ("cmp-too-many", [*CMP, *(["--algorithm", "ring"] * 300)], "candidates"),
    ("cmp-too-many-ranks", ["compare", "--topology", "ring:20000", "--collective", "allreduce", "--algorithm",
                            "ring", "--plot", "{d}/c.png"], "16384"),
    ("cmp-deep-topology", ["compare", "--topology", "{d}/deep.json", "--collective", "allreduce",
                           "--algorithm", "ring", "--plot", "{d}/c.png"], "nested"),
    # ---- tune
    ("tune-no-output", [*TUNE], "required"),
    ("tune-onto-file", [*TUNE, "-o", "{d}/afile"], "not a directory"),
    ("tune-missing-parent", [*TUNE, "-o", "{d}/missing/out"], "does not exist"),
    ("tune-onto-symlink", [*TUNE, "-o", "{d}/linkdir"], "symbolic link"),
    ("tune-readonly", [*TUNE, "-o", "{ro}/collc-tuned"], "cannot write"),
    ("tune-protocols", [*TUNE, "--protocols", "Fast", "-o", "{d}/t"], "--protocols"),
    ("tune-protocols-empty", [*TUNE, "--protocols", ",", "-o", "{d}/t"], "--protocols"),
    ("tune-chunks-zero", [*TUNE, "--chunks", "0", "-o", "{d}/t"], "--chunks"),
    ("tune-chunks-text", [*TUNE, "--chunks", "1,abc", "-o", "{d}/t"], "--chunks"),
    ("tune-chunks-huge", [*TUNE, "--chunks", "100000", "-o", "{d}/t"], "--chunks"),
    ("tune-instances", [*TUNE, "--instances", "99", "-o", "{d}/t"], "--instances"),
    ("tune-candidates", [*TUNE, "--chunks", ",".join(map(str, range(1, 21))),
                         "--instances", ",".join(map(str, range(1, 17))), "-o", "{d}/t"], "candidates"),
    ("tune-link-bw", [*TUNE, "--link-bw", "-3", "-o", "{d}/t"], "--link-bw"),
    ("tune-too-many-ranks", [*TUNE[:2], "ring:20000", *TUNE[3:], "-o", "{d}/t"], "16384"),
    ("tune-foreign-files", [*TUNE, "-o", "{d}/tuned"], "other than XML"),
]


def _snapshot(d: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under ``d`` (hidden ones too, links not followed): type, size, link target."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = Path(root) / name
            st = p.lstat()
            out[str(p.relative_to(d))] = (st.st_mode >> 12, st.st_size if p.is_file() else 0,
                                          os.readlink(p) if p.is_symlink() else "")
    return out


def run_refused(scratch: Path, capsys: Capture, args: list[str], needle: str, limit_s: float = 30.0,
                quiet: bool = False) -> str:
    """Run ``collc ARGS`` in-process and check the promise for bad input: exit 2, exactly one line on
    stderr (``collc: ``, at most 300 characters after it, naming ``needle``), no traceback, nothing left
    or replaced under ``scratch``, no pending temporary output, within ``limit_s`` (the promise is 10 s on an
    idle machine; the tests allow for a loaded one); ``quiet``: nothing on stdout either.  Returns the line."""
    before = _snapshot(scratch)
    start = time.monotonic()
    code = main(args)
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert out == "" or not quiet, out
    lines = err.split("\n")
    assert len(lines) == 2 and lines[1] == "", err           # exactly one line, newline-terminated
    line = lines[0]
    assert line.startswith("collc: ") and not line.startswith("collc: collc"), line
    assert needle in line, line
    assert len(line) <= len("collc: ") + 300
    assert not any(ch in line for ch in "\x00\x1b\r"), line
    assert "Traceback" not in err + out
    assert _snapshot(scratch) == before                       # no file left, nothing replaced
    assert pending() == []
    assert took < limit_s, f"refused after {took:.1f} s"
    return line


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-input")
    _scratch(d)
    return d


def test_at_least_100_cases_over_every_command() -> None:
    assert len(CASES) >= 100
    assert len({c[0] for c in CASES}) == len(CASES)
    commands = {argv[0] for _, argv, _ in CASES if argv}
    assert commands >= {"list", "topology", "build", "check", "simulate", "compare", "tune"}


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(scratch: Path, capsys: Capture, argv: list[str], needle: str) -> None:
    ro = _readonly(scratch)
    args = [a.replace("{d}", str(scratch)).replace("{ro}", ro) for a in argv]
    run_refused(scratch, capsys, args, needle)
    assert not os.path.exists(os.path.join(ro, "collc-test.xml"))


def test_check_reports_every_file_despite_a_bad_one(scratch: Path, capsys: Capture) -> None:
    """One unparsable file does not stop the others: a verdict per file on stdout."""
    code = main(["check", str(scratch / "notxml.xml"), str(scratch / "good.xml"), str(scratch / "absent.xml")])
    out, err = capsys.readouterr()
    assert code == 2
    verdicts = [line.split()[0] for line in out.splitlines() if line[:1].isupper()]
    assert verdicts == ["ERROR", "PASS", "ERROR"], out
    assert out.splitlines()[-1] == "1 passed, 0 failed, 2 not checked"
    assert err.count("\n") == 1 and "2 of 3 inputs were not checked" in err
    code = main(["check", str(scratch / "good.xml"), str(scratch / "notxml.xml"), "--json"])
    out, _ = capsys.readouterr()
    entries = json.loads(out)
    assert code == 2 and [e["ok"] for e in entries] == [True, False] and "not well-formed" in entries[1]["error"]


def test_check_of_a_directory_reports_past_a_bad_file(tmp_path: Path, capsys: Capture) -> None:
    assert main([*BUILD, "-o", str(tmp_path / "b-good.xml")]) == 0
    (tmp_path / "a-bad.xml").write_text("<algo")
    (tmp_path / "c-fail.xml").write_text((tmp_path / "b-good.xml").read_text().replace('cnt="1"', 'cnt="2"', 1))
    capsys.readouterr()
    code = main(["check", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "a-bad.xml" in err
    assert [line.split()[0] for line in out.splitlines() if line[:1].isupper()] == ["ERROR", "PASS", "FAIL"]
    assert out.splitlines()[-1] == "1 passed, 1 failed, 1 not checked"


def test_a_refused_symlink_keeps_its_target(scratch: Path, capsys: Capture) -> None:
    assert main([*BUILD, "-o", str(scratch / "link.xml")]) == 2
    capsys.readouterr()
    assert (scratch / "link.xml").is_symlink() and (scratch / "target.txt").read_text() == "keep me\n"
