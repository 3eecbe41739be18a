"""``collc check DIR`` of a shard directory reads and checks the per-rank files in workers
(:mod:`collc.backends.shard_check`): the report (verdict, findings in order, info) is the one the
sequential reader and checker give, for a good directory and for broken ones, with one
worker or two (docs/building.md, "Checking a shard directory")."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from collc.backends.shards import read_shards
from collc.check import check_parsed
from collc.backends import shard_check
from collc.check.findings import Report
from collc.check.xml import kernel
from collc.cli import main
from collc.errors import EmitError
from collc.limits import Dialect

Capture = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """128 ranks (the fewest that take workers), 255 steps each (the kernel once it has run), no
    tb sharing a slot with another (so no race to track: the kernel decides)."""
    out = tmp_path_factory.mktemp("shards") / "ring128"
    assert main(["build", "--topology", "ring:128", "--algorithm", "ring", "--collective", "allreduce",
                 "--shard-per-rank", "-o", str(out)]) == 0
    return out


@pytest.fixture
def warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let 32640 steps take the kernel, as they do once it has run in the process: the workers'
    path decides only runs the kernel passes."""
    if kernel._compiled() is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(kernel, "_RAN", True)


def _sequential(d: Path) -> dict[str, object]:
    return check_parsed(read_shards(d), Dialect.EXECUTOR, sharded=True).to_json()


def _parallel(d: Path, jobs: int) -> dict[str, object]:
    return shard_check.check_shard_dir(d, Dialect.EXECUTOR, jobs=jobs).to_json()


def _copy(good: Path, tmp_path: Path) -> Path:
    d = tmp_path / "copy"
    shutil.copytree(good, d)
    return d


def _edit(d: Path, rank: int, change: Callable[[str], str]) -> None:
    f = next((d / f"rank-{rank}").iterdir())
    text = f.read_text()
    new = change(text)
    assert new != text
    f.write_text(new)


def test_good_directory_takes_the_columns(good: Path, warm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    want = _sequential(good)
    assert want["ok"] is True

    def no_objects(path: object) -> None:
        raise AssertionError("read as objects: the workers' path did not decide")

    monkeypatch.setattr(shard_check, "read_shards", no_objects)
    assert _parallel(good, 1) == want
    assert _parallel(good, 2) == want


def _cnt_of_first_send(text: str) -> str:
    at = text.index('type="s"')
    cnt = text.index('cnt="', at) + len('cnt="')
    return text[:cnt] + "7" + text[cnt:]


BROKEN: dict[str, Callable[[Path], None]] = {
    # a send's count no longer matches its receive: matching and the simulation find it
    "count": lambda d: _edit(d, 5, _cnt_of_first_send),
    # a channel outside nchannels: a per-gpu rule in the worker
    "chan": lambda d: _edit(d, 9, lambda t: t.replace('chan="0">', 'chan="9">', 1)),
    # a header that differs from rank 0's
    "header": lambda d: _edit(d, 17, lambda t: t.replace('proto="Simple"', 'proto="LL"', 1)),
    # not collc's layout: the sequential reader takes lxml
    "layout": lambda d: _edit(d, 33, lambda t: t.replace("<step ", "<step  ", 1)),
    # a dependency on a tb that does not exist
    "deps": lambda d: _edit(d, 64, lambda t: t.replace('depid="-1" deps="-1"', 'depid="9" deps="0"', 1)),
    # a second file in a rank's directory
    "two files": lambda d: (d / "rank-3" / "extra.xml").write_text("<algo/>\n"),
    # a rank missing: the workers find nothing, the whole-program rule does
    "missing rank": lambda d: shutil.rmtree(d / "rank-100"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_directory_same_report(case: str, good: Path, tmp_path: Path, warm: None) -> None:
    d = _copy(good, tmp_path)
    BROKEN[case](d)
    want = _sequential(d)
    assert want["ok"] is (case == "layout")     # lxml reads the other layout as the same program
    assert _parallel(d, 1) == want
    assert _parallel(d, 2) == want


def test_unreadable_shard_same_error(good: Path, tmp_path: Path) -> None:
    d = _copy(good, tmp_path)
    next((d / "rank-7").iterdir()).write_bytes(b"<algo \xff\n")
    with pytest.raises(EmitError) as seq:
        read_shards(d)
    with pytest.raises(EmitError) as par:
        shard_check.check_shard_dir(d, Dialect.EXECUTOR, jobs=2)
    assert str(par.value) == str(seq.value)


def test_cli_jobs_same_output(good: Path, tmp_path: Path, capsys: Capture) -> None:
    d = _copy(good, tmp_path)
    BROKEN["count"](d)
    outs = []
    for jobs in ("1", "2"):
        assert main(["check", "--json", "--jobs", jobs, str(d)]) == 1
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert outs[0][0]["ok"] is False


def test_cli_bad_jobs_refused(good: Path, capsys: Capture) -> None:
    assert main(["check", "--jobs", "0", str(good)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("collc: ") and "--jobs 0" in err


def test_report_type(good: Path) -> None:
    assert isinstance(shard_check.check_shard_dir(good, Dialect.EXECUTOR, jobs=1), Report)
