"""Data checks (code ``data``): the postcondition on the final buffers after a simulation, exact
(symbolic contributions) or numeric (random 64-bit values summed modulo 2^64), the reduction-order
warning (code ``order``), and the static rule that an out-of-place call never writes its input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

import numpy as np

from collc.arrays import unique
from collc.check.findings import MAX_LISTED, Report
from collc.compiler.msccl.program import WRITES_DST, Program
from collc.ir.collective import CollKind, Collective
from collc.ir.symbolic import ExactDomain, NumericExpectation


_DSTBUF = attrgetter("dstbuf")


class _GivenColsum(NumericExpectation):
    """The expectation with its column sums computed elsewhere (the compiled kernel's)."""

    def __init__(self, coll: Collective, seed: int, colsum: np.ndarray) -> None:
        super().__init__(coll, seed)
        self._given = colsum

    def colsum(self) -> np.ndarray:
        return self._given


#: Finds failing output chunks: (values, initialized, positions, expected, at most n) -> the first
#: n indices k into positions whose value is uninitialized or differs from expected[k].
Mismatches = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]


def _mismatches(v: np.ndarray, ok: np.ndarray, idx: np.ndarray, want: np.ndarray, n: int) -> np.ndarray:
    bad: np.ndarray = np.nonzero(~ok[idx] | (v[idx] != want))[0][:n]
    return bad


def numeric_postcondition(coll: Collective, mem: dict[tuple[int, str], Any],
                           amap: dict[tuple[int, str], tuple[str, int]], gpus: Mapping[int, object], seed: int,
                           errors: list[str], colsum: Callable[[], np.ndarray] | None = None,
                           mismatches: Mismatches = _mismatches) -> None:
    """Compare every output chunk with the expected sum of random inputs (mod 2^64).
    ``colsum`` computes :meth:`NumericExpectation.colsum` faster (called only if needed) and
    ``mismatches`` finds failing chunks faster: the compiled kernel's (docs/runtime-model.md)."""
    expectation = NumericExpectation(coll, seed) if colsum is None or not coll.kind.reduces \
        else _GivenColsum(coll, seed, colsum())
    for r in range(coll.nranks):
        if r not in gpus:
            continue
        outs, want = expectation(r)
        if len(outs) == 0:
            continue
        pb, base = amap[(r, "o")]
        row = mem[(r, pb)]
        idx = outs + base
        for k in mismatches(row.v, row.ok, idx, want, MAX_LISTED - len(errors)).tolist():
            what = "uninitialized data" if not row.ok[idx[k]] else "a wrong sum (a contribution missing or doubled)"
            errors.append(f"rank {r} output chunk {outs[k]} holds {what} (numeric check)")
        if len(errors) >= MAX_LISTED:
            return


def postcondition(p: Program, coll: Collective, dom: ExactDomain, mem: dict[tuple[int, str], list[int | None]],
                   phys: Callable[[int, str, int], tuple[str, int]], gpus: Mapping[int, object],
                   errors: list[str], warnings: list[str]) -> None:
    per_chunk: dict[int, set[int]] = {}
    reduces = coll.kind.reduces
    masks: dict[range | tuple[int, ...], int] = {}   # origin ranks -> their mask
    chunk_of, mask_of = dom.chunk, dom.mask
    # The obligations' class and the outputs of the last rank that added no error: a rank with the
    # same of both (every rank of an allreduce or allgather, as a rule) adds none either, and its
    # nodes are in per_chunk already.
    passed: tuple[int, list[int | None]] | None = None
    obligations_of: dict[int, list[tuple[int, int, range | tuple[int, ...]]]] = {}
    for r in range(coll.nranks):
        if r not in gpus:
            continue
        b, base = phys(r, "o", 0)
        row = mem[(r, b)]
        key = coll.verdict_key(r, row, base)
        if key == passed:
            continue
        obligations = obligations_of.get(key[0])
        if obligations is None:
            obligations = obligations_of[key[0]] = coll.expected(r)
        before = len(errors)
        for idx, origin, ranks in obligations:
            m = masks.get(ranks)
            if m is None:
                m = masks[ranks] = dom.expect(origin, ranks).mask
            got = row[base + idx]
            if got is None or chunk_of(got) != origin or mask_of(got) != m:
                if len(errors) < MAX_LISTED:
                    errors.append(f"rank {r} output chunk {idx} holds {dom.describe(got)}, expected "
                                  f"{dom.describe_expect(dom.expect(origin, ranks))}")
            elif reduces:
                nodes = per_chunk.get(origin)
                if nodes is None:
                    per_chunk[origin] = {got}
                else:
                    nodes.add(got)
        if len(errors) == before:
            passed = key
    differing = sorted(k for k, nodes in per_chunk.items() if len(nodes) > 1)
    if differing:
        warnings.append(_order_warning(differing))


def _order_warning(differing: list[int]) -> str:
    return (f"ranks reduce input chunk(s) {differing[:MAX_LISTED]}"
            f"{' ...' if len(differing) > MAX_LISTED else ''} in different orders: results may "
            f"differ bitwise between ranks for floating-point data")


def _origins(coll: Collective, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(output indices, origin input chunks) of ``rank``'s obligations (``Collective.expected``
    spells them out; the reducing collectives' shapes vectorised)."""
    c, kind = coll.chunk_factor, coll.kind
    if kind is CollKind.ALLREDUCE or (kind is CollKind.REDUCE and rank == coll.root):
        return np.arange(c, dtype=np.int64), np.arange(c, dtype=np.int64)
    if kind is CollKind.REDUCESCATTER:
        return np.arange(c, dtype=np.int64), np.arange(rank * c, (rank + 1) * c, dtype=np.int64)
    obligations = coll.expected(rank)
    return (np.array([o[0] for o in obligations], dtype=np.int64),
            np.array([o[1] for o in obligations], dtype=np.int64))


def order_warnings(coll: Collective, trees: Mapping[tuple[int, str], np.ndarray],
                   amap: Mapping[tuple[int, str], tuple[str, int]], gpus: Mapping[int, object]) -> list[str]:
    """The reduction-order warning of :func:`postcondition` from the kernel's tree hashes
    (``trees``: each GPU's physical rows; equal reduction trees have equal hashes), for a run
    whose outputs all passed: an input chunk whose outputs hold more than one tree."""
    origin_parts: list[np.ndarray] = []
    tree_parts: list[np.ndarray] = []
    for r in range(coll.nranks):
        if r not in gpus:
            continue
        outs, origins = _origins(coll, r)
        if len(outs) == 0:
            continue
        pb, base = amap[(r, "o")]
        origin_parts.append(origins)
        tree_parts.append(trees[(r, pb)][outs + base])
    if not origin_parts:
        return []
    origin, tree = np.concatenate(origin_parts), np.concatenate(tree_parts)
    # each origin's first tree (written in reverse, so the first occurrence is the last write);
    # an origin differs where another of its outputs holds another tree
    first = np.zeros(int(origin.max()) + 1, dtype=np.uint64)
    first[origin[::-1]] = tree[::-1]
    differing = unique(origin[tree != first[origin]]).tolist()
    return [_order_warning(differing)] if differing else []


def check_input_writes(p: Program, rep: Report) -> None:
    """Out of place, ``i`` is the caller's const send buffer: no step may write it."""
    for g in p.gpus:
        for t in g.tbs:
            if "i" not in map(_DSTBUF, t.steps):    # no step of the tb names it (at C speed)
                continue
            for pos, st in enumerate(t.steps):
                if st.type in WRITES_DST and st.dstbuf == "i":
                    rep.add("data", f"gpu {g.id} tb {t.id} step {pos}: {st.type.value} writes i[{st.dstoff}], the "
                                    f"caller's send buffer, in an out-of-place call")
                    return
