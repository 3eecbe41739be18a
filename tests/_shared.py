"""Where the shared corpora are: the folder named by ``COLLC_CORPUS``, else ``../shared`` next to the
repository (the CI layout).  A user's clone has neither: tests that read the corpora skip, naming the
folder they looked for, and every other test passes without them."""

from __future__ import annotations

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]

#: The environment variable that points at a folder holding ``msccl-corpus/`` and ``corpora/``.
ENV = "COLLC_CORPUS"


def shared_root() -> Path:
    given = os.environ.get(ENV)
    return Path(given).resolve() if given else (_ROOT / ".." / "shared").resolve()


def shared(*parts: str) -> Path:
    return shared_root().joinpath(*parts)


def have(*parts: str) -> bool:
    """Whether that part of the corpora is here."""
    return shared(*parts).exists()


def missing(*parts: str) -> str:
    """The one skip reason for a missing corpus folder."""
    return f"corpus folder {shared(*parts)} not found (set {ENV} to a folder holding msccl-corpus/ and corpora/)"
