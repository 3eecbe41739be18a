"""Output files: the umask's mode, atomic replacement, refusals, and the limits' own rules."""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from collc.cli import main
from collc.errors import EmitError, UsageError
from collc.inputs import (MAX_CHUNKS, MAX_MESSAGE, bounded_int, check_bytes, load_json, load_yaml, one_line,
                          output_file, read_input)
from collc.outputs import Interrupted, interrupt_handlers, new_temp_dir, pending, signals_blocked, write_file
from collc.topology import generators
from collc.topology.model import MAX_FILE_LINKS, MAX_FILE_NODES

Capture = pytest.CaptureFixture[str]
BUILD = ["build", "--topology", "ring:4", "--algorithm", "ring", "--collective", "allreduce"]


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_files_get_the_umask_mode(tmp_path: Path, capsys: Capture, umask: int) -> None:
    assert main([*BUILD, "-o", str(tmp_path / "one.xml")]) == 0
    assert _mode(tmp_path / "one.xml") == 0o666 & ~umask
    assert main([*BUILD, "--shard-per-rank", "-o", str(tmp_path / "sh")]) == 0
    assert _mode(tmp_path / "sh") == 0o777 & ~umask
    assert _mode(tmp_path / "sh" / "rank-0") == 0o777 & ~umask
    assert _mode(next((tmp_path / "sh" / "rank-0").iterdir())) == 0o666 & ~umask
    assert _mode(tmp_path / "sh" / "run-with-msccl.sh") == 0o777 & ~umask
    assert main(["tune", "--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring",
                 "--sizes", "1KiB", "--model", "step", "-o", str(tmp_path / "tuned")]) == 0
    for p in [tmp_path / "tuned", *(tmp_path / "tuned").rglob("*")]:
        assert _mode(p) == (0o777 if p.is_dir() else 0o666) & ~umask, p
    capsys.readouterr()


def test_write_replaces_a_regular_file_and_refuses_the_rest(tmp_path: Path) -> None:
    target = tmp_path / "x.xml"
    target.write_text("old")
    write_file(target, "new")
    assert target.read_text() == "new" and sorted(os.listdir(tmp_path)) == ["x.xml"]
    os.symlink(target, tmp_path / "l.xml")
    os.mkfifo(tmp_path / "f.xml")
    for bad, word in (("l.xml", "symbolic link"), ("f.xml", "FIFO"), ("", "directory")):
        with pytest.raises(EmitError, match=word):
            write_file(tmp_path / bad if bad else tmp_path, "x")
    assert (tmp_path / "l.xml").is_symlink() and stat.S_ISFIFO(os.lstat(tmp_path / "f.xml").st_mode)
    # a name that fits the directory's limit is written, however little room is left for a temporary name
    longest = tmp_path / ("n" * 251 + ".xml")
    write_file(longest, "ok")
    assert longest.read_text() == "ok"
    assert pending() == []


def test_a_signal_inside_a_critical_section_takes_effect_after_it(tmp_path: Path) -> None:
    with pytest.raises(Interrupted) as info:
        with interrupt_handlers():
            with signals_blocked():
                tmp = new_temp_dir(tmp_path / "out")
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):   # bytecode boundaries: the handler must not run here
                    pass
                assert tmp.is_dir()
            raise AssertionError("not reached: the deferred signal fires when the section ends")
    assert info.value.exit_code == 143
    assert os.listdir(tmp_path) == [] and pending() == []


def test_limits_agree_with_the_generators() -> None:
    assert MAX_FILE_NODES == generators.MAX_RANKS and MAX_FILE_LINKS == generators.MAX_LINKS


def test_input_rules() -> None:
    assert bounded_int(MAX_CHUNKS, "--chunks", 1, MAX_CHUNKS) == MAX_CHUNKS
    with pytest.raises(UsageError, match="int64"):
        check_bytes(1 << 63, "--max-bytes")
    assert check_bytes((1 << 63) - 1, "--max-bytes") == (1 << 63) - 1
    line = one_line("a\nb\x00c\x1bd\udcff" + "x" * 1000)
    assert line.startswith("a\\nb\\x00c\\x1bd\\udcff") and len(line) == MAX_MESSAGE and line.endswith("...")
    text = json.dumps({"a": [[[1]]], "b": "[" * 40 + '\\"{'})
    assert load_json(text, "x") == {"a": [[[1]]], "b": "[" * 40 + '\\"{'}   # brackets in strings do not count
    with pytest.raises(UsageError, match="nested 33 levels"):
        load_json("[" * 33 + "]" * 33, "x")
    # an anchor used a few times is fine; only an expansion beyond the bound is refused
    assert load_yaml("d: &d {bandwidth: 2}\nlinks: [*d, *d, *d]\n", "x") == {
        "d": {"bandwidth": 2}, "links": [{"bandwidth": 2}] * 3}


def test_reading_is_bounded(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert read_input(f, 100) == b"x" * 100
    with pytest.raises(UsageError, match="more than the 99 bytes limit"):
        read_input(f, 99)
    with pytest.raises(UsageError, match="character device"):
        read_input("/dev/zero", 1 << 20)


def test_output_path_rules(tmp_path: Path) -> None:
    assert output_file(tmp_path / "new.xml") == tmp_path / "new.xml"
    with pytest.raises(UsageError, match="too long"):
        output_file(tmp_path / ("n" * 256))
    with pytest.raises(UsageError, match="does not exist"):
        output_file(tmp_path / "no" / "x.xml")


def test_messages_and_names_are_escaped(tmp_path: Path, capsys: Capture) -> None:
    odd = tmp_path / "a\nb\x1b.xml"
    assert main([*BUILD, "-o", str(odd)]) == 0
    assert main(["check", str(odd)]) == 0
    out, _ = capsys.readouterr()
    assert "PASS " + str(tmp_path) + "/a\\nb\\x1b.xml (executor)" in out.splitlines()


def test_show_skips_the_diameter_of_huge_topologies(capsys: Capture) -> None:
    assert main(["topology", "show", "ring:5000"]) == 0
    out, _ = capsys.readouterr()
    assert "diameter:       not computed (more than 4096 ranks)" in out


def test_check_flags_window_bounds_beyond_int64(tmp_path: Path, capsys: Capture) -> None:
    good = tmp_path / "g.xml"
    assert main([*BUILD, "-o", str(good)]) == 0
    bad = tmp_path / "b.xml"
    bad.write_text(good.read_text().replace('maxBytes="0"', f'maxBytes="{1 << 63}"'))
    assert main(["check", str(bad)]) == 1
    out, _ = capsys.readouterr()
    assert "maxBytes=9223372036854775808 is outside 0..9223372036854775807" in out
