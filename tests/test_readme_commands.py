"""Every ``collc`` command line in README.md's fenced code blocks runs, as a user would run it.

The lines run in README order in one temporary directory that holds what a checkout gives a user
(``schedules/`` and the example inputs under ``tests/fixtures/``), so an example may use a file an
earlier one wrote. Each runs in-process through ``collc.cli.main`` and must exit 0, or the code a
trailing ``# exits N`` comment documents (then with one ``collc: `` line on stderr). Lines that
need a cluster (``torchrun``, ``mpirun``) are not ``collc`` lines; ``collc bench run`` appears only
with ``--dry-run``. The README also promises its first screen: the hardware table within the
first 60 lines.

The fixtures are hand-written in the real formats (``tests/fixtures/README.md``), not measurements.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from collc.cli import main

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
EXITS = re.compile(r"#\s*exits (\d+)\b")
# every command and subcommand the README promises one example of
COMMANDS = ("list", "topology show", "topology import", "topology find", "build", "check", "simulate",
            "compare", "tune", "bench run", "bench parse", "bench report")


@dataclass(frozen=True)
class Example:
    line: int          # README line where the command starts
    argv: tuple[str, ...]
    exit: int          # the documented exit code


def examples(text: str) -> list[Example]:
    """The ``collc`` command lines of the fenced code blocks, backslash continuations joined."""
    found: list[Example] = []
    fence = False
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            continue
        if not pending:
            start = n
        pending.append(raw.rstrip().removesuffix("\\"))
        if raw.rstrip().endswith("\\"):
            continue
        command = " ".join(part.strip() for part in pending)
        pending = []
        if not command.startswith("collc "):
            continue
        code = EXITS.search(command)
        words = shlex.split(command, comments=True)
        found.append(Example(start, tuple(words[1:]), int(code.group(1)) if code else 0))
    return found


README_EXAMPLES = examples(README.read_text())


def test_the_readme_has_an_example_of_every_command() -> None:
    seen = {" ".join(e.argv[:2]) for e in README_EXAMPLES} | {e.argv[0] for e in README_EXAMPLES}
    missing = [c for c in COMMANDS if c not in seen]
    assert not missing, f"README.md has no collc example of {missing}"


def test_examples_are_plain_command_lines() -> None:
    """No shell syntax the in-process run would pass as arguments; no cluster run."""
    for e in README_EXAMPLES:
        shell = [w for w in e.argv if w in ("|", "||", "&&", ";", ">", ">>", "<") or "$" in w]
        assert not shell, f"README.md:{e.line}: shell syntax {shell} in a collc example"
        if e.argv[:2] == ("bench", "run"):
            assert "--dry-run" in e.argv, f"README.md:{e.line}: bench run needs a cluster without --dry-run"


def test_the_readme_is_for_users() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines; move reference material to docs/"
    first = "\n".join(lines[:60])
    assert "## Start here by hardware" in first and "| one DGX A100" in first and "did MSCCL run?" in first
    assert "python -m collc" not in text and "../shared" not in text
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        assert (REPO / link).exists(), f"README.md links {link}, which does not exist"


def test_examples_extraction() -> None:
    text = "x\n```sh\ncollc a --b c \\\n    --d 'e f'   # exits 2: why\necho collc\n  collc z\n```\ncollc outside\n"
    assert examples(text) == [Example(3, ("a", "--b", "c", "--d", "e f"), 2), Example(6, ("z",), 0)]


def test_every_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(REPO / "schedules", tmp_path / "schedules")
    shutil.copytree(REPO / "tests" / "fixtures", tmp_path / "tests" / "fixtures")
    monkeypatch.chdir(tmp_path)
    assert len(README_EXAMPLES) >= len(COMMANDS)
    failures: list[str] = []
    for e in README_EXAMPLES:
        capsys.readouterr()
        try:
            code = main(list(e.argv))
        except SystemExit as exc:           # argparse's --version and --help
            code = exc.code if isinstance(exc.code, int) else 2
        err = capsys.readouterr().err
        if code != e.exit:
            failures.append(f"README.md:{e.line}: collc {shlex.join(e.argv)}: exit {code}, documented "
                            f"{e.exit}\n{err[-600:]}")
        elif code == 2 and not (err.startswith("collc: ") and err.count("\n") == 1):
            failures.append(f"README.md:{e.line}: exit 2 without exactly one 'collc: ' line: {err!r}")
    assert not failures, "\n".join(failures)
