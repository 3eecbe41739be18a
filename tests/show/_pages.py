"""Pages the show tests share: built once per session into a temporary folder (docs/show.md)."""

from __future__ import annotations

from pathlib import Path

from collc.cli import main

#: (golden file, the topology it was built for) -- scripts/regen_golden.py's cases.
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def golden_cases() -> list[tuple[Path, str]]:
    """Every golden XML and plan with its topology spec, read from regen_golden's case tables."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "scripts" / "regen_golden.py"
    spec = importlib.util.spec_from_file_location("regen_golden_show", script)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = [(GOLDEN / alg / f"{case}.xml", topo) for alg, case, topo, _, _ in mod.CASES]
    out += [(GOLDEN / alg / f"{case}.mscclpp.json", topo) for alg, case, topo, _, _ in mod.PLAN_CASES]
    return sorted({(p, t) for p, t in out if p.exists()})


def show(path: Path | str, topology: str, out: Path, *extra: str) -> Path:
    code = main(["show", str(path), "--topology", topology, "--sizes", "1KiB:16MiB", "--size", "1MiB",
                 *extra, "-o", str(out)])
    assert code == 0
    return out
