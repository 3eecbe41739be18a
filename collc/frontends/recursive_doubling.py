"""Recursive doubling (latency-optimal) and recursive halving-doubling (Rabenseifner).

Family page: docs/recursive-doubling.md (what it does, the paper, the check values and their tests).

``recursive-doubling``: allreduce exchanges the whole vector with partner
``r xor 2^k`` at step k and reduces: log2 N steps, cost log2 N (alpha + M/b)
(Swing paper section 2, "RD latency-optimal").  Allgather doubles the gathered
range each step: log2 N steps, cost log2 N alpha + (N-1)/N M/b.

``recursive-halving-doubling``: reduce-scatter by recursive halving (partner
``r xor N/2^(k+1)``, send the half you do not keep) then allgather by recursive
doubling: 2 log2 N steps, cost 2 log2 N alpha + 2 (N-1)/N M/b (Rabenseifner;
Swing section 2, "RD bandwidth-optimal").  Reducescatter is its first half.

Allreduce runs on any number of ranks N >= 2 with MPICH's fold (Thakur, Rabenseifner &
Gropp 2005, section 4.4; MPICH ``MPIR_Allreduce_intra_recursive_doubling`` and
``..._reduce_scatter_allgather``): with ``p' = 2^floor(log2 N)`` and ``rem = N - p'``, each
even rank ``2i < 2 rem`` first sends its whole vector to ``2i + 1``, which reduces it; the
``p'`` remaining ranks (the odd ones below ``2 rem``, then every rank from ``2 rem``;
new rank ``i`` is ``2i + 1`` for ``i < rem``, else ``i + rem``) run the algorithm; and
``2i + 1`` sends the result back to ``2i``: two steps more than on ``p'`` ranks.
Allgather (recursive doubling) and reduce-scatter (recursive halving) fold the same way
(the reduce-scatter's pre- and post-step are MPICH's ``MPIR_Reduce_scatter_intra_recursive_halving``,
Thakur, Rabenseifner & Gropp 2005; MPICH's allgather handles N not a power of two inside the
doubling instead, and collc applies the same fold to it): new rank ``i`` stands for the
blocks of the ranks it folded (``2i`` and ``2i + 1``, or ``i + rem``), which stay
contiguous because the map is increasing (:func:`fold_bounds`), so the core runs on
block ranges.  Allgather: ``2i`` first sends its block to ``2i + 1`` and last receives
every other block from it.  Reduce-scatter: ``2i`` first sends its whole vector to
``2i + 1``, which reduces it, and last receives its reduced block from it.  Partners
need a link (or switch route): hypercube, complete, switch.

>>> from collc.topology import parse_spec
>>> from collc.frontends.registry import build_schedule
>>> from collc.ir.collective import CollKind
>>> build_schedule("recursive-halving-doubling", parse_spec("hypercube:3"), CollKind.ALLREDUCE,
...                inplace=True).nsteps
6
>>> build_schedule("recursive-doubling", parse_spec("switch:6"), CollKind.ALLREDUCE, inplace=True).nsteps
4
>>> build_schedule("recursive-doubling", parse_spec("switch:6"), CollKind.ALLGATHER, inplace=True).nsteps
4
>>> build_schedule("recursive-halving-doubling", parse_spec("complete:7"), CollKind.REDUCESCATTER,
...                inplace=True).nsteps
4
"""

from __future__ import annotations

from collections.abc import Sequence

from collc.errors import ScheduleError
from collc.frontends.common import I, O, S, Builder, is_pow2, pow2_refusal, prefix_copy, require_pow2, route_refusal
from collc.frontends.registry import Algorithm, AppliesFn, Options, register
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Schedule
from collc.topology import Topology

REF_RD = "Thakur, Rabenseifner & Gropp 2005 (recursive doubling); Swing NSDI'24 section 2"
REF_RHD = "Rabenseifner 2004 (reduce-scatter + allgather); Swing NSDI'24 section 2"


def fold_ranks(n: int) -> tuple[int, list[int]]:
    """MPICH's fold for N not a power of two: ``rem`` (ranks folded away) and the physical
    rank of each of the ``p'`` new ranks (``2i + 1`` for ``i < rem``, else ``i + rem``)."""
    pp = 1 << (n.bit_length() - 1)
    rem = n - pp
    return rem, [2 * i + 1 if i < rem else i + rem for i in range(pp)]


def fold_bounds(n: int) -> list[int]:
    """The blocks each new rank of :func:`fold_ranks` stands for: new rank ``v`` holds
    blocks ``bounds[v] .. bounds[v + 1] - 1`` (``2v, 2v + 1`` for ``v < rem``, else
    ``v + rem``), so a run of new ranks holds one contiguous range of blocks.

    >>> fold_bounds(6), fold_bounds(4)
    ([0, 2, 4, 5, 6], [0, 1, 2, 3, 4])
    """
    rem, phys = fold_ranks(n)
    return [2 * v if v < rem else v + rem for v in range(len(phys))] + [n]


def _applies(name: str) -> AppliesFn:
    def applies(topology: Topology, request: Collective, opts: Options) -> str | None:
        n = request.nranks
        if n < 2:
            return pow2_refusal(n, name)
        rem, phys = fold_ranks(n)
        logp = len(phys).bit_length() - 1
        pairs = [(phys[v], phys[v ^ (1 << k)]) for k in range(logp) for v in range(len(phys))]
        pairs += [p for i in range(rem) for p in ((2 * i, 2 * i + 1), (2 * i + 1, 2 * i))]
        fold = " (after MPICH's fold of the ranks above a power of two)" if rem else ""
        return route_refusal(topology, pairs, name, "partners r xor 2^k" + fold)
    return applies


def _fold(b: Builder, rem: int, step: int, idx: range, back: bool) -> None:
    """MPICH's pre-step (even ``2i`` reduces into ``2i + 1``) or post-step (the result back)."""
    for i in range(rem):
        src, dst = (2 * i + 1, 2 * i) if back else (2 * i, 2 * i + 1)
        b.move(step, src, dst, O, idx, O, idx, reduce=not back)


def _rd(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    kind = request.kind
    if kind is CollKind.ALLREDUCE and n >= 2:
        rem, phys = fold_ranks(n)
        logp = len(phys).bit_length() - 1
        b = Builder(Collective(kind, n, 1, request.inplace))
        start = prefix_copy(b, I, O, 1, range(n))
        if rem:
            _fold(b, rem, start, range(1), back=False)
            start += 1
        for k in range(logp):
            for v in range(len(phys)):
                b.move(start + k, phys[v], phys[v ^ (1 << k)], O, [0], O, [0], reduce=True)
        if rem:
            _fold(b, rem, start + logp, range(1), back=True)
        return b.schedule("recursive-doubling", opts, topology.name, REF_RD)
    if kind is CollKind.ALLGATHER and n >= 2:
        b = Builder(Collective(kind, n, 1, request.inplace))
        if not request.inplace:
            for r in range(n):
                b.move(0, r, r, I, [0], O, [r])
        rem, phys = fold_ranks(n)
        if not rem:
            for k in range(n.bit_length() - 1):
                size = 1 << k
                for r in range(n):
                    lo = r & ~(size - 1)
                    src = (I, [0]) if k == 0 else (O, range(lo, lo + size))
                    b.move(k, r, r ^ size, src[0], src[1], O, range(lo, lo + size))
            return b.schedule("recursive-doubling", opts, topology.name, REF_RD)
        # fold: 2i gives its block to 2i + 1, the p' ranks double over block ranges, 2i + 1
        # hands back every block but 2i's (two ranges around it)
        for i in range(rem):
            src = (O, [2 * i]) if request.inplace else (I, [0])
            b.move(0, 2 * i, 2 * i + 1, src[0], src[1], O, [2 * i])
        pp = len(phys)
        step = doubling(b, pp, pp.bit_length() - 1, 1, O, phys, fold_bounds(n))
        for i in range(rem):
            for lo, hi in ((0, 2 * i), (2 * i + 1, n)):
                if hi > lo:
                    b.move(step, 2 * i + 1, 2 * i, O, range(lo, hi), O, range(lo, hi))
        return b.schedule("recursive-doubling", opts, topology.name, REF_RD)
    require_pow2(n, "recursive-doubling")
    raise ScheduleError(f"recursive-doubling does not implement {kind.value}")  # pragma: no cover


def halving(b: Builder, n: int, logn: int, start: int, buf: Buffer, ranks: Sequence[int] | None = None,
            bounds: Sequence[int] | None = None) -> int:
    """Reduce-scatter by recursive halving in ``buf``: logical rank v ends with block v reduced.

    ``ranks`` maps logical ranks to physical ones (identity by default; HDRM's rank map).
    ``bounds``: logical block v is chunks ``bounds[v] .. bounds[v + 1] - 1`` (one chunk
    each by default; :func:`fold_bounds` after the fold).  Returns the next free step.
    """
    phys = ranks if ranks is not None else range(n)
    at = bounds if bounds is not None else range(n + 1)
    for k in range(logn):
        d = n >> (k + 1)
        for v in range(n):
            lo = v & ~((n >> k) - 1)
            give = lo + d if v & d == 0 else lo  # send the half we do not keep
            span = range(at[give], at[give + d])
            b.move(start + k, phys[v], phys[v ^ d], buf, span, buf, span, reduce=True)
    return start + logn


def doubling(b: Builder, n: int, logn: int, start: int, buf: Buffer, ranks: Sequence[int] | None = None,
             bounds: Sequence[int] | None = None) -> int:
    """Allgather by recursive doubling in ``buf``: every rank sends all the blocks it holds
    (``ranks`` and ``bounds`` as in :func:`halving`)."""
    phys = ranks if ranks is not None else range(n)
    at = bounds if bounds is not None else range(n + 1)
    for k in range(logn):
        size = 1 << k
        for v in range(n):
            lo = v & ~(size - 1)
            span = range(at[lo], at[lo + size])
            b.move(start + k, phys[v], phys[v ^ size], buf, span, buf, span)
    return start + logn


def _rhd(topology: Topology, request: Collective, opts: Options) -> Schedule:
    n = request.nranks
    kind = request.kind
    if kind is CollKind.ALLREDUCE and n >= 2:
        rem, phys = fold_ranks(n)
        pp = len(phys)
        logp = pp.bit_length() - 1
        b = Builder(Collective(kind, n, pp, request.inplace))   # p' blocks: one per remaining rank
        start = prefix_copy(b, I, O, pp, range(n))
        if rem:
            _fold(b, rem, start, range(pp), back=False)
            start += 1
        step = doubling(b, pp, logp, halving(b, pp, logp, start, O, phys), O, phys)
        if rem:
            _fold(b, rem, step, range(pp), back=True)
        return b.schedule("recursive-halving-doubling", opts, topology.name, REF_RHD)
    if kind is CollKind.REDUCESCATTER and n >= 2:
        rem, phys = fold_ranks(n)
        pp = len(phys)
        b = Builder(Collective(kind, n, 1, request.inplace))
        work = I if request.inplace else S    # in place o[0] is i[r]: work in the input
        start = 0
        if not request.inplace:
            b.scratch = n
            for r in range(n):
                b.move(0, r, r, I, range(n), S, range(n))
            start = 1
        if rem:   # fold: 2i's whole vector reduced into 2i + 1
            for i in range(rem):
                b.move(start, 2 * i, 2 * i + 1, work, range(n), work, range(n), reduce=True)
            start += 1
        step = halving(b, pp, pp.bit_length() - 1, start, work, phys, fold_bounds(n))
        for i in range(rem):      # 2i + 1 holds block 2i reduced: hand it back
            b.move(step, 2 * i + 1, 2 * i, work, [2 * i], O if not request.inplace else I,
                   [0] if not request.inplace else [2 * i])
        if not request.inplace:
            for r in range(n):
                if not (r < 2 * rem and r % 2 == 0):
                    b.move(step, r, r, S, [r], O, [0])
        return b.schedule("recursive-halving-doubling", opts, topology.name, REF_RHD)
    require_pow2(n, "recursive-halving-doubling")
    raise ScheduleError(f"recursive-halving-doubling does not implement {kind.value}")  # pragma: no cover


register(Algorithm(
    name="recursive-doubling",
    collectives=frozenset({CollKind.ALLREDUCE, CollKind.ALLGATHER}),
    topologies="links between partners r xor 2^k (hypercube, complete, switch); N not a power of two through "
               "MPICH's fold",
    summary="latency-optimal: log2 N steps, full vector per step for allreduce (+2 steps for N not 2^k)",
    reference=REF_RD, build=_rd, applies=_applies("recursive-doubling"),
    example="collc build --topology hypercube:3 --algorithm recursive-doubling --collective allreduce -o rd.xml",
))
def rhd_orbits(topology: Topology, kind: CollKind, opts: Options) -> tuple[int, ...] | None:
    """On a power of two, ``r xor a`` maps the schedule onto itself (partners ``r xor 2^k``,
    blocks relabelled ``v xor a``, aligned halves onto aligned halves): every rank is rank 0's
    image.  A few more ranks stand in as well, at no cost.  With the fold, no symmetry."""
    n = topology.nranks
    if not is_pow2(n) or n < 2:
        return None
    return tuple(sorted({0, 1, n // 2, n - 1}))


register(Algorithm(
    name="recursive-halving-doubling",
    collectives=frozenset({CollKind.ALLREDUCE, CollKind.REDUCESCATTER}),
    topologies="links between partners r xor 2^k (hypercube, complete, switch); N not a power of two through "
               "MPICH's fold",
    summary="Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather, 2 log2 N steps "
            "(+2 for N not 2^k)",
    reference=REF_RHD, build=_rhd, applies=_applies("recursive-halving-doubling"), orbits=rhd_orbits,
    example="collc build --topology switch:8 --algorithm recursive-halving-doubling --collective allreduce -o rhd.xml",
))
