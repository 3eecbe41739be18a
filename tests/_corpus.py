"""Shared access to the real-world MSCCL XML corpus (``msccl-corpus`` of ``tests._shared``).

Parsing and checking the 63 files takes a few seconds, so parsed files and reports
are cached for the whole test session and shared by the backend and checker tests.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from collc.backends.msccl_xml import read_xml
from collc.compiler.msccl.program import ParsedFile
from collc.limits import Dialect
from collc.check import Report, check_parsed
from tests._shared import missing, shared

CORPUS = shared("msccl-corpus")
EXPECTED_FILES = 63
EXECUTOR_KEYS = ("minBytes", "maxBytes", "outofplace")

_ALGO_TAG = re.compile(r"<algo\s[^>]*>")
_ATTR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*.xml") if p.is_file())


def rel(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()


def corpus_params(only: str | None = None) -> list[object]:
    """Parameters for tests over the corpus files (``only``: "executor" or "legacy" files).

    When the corpus is absent the list holds one entry that skips.
    """
    files = corpus_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=missing("msccl-corpus")), id="no-corpus")]
    if only is not None:
        files = [p for p in files if is_executor_file(p) == (only == "executor")]
    return [pytest.param(p, id=rel(p)) for p in files]


@lru_cache(maxsize=None)
def algo_attrs(path: Path) -> dict[str, str]:
    """The attributes of the file's ``<algo>`` start tag, read with a regex (independent of the reader)."""
    text = path.read_text(encoding="utf-8")
    m = _ALGO_TAG.search(text)
    assert m is not None, f"{path} has no <algo> tag"
    return dict(_ATTR.findall(m.group()))


def is_executor_file(path: Path) -> bool:
    attrs = algo_attrs(path)
    return all(k in attrs for k in EXECUTOR_KEYS)


@lru_cache(maxsize=None)
def parsed(path: Path) -> ParsedFile:
    return read_xml(path)


@lru_cache(maxsize=None)
def report(path: Path, dialect: Dialect) -> Report:
    return check_parsed(parsed(path), dialect)
