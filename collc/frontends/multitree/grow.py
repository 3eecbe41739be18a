"""Algorithm 1 on networks of direct links as a compiled kernel (docs/multitree.md).

The same trees as ``_Grower._run_direct`` in :mod:`collc.frontends.multitree.trees`, turn for
turn: per step every link's capacity is renewed, the trees take turns in the round's order,
a tree's turn scans its parents from where its last turn stopped in insertion order and
takes the first neighbour not in the tree over a link with capacity left, and the rounds
repeat until one adds nothing (``rule="any"``) or the last tree of the round adds nothing
(``rule="last"``).  Only the bookkeeping differs: a parent whose neighbours are all in the
tree leaves the candidates at the step's end, which never changes a choice (members only
grow, so such a parent can never add again).  numba is imported on the first call only, so
small topologies never pay for it (about 0.6 CPU s to load it and the cached kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: Ranks from which the kernel is worth loading numba: below it the Python loop takes less than
#: loading numba and the cached kernel (about 0.6 CPU s; Python: 0.2 s at 256 ranks, 0.8 s at 484).
MIN_RANKS = 450
#: The same when numba has nowhere to cache the kernel: compiling it costs about 2.5 CPU s
#: (Python: about 4 s at 1024 ranks).
MIN_RANKS_UNCACHED = 1000

_KERNEL: Callable[..., Any] | None = None
_NO_NUMBA = False
_CACHED = False


def worth_it(nranks: int) -> bool:
    """Whether Algorithm 1 on ``nranks`` ranks should take the kernel (numba is there and the
    topology is large enough to repay loading, or compiling, it)."""
    if nranks < MIN_RANKS or _compiled() is None:
        return False
    return _CACHED or nranks >= MIN_RANKS_UNCACHED


def _grow_source(nbr: Any, nlid: Any, deg: Any, capacity: Any, round0: Any, round1: Any, last_rule: bool,
                 out: Any, by_tree: Any) -> int:
    """Grow every tree; write the allocations ``(root, parent, child, t)`` in order into ``out``
    (``n * (n - 1)`` rows), the row of tree ``r``'s ``k``-th edge into ``by_tree[r, k]``, and
    return the number of steps T (``-t``: step ``t`` added nothing).

    ``nbr[p, :deg[p]]`` are rank ``p``'s neighbours in preference order over the links
    ``nlid[p, :deg[p]]`` of ``capacity`` uses per step."""
    n = len(deg)
    nlinks = len(capacity)
    mem = np.zeros((n, n), dtype=np.uint8)
    live = np.zeros((n, n), dtype=np.int32)      # per tree: candidate parents, then this step's new nodes
    nlive = np.ones(n, dtype=np.int64)
    nfresh = np.zeros(n, dtype=np.int64)
    size = np.ones(n, dtype=np.int64)
    for r in range(n):
        mem[r, r] = 1
        live[r, 0] = r
    free = np.empty(nlinks, dtype=np.int64)
    outs = np.empty(n, dtype=np.int64)           # per rank, its links with capacity left
    ptr = np.zeros(n, dtype=np.int64)
    failed = np.zeros(n, dtype=np.uint8)
    incomplete = n if n > 1 else 0
    rows = 0
    t = 0
    first_round = True
    while incomplete:
        t += 1
        open_links = 0                           # links between ranks with capacity left
        for lid in range(nlinks):
            free[lid] = capacity[lid]
        for p in range(n):
            k = 0
            for j in range(deg[p]):
                if capacity[nlid[p, j]] > 0:
                    k += 1
            outs[p] = k
            open_links += k
        ptr[:] = 0
        failed[:] = 0
        nfresh[:] = 0
        added = 0
        while True:
            order = round0 if first_round else round1
            last = order[len(order) - 1]
            first_round = False
            grew_any = False
            grew_last = False
            for r in order:
                if failed[r] or size[r] == n:
                    continue
                if open_links == 0:
                    failed[r] = 1
                    continue
                found = -1
                p = -1
                c = -1
                lid = -1
                for i in range(ptr[r], nlive[r]):
                    p = live[r, i]
                    if outs[p] == 0:
                        continue
                    for j in range(deg[p]):
                        c = nbr[p, j]
                        lid = nlid[p, j]
                        if mem[r, c] == 0 and free[lid] > 0:
                            found = i
                            break
                    if found >= 0:
                        break
                if found < 0:
                    ptr[r] = nlive[r]
                    failed[r] = 1
                    continue
                ptr[r] = found
                free[lid] -= 1
                if free[lid] == 0:
                    outs[p] -= 1
                    open_links -= 1
                mem[r, c] = 1
                size[r] += 1
                by_tree[r, size[r] - 2] = rows
                if size[r] == n:
                    incomplete -= 1
                live[r, nlive[r] + nfresh[r]] = c
                nfresh[r] += 1
                out[rows, 0] = r
                out[rows, 1] = p
                out[rows, 2] = c
                out[rows, 3] = t
                rows += 1
                added += 1
                grew_any = True
                if r == last:
                    grew_last = True
            if incomplete == 0 or not grew_any or (last_rule and not grew_last):
                break
        if added == 0:
            return -t
        for r in range(n):
            if size[r] == n:
                nlive[r] = 0
                continue
            k = 0
            for i in range(nlive[r]):      # keep the parents with a neighbour not in the tree
                p = live[r, i]
                for j in range(deg[p]):
                    if mem[r, nbr[p, j]] == 0:
                        live[r, k] = p
                        k += 1
                        break
            for i in range(nlive[r], nlive[r] + nfresh[r]):
                live[r, k] = live[r, i]
                k += 1
            nlive[r] = k
    return t


def _compiled() -> Callable[..., Any] | None:
    """The kernel compiled by numba (imported on first use; None without numba).  Its machine
    code is cached next to this module, or when that directory is read-only in numba's user
    cache directory (or ``NUMBA_CACHE_DIR``); with no writable place at all it is compiled in
    memory, once per process."""
    global _KERNEL, _NO_NUMBA, _CACHED
    if _KERNEL is None and not _NO_NUMBA:
        try:
            import numba
        except ImportError:
            _NO_NUMBA = True
            return None
        try:
            _KERNEL = numba.njit(cache=True, nogil=True)(_grow_source)
            _CACHED = True
        except RuntimeError:      # numba found no writable cache directory
            _KERNEL = numba.njit(cache=False, nogil=True)(_grow_source)
    return _KERNEL


def grow_direct(direct: Sequence[Sequence[tuple[int, int]]], capacity: Sequence[int], rule: str,
                rounds: Sequence[Sequence[int]], compiled: bool = True
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int] | None:
    """Algorithm 1 over direct links: ``direct[p]`` lists rank ``p``'s (neighbour, link id) in
    preference order.  Returns the allocations as rows ``(root, parent, child, t)`` in order, per
    tree the rows of its edges in order (``n`` by ``n - 1``) and T (``-t``: step ``t`` added
    nothing), or None when numba is not there.  ``compiled=False`` runs the
    kernel's source in Python (for tests on small topologies)."""
    kernel = _compiled() if compiled else _grow_source
    if kernel is None:
        return None
    n = len(direct)
    width = max(1, max(map(len, direct), default=0))
    nbr = np.zeros((n, width), dtype=np.int64)
    nlid = np.zeros((n, width), dtype=np.int64)
    deg = np.zeros(n, dtype=np.int64)
    for p, order in enumerate(direct):
        deg[p] = len(order)
        for j, (c, lid) in enumerate(order):
            nbr[p, j], nlid[p, j] = c, lid
    out = np.zeros((n * (n - 1), 4), dtype=np.int64)
    by_tree = np.zeros((n, max(n - 1, 0)), dtype=np.int64)
    steps = kernel(nbr, nlid, deg, np.asarray(capacity, dtype=np.int64), np.asarray(rounds[0], dtype=np.int64),
                   np.asarray(rounds[1], dtype=np.int64), rule == "last", out, by_tree)
    return out, by_tree, int(steps)
