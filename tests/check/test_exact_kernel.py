"""The exact data check in the compiled kernel (collc.check.xml.kernel, exact mode) against the
symbolic model (collc.check.xml.executor with collc.ir.symbolic.ExactDomain).

The kernel carries distinct random 64-bit inputs summed modulo 2^64, each value's origin
chunk, leaf count, origin-rank mask (up to 64 ranks) and reduction-tree hash; the symbolic
model is the reference, and is rerun only to name what a failing kernel run found wrong.
On hand-broken programs (a dropped, a doubled and a dead doubled reduction, chunks mixed, a
wrong copy) and on random builds and mutations, both give the same verdict, the same data
errors and the same reduction-order warning.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_

from collc.backends.msccl_xml import parse_xml
from collc.check import check_program
from collc.check.xml import kernel
from collc.check.xml.checker import _collective_of
from collc.check.xml.executor import SimResult, simulate
from collc.check.runtime_model import buffering_model, size_model
from collc.compiler.msccl.program import Program
from collc.ir.collective import Collective
from collc.limits import Dialect
from tests.check.test_checker import algo, allreduce2, order_allreduce3, st, tb
from tests.check.test_kernel import MUTATIONS, PYTHON_ONLY, mutate, programs


def _program(text: str) -> tuple[Program, Collective]:
    p = parse_xml(text, "hand.xml").program
    return p, _collective_of(p, bool(p.inplace), None)


def _both(p: Program, coll: Collective) -> tuple[SimResult, SimResult, kernel.KernelResult]:
    """The symbolic run, the run through the kernel, and the kernel's own verdict."""
    model = size_model(p.proto, p.nchunksperloop, None)
    py = simulate(p, coll, model, races=False, kernel_min_steps=PYTHON_ONLY)
    fast = simulate(p, coll, model, races=False, kernel_min_steps=0)
    lay = kernel.layout(p, None)
    assert lay is not None
    k = kernel.run(p, coll, model, lay, True, 1, exact=True)
    assert k is not None
    return py, fast, k


@pytest.fixture
def forced() -> Iterator[None]:
    """Every run takes the kernel (its thresholds at 0)."""
    saved = kernel.KERNEL_MIN_STEPS, kernel.KERNEL_WARM_MIN_STEPS, kernel.KERNEL_UNCACHED_MIN_STEPS
    kernel.KERNEL_MIN_STEPS = kernel.KERNEL_WARM_MIN_STEPS = kernel.KERNEL_UNCACHED_MIN_STEPS = 0
    try:
        yield
    finally:
        kernel.KERNEL_MIN_STEPS, kernel.KERNEL_WARM_MIN_STEPS, kernel.KERNEL_UNCACHED_MIN_STEPS = saved


def dropped_reduction() -> str:
    """gpu 0 receives its peer's chunk with a plain copy instead of reducing it in."""
    return allreduce2().replace('<step s="0" type="rrc"', '<step s="0" type="r"', 1)


def dead_double() -> str:
    """order_allreduce3 plus a tb on gpu 0 that adds rank 0's chunk to itself in scratch, a
    value no output depends on: its leaf count (2) stays within the 3 ranks, so only the
    origin-rank masks see it."""
    text = order_allreduce3()
    extra = ('    <tb id="2" send="-1" recv="-1" chan="0">\n'
             '      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>\n'
             '      <step s="1" type="re" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>\n'
             '    </tb>\n  </gpu>\n  <gpu id="1"')
    text = text.replace('  </gpu>\n  <gpu id="1"', extra, 1)
    return text.replace('<gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0">', '<gpu id="0" i_chunks="1" o_chunks="1" s_chunks="1">')


def mixed_chunks() -> str:
    """A 2-chunk allreduce where gpu 0 reduces its peer's chunk 1 into its own chunk 0."""
    def rank(g: int, off: int) -> tuple[int, int, int, list[tuple[int, int, int, tuple[object, ...]]]]:
        p = 1 - g
        return (2, 0, 0, [tb(p, -1, st("s", "i", 0, "i", 0, 2, hasdep=1)),
                          tb(-1, p, st("rrc", "i", off, "i", 0, 1, depid=0, deps=0),
                             st("rrc", "i", 1, "i", 1, 1))])
    return algo("allreduce", [rank(0, 1), rank(1, 0)], nchunksperloop=2, inplace=1)


def allgather2(swap: bool) -> str:
    """A 2-rank allgather of 2 chunks each; ``swap``: gpu 0 copies its own two chunks crossed."""
    def rank(g: int) -> tuple[int, int, int, list[tuple[int, int, int, tuple[object, ...]]]]:
        p = 1 - g
        own = [st("cpy", "i", 1, "o", 2 * g, 1), st("cpy", "i", 0, "o", 2 * g + 1, 1)] if swap and g == 0 \
            else [st("cpy", "i", 0, "o", 2 * g, 2)]
        return (2, 4, 0, [tb(p, p, st("s", "i", 0, "i", 0, 2), st("r", "o", 2 * p, "o", 2 * p, 2), *own)])
    return algo("allgather", [rank(0), rank(1)], nchunksperloop=4)


@pytest.mark.parametrize("text, needle", [
    (allreduce2(), None),
    (order_allreduce3(), None),
    (allgather2(False), None),
    (dropped_reduction(), "rank 0 output chunk 0 holds chunk 0 of rank(s) {1}, expected chunk 0 of rank(s) {0, 1}"),
    (allreduce2(gpu1_sends=2), "gpu 0 tb 1 step 1 (rrc): counts the contribution of rank(s) {1} to chunk 0 twice"),
    (dead_double(), "gpu 0 tb 2 step 1 (re): counts the contribution of rank(s) {0} to chunk 0 twice"),
    (mixed_chunks(), "different chunks are never summed"),
    (allgather2(True), "rank 0 output chunk 0 holds chunk 1 of rank(s) {0}, expected chunk 0 of rank(s) {0}"),
], ids=["allreduce2", "order3", "allgather2", "dropped", "doubled", "dead-double", "mixed", "wrong-copy"])
def test_the_kernel_finds_what_the_symbolic_model_finds(text: str, needle: str | None) -> None:
    p, coll = _program(text)
    py, fast, k = _both(p, coll)
    assert py.finished and k.finished
    if needle is None:
        assert not py.data_errors and k.data_ok
        assert k.order == py.order_warnings
    else:
        assert any(needle in e for e in py.data_errors), py.data_errors
        assert not k.data_ok
    # through simulate: the kernel's verdict, the symbolic model's words
    assert fast == py


def test_the_reduction_order_warning_comes_from_the_tree_hashes() -> None:
    """order_allreduce3: rank 2 holds (i0 + i2) + i1, the others (i0 + i1) + i2 -- the same sum,
    different trees; the kernel sees it without the symbolic model."""
    p, coll = _program(order_allreduce3())
    py, _, k = _both(p, coll)
    assert py.order_warnings and k.order == py.order_warnings
    assert "input chunk(s) [0] in different orders" in k.order[0]


def test_check_program_gives_the_same_findings_through_the_kernel(forced: None) -> None:
    texts = [allreduce2(), order_allreduce3(), dropped_reduction(), allreduce2(gpu1_sends=2), dead_double(),
             mixed_chunks(), allgather2(True)]
    for text in texts:
        p, _ = _program(text)
        fast = check_program(p, Dialect.EXECUTOR)
        kernel.KERNEL_MIN_STEPS = kernel.KERNEL_WARM_MIN_STEPS = kernel.KERNEL_UNCACHED_MIN_STEPS = PYTHON_ONLY
        slow = check_program(p, Dialect.EXECUTOR)
        kernel.KERNEL_MIN_STEPS = kernel.KERNEL_WARM_MIN_STEPS = kernel.KERNEL_UNCACHED_MIN_STEPS = 0
        assert [(f.code, f.severity, f.message) for f in fast.findings] == \
               [(f.code, f.severity, f.message) for f in slow.findings]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st_.integers(0, 10_000), st_.sampled_from(MUTATIONS), st_.integers(0, 1000), st_.integers(0, 1000),
       st_.sampled_from([None, 1, 3]))
def test_kernel_and_symbolic_verdicts_agree(which: int, how: str, a: int, b: int, pieces: int | None) -> None:
    """Random builds of the families on small topologies (and goldens, corpus files), mutated
    or not: the exact check through the kernel returns what the symbolic model returns."""
    progs = programs()
    _, p, coll = progs[which % len(progs)]
    q = mutate(p, how, a, b)
    model = size_model(q.proto, q.nchunksperloop, None) if pieces is None else buffering_model(pieces)
    py = simulate(q, coll, model, races=False, kernel_min_steps=PYTHON_ONLY)
    assert simulate(q, coll, model, races=False, kernel_min_steps=0) == py
    lay = kernel.layout(q, None)
    k = kernel.run(q, coll, model, lay, True, 1, exact=True) if lay is not None else None
    if k is not None:
        assert (k.finished and k.data_ok) == (py.finished and not py.data_errors)
        if k.finished and k.data_ok:
            assert k.order == py.order_warnings

