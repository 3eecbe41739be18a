"""ExactDomain: the batched constructors build exactly the nodes of the one-at-a-time ones; the
numeric check's leaf values."""

from __future__ import annotations

import numpy as np
import pytest

from collc.ir.symbolic import DataError, ExactDomain, leaf_at


def test_leaves_are_the_leaf_sequence_whichever_comes_first() -> None:
    a, b = ExactDomain(4), ExactDomain(4)
    first = a.leaves(2, 5)
    assert first == [b.leaf(2, k) for k in range(5)]
    assert a.leaves(2, 7) == [a.leaf(2, k) for k in range(7)] and a.leaves(2, 7)[:5] == first
    b.leaf(3, 4)                               # a rank with one leaf already
    got = b.leaves(3, 6)
    assert got[4] == b.leaf(3, 4) and len(set(got)) == 6
    assert [b.chunk(n) for n in got] == list(range(6)) and {b.mask(n) for n in got} == {1 << 3}


def test_reduce_all_is_the_reduce_sequence() -> None:
    dom = ExactDomain(3)
    x, y, z = dom.leaves(0, 4), dom.leaves(1, 4), dom.leaves(2, 4)
    xy = dom.reduce_all(x, y)
    assert xy == [dom.reduce(a, b) for a, b in zip(y, x)]          # commutative keys
    assert xy is not None and dom.reduce_all(xy, z) == [dom.reduce(c, a) for a, c in zip(xy, z)]
    assert dom.reduce_all(xy, x) is None and dom.reduce_all(x, [None] * 4) is None
    with pytest.raises(DataError, match="twice"):
        dom.reduce(xy[0], x[0])
    with pytest.raises(DataError, match="different chunks"):
        dom.reduce(x[0], y[1])


def _splitmix64(seed: int, rank: int, chunk: int) -> int:
    """The leaf value by its definition, in Python integers (collc.ir.symbolic.leaf_at)."""
    top = (1 << 64) - 1
    x = ((chunk + (rank << 32) + seed) * 0x9E3779B97F4A7C15) & top
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & top
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & top
    return x ^ (x >> 31)


def test_leaf_values_are_splitmix64_elementwise_and_broadcast() -> None:
    ranks = np.array([0, 1, 5, 4095], dtype=np.uint64)
    chunks = np.array([0, 3, 16383, (1 << 31) + 7], dtype=np.uint64)
    for seed in (1, 7):
        assert leaf_at(seed, ranks, chunks).tolist() == [_splitmix64(seed, int(r), int(c))
                                                         for r, c in zip(ranks, chunks)]
        grid = leaf_at(seed, ranks[:, None], chunks[None, :])
        assert grid.tolist() == [[_splitmix64(seed, int(r), int(c)) for c in chunks] for r in ranks]
