"""Where the shared corpora are: ``../shared`` next to the repository (the CI layout).
Tests that read them skip, naming the folder, only when it is absent."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]


def shared(*parts: str) -> Path:
    return (_ROOT / ".." / "shared").joinpath(*parts).resolve()
