"""The real MSCCL++ execution plans of the shared corpus (``../shared/corpora/mscclpp-plans``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._shared import missing, shared

PLANS = shared("corpora", "mscclpp-plans")


def plan_files() -> list[Path]:
    return sorted(p for p in PLANS.rglob("*.json") if p.is_file()) if PLANS.is_dir() else []


def name(path: Path) -> str:
    return path.relative_to(PLANS).as_posix()


def plan_params() -> list[object]:
    files = plan_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=missing("corpora", "mscclpp-plans")),
                             id="no-corpus")]
    return [pytest.param(p, id=name(p)) for p in files]


def plan_path(rel: str) -> Path:
    path = PLANS / rel
    if not path.is_file():
        pytest.skip(f"plan corpus file not found: {path}")
    return path
