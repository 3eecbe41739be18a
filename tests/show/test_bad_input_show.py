"""Bad input to ``collc show`` and the --html options: exit 2, one line, no file left
(the harness of tests/test_bad_input.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_bad_input import _readonly, _scratch, run_refused

CASES: list[tuple[str, list[str], str]] = [
    ("show-no-topology", ["show", "{d}/good.xml", "-o", "{d}/x.html"], "pass --topology"),
    ("show-absent", ["show", "{d}/absent.xml", "--topology", "ring:4", "-o", "{d}/x.html"], "no such file"),
    ("show-wrong-ranks", ["show", "{d}/good.xml", "--topology", "ring:8", "-o", "{d}/x.html"], "ranks"),
    ("show-bad-size", ["show", "{d}/good.xml", "--topology", "ring:4", "--size", "lots", "-o", "{d}/x.html"],
     "size"),
    ("show-bad-sizes", ["show", "{d}/good.xml", "--topology", "ring:4", "--sizes", "9:1", "-o", "{d}/x.html"],
     "size range"),
    ("show-bad-topology", ["show", "{d}/good.xml", "--topology", "torus:0x3", "-o", "{d}/x.html"], "torus"),
    ("show-readonly-out", ["show", "{d}/good.xml", "--topology", "ring:4", "-o", "{ro}/x.html"], "x.html"),
    ("show-not-xml", ["show", "{d}/notxml.xml", "--topology", "ring:4", "-o", "{d}/x.html"], "notxml.xml"),
    ("show-fifo", ["show", "{d}/fifo.xml", "--topology", "ring:4", "-o", "{d}/x.html"], "FIFO"),
    ("compare-html-dir", ["compare", "--topology", "ring:4", "--collective", "allreduce", "--algorithm", "ring",
                          "--html", "{d}"], "--html"),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-show")
    _scratch(d)
    return d


@pytest.mark.parametrize("argv,needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_show_input(scratch: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    ro = _readonly(scratch)
    args = [a.replace("{d}", str(scratch)).replace("{ro}", ro) for a in argv]
    run_refused(scratch, capsys, args, needle)
