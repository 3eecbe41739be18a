"""Symbolic chunk values shared by the Schedule verifier and the Program checker.

A value is a node id.  Leaves are input chunks ``(rank, chunk)``; an inner node is
the reduction of two nodes.  Nodes are hash-consed with commutative keys, so two
ranks that combine the same operands in the same tree shape hold the same node
(IEEE addition is commutative but not associative: equal trees give bitwise equal
results, different trees may not).  Each node carries its origin chunk index and
a bit mask of origin ranks, which makes double counting (overlapping masks) and
mixing of different chunks (which no collective ever wants) cheap to detect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collc.ir.collective import CollKind, Collective



class DataError(Exception):
    """A reduction that can never be part of a correct collective."""


@dataclass(frozen=True, slots=True)
class Expect:
    chunk: int
    mask: int


class ExactDomain:
    def __init__(self, nranks: int) -> None:
        self.nranks = nranks
        self._chunk: list[int] = []
        self._mask: list[int] = []
        self._leaves: dict[int, list[int]] = {}   # rank -> the leaf of each input chunk (-1: none yet)
        self._inner: dict[int, int] = {}          # min(a, b) << 32 | max(a, b) -> the node of a + b

    def _new(self, chunk: int, mask: int) -> int:
        self._chunk.append(chunk)
        self._mask.append(mask)
        return len(self._chunk) - 1

    def leaf(self, rank: int, chunk: int) -> int:
        row = self._leaves.setdefault(rank, [])
        if len(row) <= chunk:
            row.extend([-1] * (chunk + 1 - len(row)))
        node = row[chunk]
        if node < 0:
            node = row[chunk] = self._new(chunk, 1 << rank)
        return node

    def reduce(self, a: int, b: int) -> int:
        key = a << 32 | b if a <= b else b << 32 | a     # one int (ids stay below 2^32): cheaper than a tuple
        node = self._inner.get(key)
        if node is not None:
            return node
        ca, cb = self._chunk[a], self._chunk[b]
        if ca != cb:
            raise DataError(f"adds {self.describe(a)} to {self.describe(b)}: different chunks are never summed")
        overlap = self._mask[a] & self._mask[b]
        if overlap:
            ranks = _ranks(overlap)
            raise DataError(f"counts the contribution of rank(s) {_short(ranks)} to chunk {ca} twice")
        node = self._new(ca, self._mask[a] | self._mask[b])
        self._inner[key] = node
        return node

    def leaves(self, rank: int, count: int) -> list[int]:
        """``[leaf(rank, k) for k in range(count)]`` in one go (the same nodes)."""
        if rank in self._leaves:
            return [self.leaf(rank, k) for k in range(count)]
        # all new (the simulation's case): allocate them together
        first = len(self._chunk)
        self._chunk.extend(range(count))
        self._mask.extend([1 << rank] * count)
        row = self._leaves[rank] = list(range(first, first + count))
        return row.copy()

    def reduce_all(self, a: list[int | None], b: list[int | None]) -> list[int] | None:
        """``[reduce(x, y) for x, y in zip(a, b)]``, or None (having created nothing more than
        the sequence would) as soon as an operand is missing or a reduction is an error: the
        caller then takes the pairs one by one to report them."""
        inner, chunk, mask = self._inner, self._chunk, self._mask
        get = inner.get
        out: list[int] = []
        for x, y in zip(a, b):
            if x is None or y is None:
                return None
            key = x << 32 | y if x <= y else y << 32 | x     # as in reduce()
            node = get(key)
            if node is None:
                c, mx, my = chunk[x], mask[x], mask[y]
                if c != chunk[y] or mx & my:
                    return None
                node = len(chunk)
                chunk.append(c)
                mask.append(mx | my)
                inner[key] = node
            out.append(node)
        return out

    def chunk(self, node: int) -> int:
        return self._chunk[node]

    def mask(self, node: int) -> int:
        return self._mask[node]

    def expect(self, origin: int, ranks: range | tuple[int, ...]) -> Expect:
        if isinstance(ranks, range) and ranks.start == 0 and ranks.step == 1:
            return Expect(origin, (1 << ranks.stop) - 1)
        mask = 0
        for r in ranks:
            mask |= 1 << r
        return Expect(origin, mask)

    def matches(self, node: int | None, want: Expect) -> bool:
        return node is not None and self._chunk[node] == want.chunk and self._mask[node] == want.mask

    def describe(self, node: int | None) -> str:
        if node is None:
            return "uninitialized data"
        ranks = _ranks(self._mask[node])
        return f"chunk {self._chunk[node]} of rank(s) {_short(ranks)}"

    def describe_expect(self, want: Expect) -> str:
        return f"chunk {want.chunk} of rank(s) {_short(_ranks(want.mask))}"


def _ranks(mask: int) -> list[int]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def _short(ranks: list[int]) -> str:
    if len(ranks) > 8:
        return "{" + ", ".join(map(str, ranks[:6])) + f", ... ({len(ranks)} ranks)" + "}"
    return "{" + ", ".join(map(str, ranks)) + "}"


# --------------------------------------------------------------------------- numeric (large programs)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def leaf_at(seed: int, ranks: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """Pseudo-random 64-bit input value of (rank, chunk), elementwise (splitmix64).

    Computed, not stored: a 4096-rank check needs no table of all inputs.  For chunks below
    2^32 it is a bijection (an injective packing, then an add, xor-shifts and products by odd
    constants, each invertible mod 2^64): distinct inputs have distinct values, so a program
    that only moves data is checked exactly by these values.
    """
    with np.errstate(over="ignore"):
        x = chunks.astype(np.uint64) + ranks.astype(np.uint64) * np.uint64(1 << 32)
        x += np.uint64(seed)
        x *= _GOLDEN
        # in place, one scratch array: a block of a 4096-rank check is millions of values
        tmp = np.empty_like(x)
        for shift, mul in ((30, _M1), (27, _M2), (31, None)):
            np.right_shift(x, np.uint64(shift), out=tmp)
            x ^= tmp
            if mul is not None:
                x *= mul
    out: np.ndarray = x
    return out


def leaf_values(seed: int, rank: int, chunks: int, start: int = 0) -> np.ndarray:
    """Input values of ``rank``'s chunks [start, start + chunks)."""
    idx = np.arange(start, start + chunks, dtype=np.uint64)
    return leaf_at(seed, np.full(chunks, rank, dtype=np.uint64), idx)


class NumVec:
    """A run of chunk values for the numeric check: uint64 sums plus an 'initialized' mask.

    Sums wrap modulo 2^64; a missing or doubled contribution changes a sum of random
    64-bit values except with probability about 2^-64.
    """

    __slots__ = ("v", "ok")

    def __init__(self, v: np.ndarray, ok: np.ndarray) -> None:
        self.v, self.ok = v, ok

    def __len__(self) -> int:
        return len(self.v)

    def __getitem__(self, s: slice) -> NumVec:
        return NumVec(self.v[s], self.ok[s])

    @staticmethod
    def concat(parts: list[NumVec]) -> NumVec:
        if len(parts) == 1:
            return parts[0]
        return NumVec(np.concatenate([p.v for p in parts]), np.concatenate([p.ok for p in parts]))

    @staticmethod
    def blank(n: int) -> NumVec:
        return NumVec(np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=bool))

    def plus(self, other: NumVec) -> NumVec:
        # uint64 arrays wrap modulo 2^64 silently (numpy warns only for scalars)
        return NumVec(self.v + other.v, self.ok & other.ok)


EXACT_LIMIT = 1 << 20   # ranks x chunks above which data checks are numeric by default (1024 ranks x 1024)


class NumericExpectation:
    """Expected output values of each rank for the numeric check (shared by both verifiers)."""

    def __init__(self, coll: Collective, seed: int, colsum: np.ndarray | None = None) -> None:
        """``colsum``: the inputs' column sums where the caller already has them (``colsum``)."""
        self.coll, self.seed = coll, seed
        self._colsum: np.ndarray | None = colsum
        self._shared: tuple[np.ndarray, np.ndarray] | None = None

    def colsum(self) -> np.ndarray:
        """Sum over all ranks of each input chunk, mod 2^64 (computed once)."""
        if self._colsum is None:
            total = np.zeros(self.coll.input_chunks, dtype=np.uint64)
            with np.errstate(over="ignore"):
                for q in range(self.coll.nranks):
                    total += leaf_values(self.seed, q, self.coll.input_chunks)
            self._colsum = total
        return self._colsum

    def same_for_all(self) -> bool:
        """Whether every rank has the same obligations (allreduce, allgather, broadcast)."""
        kind = self.coll.kind
        return kind in (CollKind.ALLREDUCE, CollKind.ALLGATHER) or (kind is CollKind.BROADCAST
                                                                   and self.coll.root is not None)

    def __call__(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(output chunk indices, expected values) of ``rank``'s obligations (computed once where
        they are every rank's: ``same_for_all``; the arrays are shared, never to be written)."""
        if self.same_for_all():
            if self._shared is None:
                self._shared = self._of(rank)
            return self._shared
        return self._of(rank)

    def _of(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        coll = self.coll
        n, c, kind = coll.nranks, coll.chunk_factor, coll.kind
        # the collectives' own shapes, vectorised (Collective.expected spells out the same)
        if kind is CollKind.ALLREDUCE or (kind is CollKind.REDUCE and rank == coll.root):
            return np.arange(c, dtype=np.int64), self.colsum()
        if kind is CollKind.REDUCESCATTER:
            return np.arange(c, dtype=np.int64), self.colsum()[rank * c:(rank + 1) * c]
        if kind is CollKind.REDUCE:
            return np.arange(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        if kind is CollKind.ALLGATHER:
            q = np.repeat(np.arange(n, dtype=np.uint64), c)
            return np.arange(n * c, dtype=np.int64), leaf_at(self.seed, q, np.tile(np.arange(c, dtype=np.uint64), n))
        if kind is CollKind.ALLTOALL:
            q = np.repeat(np.arange(n, dtype=np.uint64), c)
            i = np.tile(np.arange(rank * c, (rank + 1) * c, dtype=np.uint64), n)
            return np.arange(n * c, dtype=np.int64), leaf_at(self.seed, q, i)
        if kind is CollKind.BROADCAST and coll.root is not None:
            return np.arange(c, dtype=np.int64), leaf_at(self.seed, np.full(c, coll.root, dtype=np.uint64),
                                                         np.arange(c, dtype=np.uint64))
        return self.general(rank)

    def general(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """The same from ``Collective.expected`` (any obligations; the reference for the fast paths)."""
        obligations = self.coll.expected(rank)
        n = self.coll.nranks
        want = np.zeros(len(obligations), dtype=np.uint64)
        origin = np.array([o[1] for o in obligations], dtype=np.uint64)
        everyone = np.array([len(o[2]) == n for o in obligations], dtype=bool)
        single = np.array([len(o[2]) == 1 for o in obligations], dtype=bool)
        if everyone.any():
            want[everyone] = self.colsum()[origin[everyone].astype(np.int64)]
        if single.any():
            who = np.array([o[2][0] for o, s in zip(obligations, single) if s], dtype=np.uint64)
            want[single] = leaf_at(self.seed, who, origin[single])
        for k, o in enumerate(obligations):   # partial sums: no collective of ours has them
            if not everyone[k] and not single[k]:
                with np.errstate(over="ignore"):
                    want[k] = leaf_at(self.seed, np.array(list(o[2]), dtype=np.uint64),
                                      np.full(len(o[2]), o[1], dtype=np.uint64)).sum(dtype=np.uint64)
        return np.array([o[0] for o in obligations], dtype=np.int64), want
