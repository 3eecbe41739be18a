"""Imports follow the pipeline: no module imports a stage that comes after its own.

Stages, lowest first (a module may import its own stage and any earlier one):
base (_startup, clock, errors, inputs, memory, outputs, and ``compiler.limits``: the runtimes' limits, which a
frontend's layout choice needs) -> topology -> ir -> frontends -> compiler -> check ->
backends -> sim -> driver -> tuning -> runtime_tests -> layout_cmd -> cli.  ``ir`` sits below ``frontends``
because a frontend's output is IR; ``check`` (the checker of any runtime file) reads a
Program and imports no backend, and the event simulator takes its runtime model from it.
Imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "collc"
ORDER = ["base", "topology", "ir", "frontends", "compiler", "check", "backends", "sim", "driver", "tuning", "show",
         "runtime_tests", "layout_cmd", "cli"]
BASE = {"collc", "collc._startup", "collc.arrays", "collc.clock", "collc.errors", "collc.inputs", "collc.memory", "collc.outputs",
        "collc.limits"}


def stage(module: str) -> int:
    if module in BASE:
        return 0
    if module == "collc.__main__":      # ``python -m collc``: the CLI's entry point
        return ORDER.index("cli")
    part = module.split(".")[1]
    return ORDER.index(part)


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), path))
    return out


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("collc"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("collc")}
    return found


MODULES = modules()


def test_every_module_has_a_stage() -> None:
    for name, _ in MODULES:
        stage(name)


@pytest.mark.parametrize("name, path", MODULES, ids=[m for m, _ in MODULES])
def test_no_import_against_the_pipeline(name: str, path: Path) -> None:
    own = stage(name)
    against = sorted(m for m in imports(path) if stage(m) > own)
    assert not against, f"{name} ({ORDER[own]}) imports later stages: {against}"
