"""The MSCCL XML writer, lexical rules and reader (collc.backends.msccl_xml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from collc.backends.msccl_xml import lexical_check, parse_xml, read_xml, to_xml, write_atomic
from collc.cli import main
from collc.limits import Dialect
from collc.compiler.pipeline import LowerOptions, lower
from collc.compiler.msccl.program import Program, Proto
from collc.errors import EmitError
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.topology import parse_spec
from tests._corpus import EXPECTED_FILES, algo_attrs, corpus_files, corpus_params, parsed
from tests._shared import missing

# (topology, algorithm, collective, inplace, chunks, instances, protocol)
Case = tuple[str, str, CollKind, bool, int, int, Proto]
CASES: list[Case] = [
    ("ring:4", "ring", CollKind.ALLREDUCE, True, 1, 1, Proto.SIMPLE),
    ("ring:4", "ring", CollKind.ALLREDUCE, False, 2, 2, Proto.LL),
    ("torus:2x3", "ring", CollKind.REDUCESCATTER, False, 1, 1, Proto.LL128),
    ("switch:8", "recursive-halving-doubling", CollKind.ALLREDUCE, False, 1, 1, Proto.SIMPLE),
    ("hypercube:3", "recursive-doubling", CollKind.ALLREDUCE, True, 1, 1, Proto.SIMPLE),
    ("switch:4", "direct", CollKind.ALLTOALL, False, 1, 1, Proto.SIMPLE),
    ("switch:5", "binomial-tree", CollKind.REDUCE, False, 1, 1, Proto.SIMPLE),
]
IDS = [f"{c[1]}-{c[2].value}-{c[0]}-{'ip' if c[3] else 'oop'}" for c in CASES]


def program_for(case: Case, dialect: Dialect = Dialect.EXECUTOR, **kw: Any) -> Program:
    spec, alg, kind, inplace, chunks, instances, proto = case
    s = build_schedule(alg, parse_spec(spec), kind, inplace)
    return lower(s, LowerOptions(chunks=chunks, instances=instances, proto=proto, dialect=dialect, **kw))


# ---------------------------------------------------------------------- lexical rules of the writer
_LINE = re.compile(r'^ *<(/?)([a-z]+)((?: [A-Za-z_]+="[^"<>]*")*)(/?)>$')
_VALUE = re.compile(r'([A-Za-z_]+)="([^"]*)"')
NUMERIC = {"nchannels", "nchunksperloop", "ngpus", "inplace", "outofplace", "minBytes", "maxBytes", "id",
           "i_chunks", "o_chunks", "s_chunks", "send", "recv", "chan", "s", "srcoff", "dstoff", "cnt", "depid",
           "deps", "hasdep"}


def assert_runtime_lexical_rules(text: str) -> None:
    assert not text.startswith("<?xml") and "<?" not in text
    assert "\t" not in text and "'" not in text and "\r" not in text
    assert text.endswith("\n")
    for line in text.splitlines():
        m = _LINE.match(line)
        assert m, f"not exactly one tag with double-quoted attributes on this line: {line!r}"
        assert "  " not in line.strip(), f"repeated space inside a tag: {line!r}"
        attrs = _VALUE.findall(m.group(3))
        assert len(attrs) <= 16
        for key, value in attrs:
            if key in NUMERIC:
                assert re.fullmatch(r"-?(0|[1-9][0-9]*)", value), f"{key}={value!r} is not plain decimal"
    assert lexical_check(text) == []


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_writer_obeys_the_lexical_rules(case: Case, dialect: Dialect) -> None:
    assert_runtime_lexical_rules(to_xml(program_for(case, dialect), dialect))


def test_cli_output_obeys_the_lexical_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.xml"
    assert main(["build", "--topology", "torus:4x4", "--algorithm", "ring", "--collective", "allgather",
                 "--chunks", "2", "-o", str(out)]) == 0
    capsys.readouterr()
    assert_runtime_lexical_rules(out.read_text(encoding="ascii"))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_output_is_byte_identical_twice(case: Case) -> None:
    first = to_xml(program_for(case))
    assert to_xml(program_for(case)) == first
    prog = program_for(case)
    assert to_xml(prog) == to_xml(prog)


def test_header_carries_every_required_attribute() -> None:
    head = to_xml(program_for(CASES[0])).splitlines()[0]
    keys = [k for k, _ in _VALUE.findall(head)]
    assert keys == ["name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace", "outofplace",
                    "minBytes", "maxBytes"]
    assert 'inplace="1" outofplace="0" minBytes="0" maxBytes="0"' in head


def test_dialect_headers() -> None:
    prog = program_for(("ring:4", "ring", CollKind.REDUCESCATTER, False, 1, 1, Proto.SIMPLE))
    ex = to_xml(prog, Dialect.EXECUTOR).splitlines()[0]
    rc = to_xml(prog, Dialect.RCCL).splitlines()[0]
    lg = to_xml(prog, Dialect.LEGACY).splitlines()[0]
    assert 'coll="reducescatter"' in ex and 'outofplace="1"' in ex
    assert rc == ex
    assert 'coll="reduce_scatter"' in lg
    assert "outofplace" not in lg and "minBytes" not in lg and "maxBytes" not in lg
    # the body is the same in every dialect
    assert to_xml(prog, Dialect.LEGACY).splitlines()[1:] == to_xml(prog, Dialect.EXECUTOR).splitlines()[1:]


def test_legacy_header_writes_a_size_window_when_set() -> None:
    prog = program_for(CASES[0], Dialect.LEGACY, min_bytes=1024, max_bytes=1 << 20)
    head = to_xml(prog, Dialect.LEGACY).splitlines()[0]
    assert 'minBytes="1024"' in head and 'maxBytes="1048576"' in head


def test_shard_holds_only_the_given_ranks() -> None:
    prog = program_for(CASES[0])
    text = to_xml(prog, ranks=[2])
    assert text.splitlines()[0] == to_xml(prog).splitlines()[0]
    assert re.findall(r'<gpu id="(\d+)"', text) == ["2"]


def test_name_is_sanitized_and_short() -> None:
    prog = program_for(CASES[0], name="a name with 'quotes' & <brackets> " + "x" * 100)
    head = to_xml(prog).splitlines()[0]
    name = re.search(r'name="([^"]*)"', head)
    assert name is not None and len(name.group(1)) <= 63
    assert_runtime_lexical_rules(to_xml(prog))


# ---------------------------------------------------------------------- lexical_check flags violations
GOOD = to_xml(program_for(CASES[0]))


def _messages(text: str) -> list[str]:
    return [d.message for d in lexical_check(text) if d.kind == "error"]


def test_lexical_check_accepts_comments_and_clean_text() -> None:
    assert lexical_check(GOOD) == []
    assert lexical_check("<!-- generated -->\n<!-- second -->\n" + GOOD) == []


def test_lexical_check_flags_a_tab() -> None:
    bad = GOOD.replace("\n  <gpu", "\n\t<gpu", 1)
    msgs = _messages(bad)
    assert any("tab" in m for m in msgs), msgs


def test_lexical_check_names_the_line_of_a_tab() -> None:
    bad = GOOD.replace("\n  <gpu", "\n\t<gpu", 1)  # the tab starts line 2
    assert lexical_check(bad)[0].where == "line 2"


def test_lexical_check_names_the_line_of_a_split_tag() -> None:
    bad = GOOD.replace('<step s="0"', '<step\n s="0"', 1)  # the first step tag starts on line 4
    assert [d.where for d in lexical_check(bad)] == ["line 4"]


def test_lexical_check_flags_an_xml_declaration() -> None:
    assert any("declaration" in m for m in _messages('<?xml version="1.0"?>\n' + GOOD))


def test_lexical_check_flags_a_tag_split_across_lines() -> None:
    bad = GOOD.replace(' cnt="1" depid', '\n        cnt="1" depid', 1)
    assert any("spans several lines" in m for m in _messages(bad))


def test_lexical_check_flags_single_quotes() -> None:
    bad = GOOD.replace('cnt="1"', "cnt='1'", 1)
    assert any("single-quoted" in m for m in _messages(bad))


def test_lexical_check_flags_a_leading_zero() -> None:
    bad = GOOD.replace('srcoff="1"', 'srcoff="010"', 1)
    msgs = _messages(bad)
    assert any("leading zero" in m and "octal" in m for m in msgs), msgs


def test_lexical_check_flags_a_non_decimal_integer() -> None:
    bad = GOOD.replace('cnt="1"', 'cnt="0x1"', 1)
    assert any("not a plain decimal" in m for m in _messages(bad))


def test_lexical_check_flags_more_than_16_attributes() -> None:
    extra = " ".join(f'x{k}="1"' for k in range(7))  # the step tag has 10 attributes
    bad = GOOD.replace('hasdep="0"/>', f'hasdep="0" {extra}/>', 1)
    msgs = _messages(bad)
    assert any("17 attributes" in m and "16" in m for m in msgs), msgs
    ok = GOOD.replace('hasdep="0"/>', 'hasdep="0" ' + " ".join(f'x{k}="1"' for k in range(6)) + "/>", 1)
    assert _messages(ok) == []


def test_lexical_check_warns_about_repeated_spaces() -> None:
    diags = lexical_check(GOOD.replace('" cnt=', '"  cnt=', 1))
    assert diags and all(d.kind == "warning" for d in diags)


def test_lexical_check_flags_a_bad_closing_tag() -> None:
    assert any("closing tag" in m for m in _messages(GOOD.replace("</tb>", "</tb >", 1)))


def test_reader_reports_lexical_problems_instead_of_failing() -> None:
    p = parse_xml(GOOD.replace("\n  <gpu", "\n\t<gpu", 1))
    assert p.diagnostics and p.program.ngpus == 4


# ---------------------------------------------------------------------- reader
@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_round_trip(case: Case, dialect: Dialect) -> None:
    text = to_xml(program_for(case, dialect), dialect)
    p = parse_xml(text)
    assert p.diagnostics == () and p.missing == ()
    assert to_xml(p.program, dialect) == text


def test_round_trip_keeps_the_program() -> None:
    prog = program_for(CASES[3], min_bytes=4096, max_bytes=1 << 30)
    back = parse_xml(to_xml(prog)).program
    assert back.gpus == prog.gpus
    assert (back.ngpus, back.coll, back.nchannels, back.nchunksperloop, back.proto) == \
        (prog.ngpus, prog.coll, prog.nchannels, prog.nchunksperloop, prog.proto)
    assert (back.min_bytes, back.max_bytes, back.inplace, back.outofplace) == (4096, 1 << 30, 0, 1)


def test_reader_records_missing_attributes() -> None:
    text = GOOD.replace(' hasdep="0"', "", 1).replace(' outofplace="0"', "")
    p = parse_xml(text)
    assert ("gpu 0 tb 0 step 0", "hasdep") in p.missing
    assert "outofplace" not in p.attrs and p.program.outofplace is None


def test_reader_keeps_unknown_algo_attributes() -> None:
    p = parse_xml(GOOD.replace("<algo ", '<algo maxcount="4" ', 1))
    assert p.program.extra == (("maxcount", "4"),)


@pytest.mark.parametrize("text, message", [
    ("<algo><gpu>", "not well-formed"),
    ("not xml at all", "not well-formed"),
    ('<gpu id="0"/>', "expected <algo>"),
])
def test_reader_rejects_unparseable_files(text: str, message: str) -> None:
    with pytest.raises(EmitError, match=message):
        parse_xml(text)


def test_read_xml_errors(tmp_path: Path) -> None:
    with pytest.raises(EmitError, match="cannot read"):
        read_xml(tmp_path / "absent.xml")
    binary = tmp_path / "b.xml"
    binary.write_bytes(b"\xff\xfe\x00<algo>")
    with pytest.raises(EmitError, match="not a text file"):
        read_xml(binary)


def test_write_atomic(tmp_path: Path) -> None:
    target = tmp_path / "out.xml"
    write_atomic(target, GOOD)
    assert target.read_text(encoding="ascii") == GOOD
    assert [p.name for p in tmp_path.iterdir()] == ["out.xml"]  # no temporary file left
    with pytest.raises(EmitError, match="cannot write"):
        write_atomic(tmp_path / "missing-dir" / "x.xml", GOOD)


# ---------------------------------------------------------------------- the real-world corpus
def test_corpus_is_complete() -> None:
    files = corpus_files()
    if not files:
        pytest.skip(missing("msccl-corpus"))
    assert len(files) == EXPECTED_FILES


@pytest.mark.parametrize("path", corpus_params())
def test_reader_loads_corpus_file(path: Path) -> None:
    attrs = algo_attrs(path)
    p = parsed(path)
    assert p.program.ngpus == int(attrs["ngpus"])
    assert p.program.coll == attrs["coll"]
    assert p.program.proto.value == attrs["proto"]
    assert p.program.nchunksperloop == int(attrs["nchunksperloop"])
    assert sorted(g.id for g in p.program.gpus) == list(range(p.program.ngpus))
    assert all(d.kind != "error" for d in p.diagnostics), p.diagnostics[:3]


@pytest.mark.parametrize("alg,spec", [("ring", "ring:4"), ("multitree", "torus:4x4"), ("swing", "torus:4x4")])
def test_canonical_fast_reader_equals_lxml_reader(alg: str, spec: str) -> None:
    """collc's own layout is read by regular expressions; any other layout by lxml: same Program."""
    prog = lower(build_schedule(alg, parse_spec(spec), CollKind.ALLREDUCE, inplace=True), LowerOptions())
    text = to_xml(prog)
    fast = parse_xml(text)
    # one extra space in one step line: no longer the canonical layout, so lxml reads it
    slow = parse_xml(text.replace('"/>\n', '" />\n', 1))
    assert fast.program == slow.program == prog
    assert fast.diagnostics == slow.diagnostics == ()
    # a step outside any tb is not the canonical layout, and lxml reports the stray element
    broken = text.replace("    </tb>\n", "", 1)
    with pytest.raises(EmitError, match="well-formed"):
        parse_xml(broken)


@pytest.mark.parametrize("value", ["2147483648", "-2147483649", "99999999999999999999999"])
def test_an_integer_beyond_the_parsers_int_is_a_finding_not_a_crash(value: str, tmp_path: Path) -> None:
    # the runtime's strtol result is stored in an int: a larger value is not what the file says,
    # and numpy's int64 columns could not hold the longest ones (an OverflowError before)
    bad = GOOD.replace('cnt="1"', f'cnt="{value}"', 1)
    assert any("32-bit int" in m for m in _messages(bad))
    parsed = parse_xml(bad, "x.xml")
    assert any("32-bit int" in d.message for d in parsed.diagnostics)
    path = tmp_path / "big.xml"
    path.write_text(bad)
    assert main(["check", str(path)]) == 1


def test_the_largest_int_the_parser_stores_is_read_as_written() -> None:
    ok = GOOD.replace('srcoff="1"', 'srcoff="2147483647"', 1)
    assert not any("32-bit" in m for m in _messages(ok))
    steps = [st for g in parse_xml(ok, "x.xml").program.gpus for tb in g.tbs for st in tb.steps]
    assert 2147483647 in {st.srcoff for st in steps}
