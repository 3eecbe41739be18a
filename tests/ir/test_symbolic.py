"""ExactDomain: the batched constructors build exactly the nodes of the one-at-a-time ones."""

from __future__ import annotations

import pytest

from collc.ir.symbolic import DataError, ExactDomain


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
