"""Where the shared corpora are: ``../shared`` next to the repository (the CI layout),
or ``../../shared`` for a git worktree one level deeper.  Tests skip when neither exists."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]


def shared(*parts: str) -> Path:
    for base in (_ROOT / ".." / "shared", _ROOT / ".." / ".." / "shared"):
        p = base.joinpath(*parts).resolve()
        if p.exists():
            return p
    return (_ROOT / ".." / "shared").joinpath(*parts).resolve()
