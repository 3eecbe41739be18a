"""The compiled executor kernel against the Python model (collc.check.xml.executor.simulate).

Property: on every program -- golden files, corpus files, programs the driver builds on small
topologies, and mutations of them that deadlock or compute wrong data -- at any buffering and
message size, the kernel and the Python model agree on whether the run finishes, how many
pieces moved, why each tb is blocked (data off), and whether the numeric data check passes.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collc.backends.msccl_xml import parse_xml, read_xml
from collc.check import check_program
from collc.check.xml import kernel
from collc.check.xml.checker import _collective_of, _placements, _roots
from collc.check.xml.executor import SimResult, simulate
from collc.check.data import _mismatches
from collc.check.runtime_model import SizeModel, buffering_model, size_model
from collc.limits import Dialect
from collc.compiler.msccl.program import Program, Proto, Step, StepType, Threadblock
from collc.driver import compile_xml
from collc.errors import CollcError
from collc.ir.collective import CollKind, Collective
from collc.ir.symbolic import NumericExpectation, leaf_at
from collc.topology import parse_spec
from tests._corpus import corpus_files

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
PYTHON_ONLY = 1 << 62      # kernel_min_steps that keeps every run in Python
BUILDS: tuple[tuple[str, str, CollKind, dict[str, Any]], ...] = (("ring:8", "ring", CollKind.ALLREDUCE, {}), ("ring:4", "ring", CollKind.ALLREDUCE, {"chunks": 3}),
          ("ring:6", "ring", CollKind.ALLGATHER, {"proto": Proto.LL}),
          ("hypercube:3", "recursive-halving-doubling", CollKind.REDUCESCATTER, {}),
          ("hypercube:3", "recursive-halving-doubling", CollKind.ALLREDUCE, {"instances": 2}),
          ("torus:4x4", "multitree", CollKind.ALLGATHER, {}), ("torus:4x4", "swing", CollKind.ALLREDUCE, {}),
          ("switch:8", "direct", CollKind.ALLTOALL, {}), ("switch:8", "double-binary-tree", CollKind.ALLREDUCE, {}),
          ("ring:5", "ring", CollKind.ALLREDUCE, {"inplace": False, "chunks": 2}),
          # one build per family, so that the property holds its counts from collc's own programs alone
          # (a clone without the shared corpus has only these and the goldens)
          ("hypercube:3", "bfb", CollKind.ALLGATHER, {}), ("hypercube:3", "bfb", CollKind.REDUCESCATTER, {}),
          ("hypercube:3", "bfb", CollKind.ALLREDUCE, {}), ("kautz:2,2", "kautz-m", CollKind.ALLGATHER, {}),
          ("kautz:2,2", "kautz-c", CollKind.ALLREDUCE, {}), ("dfc:3x3", "dfc-do", CollKind.ALLGATHER, {}),
          ("dfc:3x3", "dfc-md", CollKind.ALLREDUCE, {}), ("switch:8", "binomial-tree", CollKind.BROADCAST, {}),
          ("switch:6", "bruck", CollKind.ALLTOALL, {}), ("switch:6", "pairwise", CollKind.ALLTOALL, {}),
          ("torus:3x3", "hamiltonian-rings", CollKind.ALLREDUCE, {}), ("torus:4x4", "ring-2d", CollKind.ALLREDUCE, {}),
          ("torus:4x4", "bucket", CollKind.ALLREDUCE, {}), ("hypercube:3", "recursive-doubling", CollKind.ALLGATHER, {}),
          ("torus:4x4", "mirrored-recursive-doubling", CollKind.ALLREDUCE, {}),
          ("torus:4x4", "recursive-doubling-torus", CollKind.ALLREDUCE, {}),
          ("torus:3x3", "multitree", CollKind.ALLREDUCE, {"chunks": 2}), ("torus:4x4", "swing", CollKind.REDUCESCATTER, {}),
          ("torus:4x4", "swing", CollKind.ALLGATHER, {}), ("a100:1x8", "forestcoll", CollKind.ALLGATHER, {}),
          ("switch:4", "forestcoll", CollKind.ALLREDUCE, {}), ("ring:4", "ring", CollKind.REDUCESCATTER, {"proto": Proto.LL128}),
          ("switch:8", "direct", CollKind.ALLGATHER, {}), ("ring:8", "ring", CollKind.ALLGATHER, {"chunks": 2}),
          ("switch:8", "bruck", CollKind.ALLTOALL, {}), ("switch:4", "pairwise", CollKind.ALLTOALL, {}),
          ("torus:3x3", "multitree", CollKind.ALLGATHER, {}), ("hypercube:4", "bfb", CollKind.ALLGATHER, {}),
          ("switch:4", "forestcoll", CollKind.ALLGATHER, {}), ("switch:6", "binomial-tree", CollKind.BROADCAST, {"root": 2}),
          ("dfc:2x3", "dfc-do", CollKind.ALLGATHER, {}), ("hypercube:2", "recursive-doubling", CollKind.ALLGATHER, {}))


def _sound(p: Program) -> bool:
    """Whether the checker would simulate ``p`` (structurally sound, a collective it knows)."""
    try:
        CollKind.parse(p.coll)
    except CollcError:
        return False
    rep = check_program(p, Dialect.EXECUTOR)
    return not any(f.message.startswith("simulation skipped") for f in rep.findings)


@lru_cache(maxsize=None)
def programs() -> tuple[tuple[str, Program, Collective], ...]:
    out: list[tuple[str, Program, Collective]] = []
    progs: list[tuple[str, Program]] = [(str(f.relative_to(GOLDEN)), read_xml(f).program)
                                        for f in sorted(GOLDEN.rglob("*.xml"))]
    for f in corpus_files():
        try:
            progs.append((f.name, read_xml(f).program))
        except CollcError:
            continue
    for spec, alg, kind, opts in BUILDS:
        text = compile_xml(parse_spec(spec), alg, kind, **opts).text
        progs.append((f"{alg}-{spec}-{kind.value}", parse_xml(text).program))
    for name, p in progs:
        if not _sound(p):
            continue
        kind = CollKind.parse(p.coll)
        for inplace in _placements(p, Dialect.EXECUTOR):
            try:
                coll = _collective_of(p, inplace, _roots(p, kind, None)[0])
            except CollcError:
                continue
            out.append((f"{name}:{'in' if inplace else 'out'}", p, coll))
    return tuple(out)


def _models(p: Program) -> list[SizeModel]:
    sizes: list[int | None] = [None, 1024, 65536, 1 << 20, 1 << 26]
    return [size_model(p.proto, p.nchunksperloop, n) for n in sizes] + [buffering_model(k) for k in (1, 2, 3, 8)]


# ------------------------------------------------------------------ mutations
def _edit_tb(p: Program, g: int, t: int, tb: Threadblock) -> Program:
    gpu = p.gpus[g]
    tbs = gpu.tbs[:t] + (tb,) + gpu.tbs[t + 1:]
    return replace(p, gpus=p.gpus[:g] + (replace(gpu, tbs=tbs),) + p.gpus[g + 1:])


def _pick(p: Program, a: int, b: int) -> tuple[int, int] | None:
    """A (gpu, tb) with steps, chosen by two draws."""
    cands = [(g, t) for g, gpu in enumerate(p.gpus) for t, tb in enumerate(gpu.tbs) if tb.steps]
    return cands[(a * 7919 + b) % len(cands)] if cands else None


def mutate(p: Program, how: str, a: int, b: int) -> Program:
    where = _pick(p, a, b)
    if where is None or how == "none":
        return p
    g, t = where
    tb = p.gpus[g].tbs[t]
    i = b % len(tb.steps)
    if how == "drop":             # a lost step: its peer waits forever or gets too much
        return _edit_tb(p, g, t, replace(tb, steps=tb.steps[:i] + tb.steps[i + 1:]))
    if how == "cycle":            # two tbs of one GPU wait for each other's last step
        others = [u for u, o in enumerate(p.gpus[g].tbs) if u != t and o.steps]
        if not others:
            return p
        u = others[a % len(others)]
        ob = p.gpus[g].tbs[u]
        steps = list(tb.steps)
        steps[0] = replace(steps[0], depid=ob.id, deps=len(ob.steps) - 1)
        steps[-1] = replace(steps[-1], hasdep=1)
        osteps = list(ob.steps)
        osteps[0] = replace(osteps[0], depid=tb.id, deps=len(steps) - 1)
        osteps[-1] = replace(osteps[-1], hasdep=1)
        q = _edit_tb(p, g, t, replace(tb, steps=tuple(steps)))
        return _edit_tb(q, g, u, replace(ob, steps=tuple(osteps)))
    if how == "depend":           # a dependency on some step of another tb (may or may not block)
        ob = p.gpus[g].tbs[a % len(p.gpus[g].tbs)]
        j = a % max(1, len(ob.steps))
        steps = list(tb.steps)
        steps[i] = replace(steps[i], depid=ob.id, deps=j)
        q = _edit_tb(p, g, t, replace(tb, steps=tuple(steps)))
        if ob.steps:
            u = p.gpus[g].tbs.index(ob)
            ob2 = q.gpus[g].tbs[u]
            marked = ob2.steps[:j] + (replace(ob2.steps[j], hasdep=1),) + ob2.steps[j + 1:]
            q = _edit_tb(q, g, u, replace(ob2, steps=marked))
        return q
    if how == "retype":           # same connections, different data: a wrong sum or a lost write
        swap = {StepType.RECV_REDUCE_SEND: StepType.RECV_COPY_SEND, StepType.RECV_COPY_SEND: StepType.RECV_REDUCE_SEND,
                StepType.RECV_REDUCE_COPY: StepType.RECV, StepType.RECV: StepType.RECV_REDUCE_COPY,
                StepType.COPY: StepType.NOP, StepType.RECV_REDUCE_COPY_SEND: StepType.RECV_COPY_SEND}
        s = tb.steps[i]
        new = swap.get(s.type, s.type)
        return _edit_tb(p, g, t, replace(tb, steps=tb.steps[:i] + (replace(s, type=new),) + tb.steps[i + 1:]))
    if how == "shorter":          # one step moves a chunk less than its peer expects
        s = tb.steps[i]
        if s.cnt < 2:
            return p
        return _edit_tb(p, g, t, replace(tb, steps=tb.steps[:i] + (replace(s, cnt=s.cnt - 1),) + tb.steps[i + 1:]))
    raise AssertionError(how)


MUTATIONS = ("none", "drop", "cycle", "depend", "retype", "shorter")


def _agree(p: Program, coll: Collective, model: SizeModel, pool: int = 0) -> tuple[SimResult, kernel.KernelResult | None]:
    lay = kernel.layout(p, None)
    py = simulate(p, coll, model, data=False, races=False, kernel_min_steps=PYTHON_ONLY)
    if lay is None:
        return py, None
    k = kernel.run(p, coll, model, lay, False, 1)
    assert k is not None
    assert (k.finished, k.pieces, k.blocked) == (py.finished, py.pieces, py.blocked)
    num = simulate(p, coll, model, data=True, numeric=True, races=False, kernel_min_steps=PYTHON_ONLY)
    kn = kernel.run(p, coll, model, lay, True, 1, pool)
    if kn is not None:
        clean = num.finished and not num.data_errors
        assert (kn.finished and kn.data_ok) == clean, num.data_errors[:3]
        if clean:
            assert kn.pieces == num.pieces
    return py, k


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from(MUTATIONS), st.integers(0, 1000), st.integers(0, 1000),
       st.integers(0, 8), st.sampled_from([0, 1, 5]))
def test_kernel_agrees_with_the_python_model(which: int, how: str, a: int, b: int, m: int, pool: int) -> None:
    """``pool``: the payload pool's first size (1 and 5 make the kernel compact and grow it)."""
    progs = programs()
    _, p, coll = progs[which % len(progs)]
    q = mutate(p, how, a, b)
    _agree(q, coll, _models(q)[m], pool)


def test_the_property_covers_kernel_runs_deadlocks_and_data_errors() -> None:
    """The cases above exercise the kernel itself, and include deadlocks and wrong data."""
    progs = programs()
    assert len(progs) >= 40
    blocked = wrong = 0
    for n, (_, p, coll) in enumerate(progs):
        for how in MUTATIONS:
            q = mutate(p, how, n, 3 * n + 1)
            lay = kernel.layout(q, None)
            assert lay is not None or how in ("drop", "shorter")
            py, k = _agree(q, coll, buffering_model(1 + n % 4))
            blocked += not py.finished
            if lay is not None:
                kn = kernel.run(q, coll, size_model(q.proto, q.nchunksperloop, None), lay, True, 1)
                wrong += kn is not None and kn.finished and not kn.data_ok
    assert blocked >= 20 and wrong >= 10


def test_simulate_through_the_kernel_returns_what_python_returns() -> None:
    """``simulate`` with the kernel forced: the same SimResult, race warnings and fallbacks included."""
    for name, p, coll in programs():
        for model in (size_model(p.proto, p.nchunksperloop, None), buffering_model(1)):
            for kw in ({"data": False, "races": False}, {"numeric": True}, {"numeric": True, "race_budget": 1}):
                assert simulate(p, coll, model, kernel_min_steps=0, **kw) == \
                    simulate(p, coll, model, kernel_min_steps=PYTHON_ONLY, **kw), name


def test_exact_check_may_take_the_kernel() -> None:
    """The kernel's exact mode (distinct 64-bit inputs, origin chunks, leaf counts, masks and
    reduction-tree hashes): ``simulate`` in exact mode returns the Python model's result whether
    the kernel runs or not, on sound and mutated programs, reducing ones included, with the
    reduction-order warning (a failure is rerun symbolically for its messages)."""
    from collc.check.xml.opstream import OpStream
    from collc.check.runtime_model import F_REDUCE

    took = failed = reducing = 0
    for n, (name, p, coll) in enumerate(programs()):
        for how in ("none", MUTATIONS[1 + n % (len(MUTATIONS) - 1)]):     # one mutation each, in turn
            q = mutate(p, how, n, 3 * n + 1)
            model = size_model(q.proto, q.nchunksperloop, None)
            for kw in ({}, {"race_budget": 1}):      # the budget of 1 skips race tracking: no tb to track
                fast = simulate(q, coll, model, kernel_min_steps=0, **kw)
                assert fast == simulate(q, coll, model, kernel_min_steps=PYTHON_ONLY, **kw), (name, how)
            took += 1
            failed += not (fast.finished and not fast.data_errors)
            reducing += bool((OpStream.of(q).flags & F_REDUCE).any())
    assert took >= 80 and failed >= 20 and reducing >= 40


def test_small_runs_stay_in_python() -> None:
    assert not kernel.worth_it(kernel.KERNEL_WARM_MIN_STEPS - 1)
    assert kernel.KERNEL_WARM_MIN_STEPS < kernel.KERNEL_MIN_STEPS < kernel.KERNEL_UNCACHED_MIN_STEPS


def test_compiled_inputs_and_column_sums_are_symbolics() -> None:
    """The kernel's inputs (values, exact fields) and the numeric check's column sums, computed
    in compiled loops, equal ``leaf_at`` and ``NumericExpectation.colsum``."""
    assert kernel._compiled() is not None
    ids = np.array([0, 3, 5, 63], dtype=np.uint64)
    c = 37
    chunks = np.arange(c, dtype=np.uint64)
    for seed in (1, 7, 12345):
        v, t, m, k = (np.zeros(len(ids) * c, dtype=np.uint64) for _ in range(4))
        ok = np.zeros(len(ids) * c, dtype=bool)
        kernel._inputs(np.uint64(seed), ids, np.arange(len(ids)) * c, c, v, ok, True, True, t, m, k)
        want = leaf_at(seed, ids[:, None], chunks[None, :]).ravel()
        assert (v == want).all() and (t == want).all() and ok.all()
        assert (m == np.tile((chunks + np.uint64(1)) << np.uint64(32) | np.uint64(1), len(ids))).all()
        assert (k == np.repeat(np.uint64(1) << ids, c)).all()
        coll = Collective(CollKind.ALLREDUCE, 9, c)
        want = NumericExpectation(coll, seed).colsum()
        assert (kernel._colsum(np.uint64(seed), 9, coll.input_chunks) == want).all()


def test_compiled_mismatches_are_numpys() -> None:
    """The numeric check's compiled search for failing output chunks finds what numpy finds."""
    assert kernel._compiled() is not None
    rng = np.random.default_rng(5)
    v = rng.integers(0, 4, 50).astype(np.uint64)
    ok = rng.random(50) < 0.8
    idx = rng.permutation(50)[:30].astype(np.int64)
    want = rng.integers(0, 4, 30).astype(np.uint64)
    for n in (0, 1, 3, 100):
        assert kernel._mismatches(v, ok, idx, want, n).tolist() == _mismatches(v, ok, idx, want, n).tolist()
    assert len(_mismatches(v, ok, idx, want, 100)) > 3
