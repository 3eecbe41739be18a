"""Each lowering pass on a small input, against its expected output as text (filecheck style).

A fixture ``tests/compiler/fixtures/<pass>/<case>.txt`` holds the input of one pass
(what the passes before it made of a small schedule), rendered as text, and the
pass's output; ``<case>_invalid.txt`` holds an input the pass must refuse and the
exact message.  The test renders both again and compares them with the file, so a
change of any pass shows as a readable diff of that pass alone.  Regenerate after
an intended change with ``python scripts/regen_golden.py`` (which calls
:func:`render_fixtures`) and review the diff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from collc.compiler.msccl.dependencies import build_gpu
from collc.compiler.dump import show_chops, show_gpu, show_op as _op, show_plan, show_schedule, show_tbs
from collc.compiler.msccl.fusion import fuse_rank
from collc.limits import Dialect
from collc.compiler.pipeline import LowerOptions, enforce_limits, lower
from collc.compiler.pipelining import split_chunks
from collc.compiler.msccl.program import Program
from collc.compiler.scratch import expand
from collc.compiler.transfers import TransferTable
from collc.compiler.msccl.threadblocks import channel_ops, rank_threadblocks
from collc.errors import CollcError
from collc.frontends.registry import build_schedule
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Provenance, Schedule, Transfer
from collc.topology import parse_spec

FIXTURES = Path(__file__).resolve().parent / "fixtures"
I, O = Buffer.INPUT, Buffer.OUTPUT


# ---------------------------------------------------------------------- cases: (pass, case) -> (input, output)
@dataclass(frozen=True)
class Case:
    alg: str
    spec: str
    kind: CollKind
    inplace: bool = False
    chunks: int = 1

    @property
    def title(self) -> str:
        return (f"{self.alg} on {self.spec}, {self.kind.value}, {'in' if self.inplace else 'out of'} place"
                + (f", chunks={self.chunks}" if self.chunks > 1 else ""))

    def schedule(self) -> Schedule:
        return build_schedule(self.alg, parse_spec(self.spec), self.kind, self.inplace)


CASES = {
    "ring3-allgather": Case("ring", "ring:3", CollKind.ALLGATHER),
    "ring3-allreduce-inplace": Case("ring", "ring:3", CollKind.ALLREDUCE, True),
    "rd4-allreduce-chunks2": Case("recursive-doubling", "switch:4", CollKind.ALLREDUCE, True, 2),
    "direct3-alltoall": Case("direct", "switch:3", CollKind.ALLTOALL),
}


def _pass_chain(case: Case) -> dict[str, tuple[list[str], list[str]]]:
    """Per pass: the text of its input and of its output (rank 0 for the per-rank passes)."""
    s = case.schedule()
    split = split_chunks(TransferTable.of(s), case.chunks, 1)
    plan = expand(split)
    rank0 = plan.by_rank()[0]
    chops = channel_ops(rank0, 1)
    tbs = rank_threadblocks(0, chops, True)
    fused = fuse_rank(plan.collective, 0, tbs)
    gpu = build_gpu(plan.collective, 0, fused, plan.scratch[0]).to_gpu()
    return {
        "pipelining": (show_schedule(s), show_schedule(split.schedule())),
        "scratch": (show_schedule(split.schedule()), show_plan(plan)),
        "channels": (["plan rank 0"] + ["  " + _op(o) for o in rank0.ops()], ["channels rank 0"] + show_chops(chops)),
        "threadblocks": (["channels rank 0"] + show_chops(chops), ["tbs rank 0"] + show_tbs(tbs)),
        "fusion": (["tbs rank 0"] + show_tbs(tbs), ["fused rank 0"] + show_tbs(fused)),
        "dependencies": (["fused rank 0"] + show_tbs(fused), ["program rank 0"] + show_gpu(gpu)),
    }


def _small_program() -> Program:
    return lower(CASES["ring3-allgather"].schedule(), LowerOptions())


#: Inputs each pass must refuse, with the input's text and the refusal.
INVALID: dict[tuple[str, str], tuple[Callable[[], list[str]], Callable[[], object]]] = {
    ("pipelining", "zero-parts"): (
        lambda: show_schedule(CASES["ring3-allgather"].schedule()) + ["parts=0 instances=1"],
        lambda: split_chunks(TransferTable.of(CASES["ring3-allgather"].schedule()), 0, 1)),
    ("scratch", "local-copy-racing-its-step"): (
        lambda: show_schedule(_racing()), lambda: expand(TransferTable.of(_racing()))),
    ("limits", "rccl-tbs-per-gpu"): (
        lambda: ["program ring ring:3 allgather, gpu 0 given 65 tbs, rccl dialect"],
        lambda: enforce_limits(_with_tbs(_small_program(), 65), Dialect.RCCL)),
    ("limits", "channels"): (
        lambda: ["program ring ring:3 allgather with nchannels=33, executor dialect"],
        lambda: enforce_limits(_with_channels(_small_program(), 33), Dialect.EXECUTOR)),
}


def _racing() -> Schedule:
    """Rank 0 copies i[0] while rank 1 overwrites that very chunk in the same step."""
    coll = Collective(CollKind.ALLREDUCE, 2, 2)
    return Schedule(coll, (Transfer(0, 0, 0, I, (0,), O, (0,)), Transfer(0, 1, 0, I, (1,), I, (0,))),
                    Provenance("t"))


def _with_tbs(p: Program, count: int) -> Program:
    from dataclasses import replace
    g0 = p.gpus[0]
    tbs = tuple(replace(g0.tbs[0], id=k, send=-1, recv=-1, steps=g0.tbs[0].steps[:1]) for k in range(count))
    return replace(p, gpus=(replace(g0, tbs=tbs),) + p.gpus[1:])


def _with_channels(p: Program, n: int) -> Program:
    from dataclasses import replace
    return replace(p, nchannels=n)


def _error_of(run: Callable[[], object]) -> str:
    try:
        run()
    except CollcError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def render_fixtures() -> dict[Path, str]:
    """Every fixture file's text, as the passes make it now."""
    out: dict[Path, str] = {}
    for name, case in CASES.items():
        for pas, (given, made) in _pass_chain(case).items():
            out[FIXTURES / pas / f"{name}.txt"] = "\n".join(
                [f"# pass: {pas}", f"# case: {case.title}", "## input"] + given + ["## output"] + made) + "\n"
    for (pas, name), (given, run) in INVALID.items():
        out[FIXTURES / pas / f"{name}_invalid.txt"] = "\n".join(
            [f"# pass: {pas}", "## input"] + given() + ["## error", _error_of(run)]) + "\n"
    return out


RENDERED = sorted(render_fixtures().items())


@pytest.mark.parametrize("path, text", RENDERED, ids=[f"{p.parent.name}/{p.stem}" for p, _ in RENDERED])
def test_pass_fixture(path: Path, text: str) -> None:
    assert path.exists(), f"missing fixture {path.relative_to(FIXTURES)}: run scripts/regen_golden.py"
    assert path.read_text() == text, f"{path.relative_to(FIXTURES)} differs: run scripts/regen_golden.py, review"


def test_every_pass_has_fixtures() -> None:
    from collc.compiler.pipeline import PASS_NAMES
    passes = {p.parent.name for p, _ in RENDERED}
    assert passes == set(PASS_NAMES), set(PASS_NAMES) ^ passes
    invalid = {p.parent.name for p, _ in RENDERED if p.stem.endswith("_invalid")}
    assert invalid and all("no error" not in t for p, t in RENDERED if p.stem.endswith("_invalid"))


def test_no_stale_fixture_files() -> None:
    on_disk = set(FIXTURES.rglob("*.txt"))
    assert on_disk == {p for p, _ in RENDERED}
