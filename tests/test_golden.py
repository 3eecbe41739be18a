"""Golden XMLs and MSCCL++ plans: the compiler's output for a few small cases must not change by accident.

Regenerate with ``python scripts/regen_golden.py`` after an intended change and
review the diff.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from collc.backends.msccl_xml import parse_xml
from collc.backends.mscclpp import parse_plan
from collc.check.plan.check import check_plan
from collc.limits import Dialect
from collc.check import check_parsed

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "regen_golden.py"


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("regen_golden", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GOLDEN = _module()
RENDERED = GOLDEN.render()


@pytest.mark.parametrize("path", sorted(RENDERED), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_matches(path: Path) -> None:
    assert path.exists(), f"missing golden file {path}; run scripts/regen_golden.py"
    assert path.read_text() == RENDERED[path], f"{path} changed; review and run scripts/regen_golden.py"


@pytest.mark.parametrize("path", sorted(RENDERED), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_passes_check(path: Path) -> None:
    if path.suffix == ".json":
        rep = check_plan(parse_plan(path.read_text(), str(path)), str(path))
        assert rep.ok, [f.message for f in rep.errors()][:3]
        return
    dialect = Dialect.LEGACY if "legacy" in path.stem else Dialect.EXECUTOR
    assert check_parsed(parse_xml(path.read_text(), str(path)), dialect).ok
