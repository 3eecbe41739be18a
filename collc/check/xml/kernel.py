"""The executor simulation as a compiled kernel (docs/runtime-model.md, "The simulation").

The same model as :func:`collc.check.xml.executor.simulate`, step for step: every tb runs its
steps in document order, a dependency waits for the target's published flag, each
(sender, receiver, chan) is a FIFO of runs of pieces (slots used, partial pops), a sender
may run ahead of a receiver parked on a plain receive (the hand-off rule), and the
runnable queue and the wait lists are served in the same order.  It runs over the arrays
of :class:`collc.check.xml.opstream.OpStream` and, for the data checks, over one flat
array of 64-bit values per run (every GPU's physical buffers end to end) with payloads
snapshotted at send time into a pool sized by the sum of the send counts.  The exact check
adds, per value, its origin chunk and leaf count, its origin ranks' mask (up to 64 ranks) and
a hash of its reduction tree (docs/runtime-model.md, "How the check runs at scale").

It answers only the cheap questions: finished or not, how many pieces moved, whether any
data error occurred and, exactly, the reduction-order warning.  Everything else (races, the
text of a data error) stays with the Python model, which remains the reference.
numba is imported on the first call only, so small builds never pay for it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collc.check.data import numeric_postcondition, order_warnings
from collc.arrays import unique
from collc.check.xml.opstream import BAD_BUFFER, BUFFERS, OP_FLAGS, TYPES, OpStream
from collc.check.runtime_model import F_COMBINE, F_LOCAL, F_PLAIN, F_READ, F_RECV, F_SEND, F_WRITE, SizeModel
from collc.compiler.msccl.program import Program, StepType
from collc.ir.collective import Buffer, Collective
from collc.ir.symbolic import NumVec

#: Total steps from which :func:`collc.check.xml.executor.simulate` takes the kernel when it has
#: not run in this process yet: below it, loading numba and the cached kernel (about 0.85 CPU s) costs
#: more than the Python model (5-13 us per step) takes.
KERNEL_MIN_STEPS = 150_000
#: The same once the kernel has run in this process (its set-up then costs about a microsecond a step).
KERNEL_WARM_MIN_STEPS = 5_000
#: The same when numba has nowhere to cache the kernel: compiling it costs about 8 CPU s.
KERNEL_UNCACHED_MIN_STEPS = 1_500_000
#: The exact (symbolic) model costs about a fifth of a step more per chunk a step moves (its
#: contribution masks and hash-consed nodes: 0.5-0.7 us a chunk at 128-1024 ranks): an exact
#: run counts ``steps + chunks // EXACT_CHUNKS_PER_STEP`` against the thresholds above.
EXACT_CHUNKS_PER_STEP = 5

_OP = {t: i for i, t in enumerate(TYPES)}
_I32 = np.iinfo(np.int32)
# per op code: its flags (OP_FLAGS, narrow) and its step record's S_CODE but for hasdep
_FLAGS8 = OP_FLAGS.astype(np.uint8)
_CODE = (OP_FLAGS | np.arange(len(TYPES)) << 16).astype(np.int32)
_SEND, _CPY, _RE = _OP[StepType.SEND], _OP[StepType.COPY], _OP[StepType.REDUCE]

# kernel status
OK, BLOCKED, DATA_ERROR = 0, 1, 2
# why a tb waits (final state)
W_DEP, W_RECV, W_SPACE = 1, 2, 3


# =========================================================================== the kernel
# The kernel's records: one row per tb, per connection, per run of pieces and per step, so that
# what one visit of a tb reads shares a few cache lines instead of one line per array.
# per tb (int32: 64 bytes, one cache line; where its buffers start is a separate int64 array)
T_PC, T_PIECE, T_READY, T_NXT, T_IN, T_OUT, T_RX, T_END = 0, 1, 2, 3, 4, 5, 6, 7
T_FLAG, T_WAITS, T_KEY, T_START = 8, 9, 10, 11
T_WIDTH = 16
# per connection (int64): pieces and slots held, its run queue, its data and space wait lists
C_AVAIL, C_USED, C_HEAD, C_TAIL, C_DATA, C_SPACE = 0, 1, 2, 3, 4, 6
# per run of pieces (int64): pieces left, pool position, tail chunks, next run
R_N, R_POS, R_TAIL, R_NEXT = 0, 1, 2, 3
# per step (int32): flags | hasdep << 8 | op << 16, count, the tb it waits for (-1: none), the
# flag it waits for, the operands' offsets and buffers
S_CODE, S_CNT, S_DEP, S_DEPS, S_SOFF, S_DOFF, S_SBUF, S_DBUF = 0, 1, 2, 3, 4, 5, 6, 7
S_WIDTH = 8


def _wake_source(lists: Any, row: int, col: int, tbr: Any, q_head: int, q_tail: int) -> tuple[int, int]:
    """Move the wait list at ``lists[row, col]`` (head; its tail at ``col + 1``) to the end of
    the runnable queue (as ``runnable.extend(w)`` does in the Python model); returns the
    queue's new head and tail."""
    h = lists[row, col]
    if h >= 0:
        if q_tail < 0:
            q_head = h
        else:
            tbr[q_tail, T_NXT] = h
        q_tail = lists[row, col + 1]
        lists[row, col] = -1
        lists[row, col + 1] = -1
    return q_head, q_tail


def _park_source(t: int, lists: Any, row: int, col: int, tbr: Any) -> None:
    """Append tb ``t`` to the wait list at ``lists[row, col]`` (as ``waiters.append(st)``)."""
    last = lists[row, col + 1]
    if last < 0:
        lists[row, col] = t
    else:
        tbr[last, T_NXT] = t
    lists[row, col + 1] = t


# The exact mode's extra fields of a value (besides its sum): a tree hash, a meta word
# ``(origin chunk + 1) << 32 | leaves`` (0: uninitialized) and, up to 64 ranks, the origin ranks' mask.
_SHIFT = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ZERO = np.uint64(0)


def _mix_source(x: Any) -> Any:
    """splitmix64's finalizer (a bijection of 64-bit words): the tree hash of ``a + b`` is
    ``mix(hash a + hash b)``, symmetric in the operands but not associative, as the exact
    domain's hash-consed nodes are (equal trees, equal hashes; other trees differ)."""
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x


def _carry_source(dt: Any, dm: Any, dk: Any, d: int, st: Any, sm: Any, sk: Any, s: int, n: int,
                  masks: bool) -> None:
    """Copy the exact fields of ``n`` values from position ``s`` to position ``d``."""
    for x in range(n):
        dt[d + x] = st[s + x]
        dm[d + x] = sm[s + x]
    if masks:
        for x in range(n):
            dk[d + x] = sk[s + x]


def _join_source(at: Any, am: Any, ak: Any, a: int, bt: Any, bm: Any, bk: Any, b: int,
                 ot: Any, om: Any, ok: Any, o: int, nranks: Any, masks: bool) -> bool:
    """The exact fields of value ``a`` plus value ``b`` into position ``o`` (which may be
    ``b``); False where the exact domain raises: different chunks, more leaves than ranks,
    or (with masks) a rank counted twice."""
    ma = am[a]
    mb = bm[b]
    if ma >> _SHIFT != mb >> _SHIFT or (ma & _LOW32) + (mb & _LOW32) > nranks:
        return False
    t = _mix(at[a] + bt[b])
    if masks:
        ka = ak[a]
        kb = bk[b]
        if ka & kb != _ZERO:
            return False
        ok[o] = ka | kb
    ot[o] = t
    om[o] = ma + (mb & _LOW32)
    return True


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_RANK = np.uint64(1 << 32)
_ONE = np.uint64(1)


def _inputs_source(seed: Any, ids: Any, first: Any, c: int, mem_v: Any, mem_ok: Any, exact: bool, masks: bool,
                   mem_t: Any, mem_m: Any, mem_k: Any) -> None:
    """GPU ``j``'s ``c`` inputs (:func:`collc.ir.symbolic.leaf_at` of ``ids[j]``, in one pass
    with no temporaries) into the run from ``first[j]``, and with ``exact`` their exact fields."""
    for j in range(len(ids)):
        base = ids[j] * _RANK + seed
        a = first[j]
        for x in range(c):
            v = _mix((np.uint64(x) + base) * _GOLDEN)
            mem_v[a + x] = v
            mem_ok[a + x] = True
            if exact:
                mem_t[a + x] = v
                mem_m[a + x] = (np.uint64(x) + _ONE) << _SHIFT | _ONE
                if masks:
                    mem_k[a + x] = _ONE << ids[j]


def _colsum_source(seed: Any, nranks: int, c: int) -> Any:
    """:meth:`collc.ir.symbolic.NumericExpectation.colsum`: per input chunk the sum of every
    rank's input (mod 2^64), without a temporary per rank."""
    out = np.zeros(c, dtype=np.uint64)
    for q in range(nranks):
        base = np.uint64(q) * _RANK + seed
        for x in range(c):
            out[x] += _mix((np.uint64(x) + base) * _GOLDEN)
    return out


def _pack_source(code: Any, op: Any, hasdep: Any, cnt: Any, dep: Any, deps: Any, soff: Any, doff: Any,
                 sbuf: Any, dbuf: Any, out: Any) -> None:
    """The step records (``S_*``) in one pass: a flag never reaches 2^31, so clipping ``deps``
    there keeps every comparison with it; the offsets of steps that use no operand do not
    matter (:func:`_memory` refuses a used one outside int32) and an unknown buffer reads the
    tb's column BAD_BUFFER."""
    hi = 2 ** 31 - 1
    for i in range(len(op)):
        out[i, S_CODE] = code[op[i]] | (256 if hasdep[i] != 0 else 0)
        out[i, S_CNT] = cnt[i]
        out[i, S_DEP] = dep[i]
        out[i, S_DEPS] = min(max(deps[i], -hi - 1), hi)
        out[i, S_SOFF] = min(max(soff[i], 0), hi)
        out[i, S_DOFF] = min(max(doff[i], 0), hi)
        out[i, S_SBUF] = min(max(sbuf[i], 0), BAD_BUFFER)
        out[i, S_DBUF] = min(max(dbuf[i], 0), BAD_BUFFER)


def _mismatches_source(v: Any, ok: Any, idx: Any, want: Any, n: int) -> Any:
    """:data:`collc.check.data.Mismatches` in one pass with no temporaries (``n`` >= 0)."""
    out = np.empty(max(n, 0), dtype=np.int64)
    found = 0
    if n <= 0:
        return out
    for k in range(len(idx)):
        if found == n:
            break
        i = idx[k]
        if not ok[i] or v[i] != want[k]:
            out[found] = k
            found += 1
    return out[:found]


#: What the kernel calls; :func:`_compiled` replaces them by their numba-compiled forms first.
_wake: Callable[..., tuple[int, int]] = _wake_source
_park: Callable[..., None] = _park_source
_mix: Callable[..., Any] = _mix_source
_carry: Callable[..., None] = _carry_source
_join: Callable[..., bool] = _join_source
_inputs: Callable[..., None] = _inputs_source
_colsum: Callable[..., Any] = _colsum_source
_pack: Callable[..., None] = _pack_source
_mismatches: Callable[..., Any] = _mismatches_source


def _kernel_source(tbr: Any, st: Any, nkeys: int, nconn: int, mac: int, nslots: int, ps: Any,
                   data: bool, tb_base: Any, mem_v: Any, mem_ok: Any, npool: int, ntmp: int,
                   exact: bool, mem_t: Any, mem_m: Any, mem_k: Any, nranks: Any) -> Any:
    """The scheduling loop of ``executor.simulate`` over arrays (compiled by :func:`_compiled`).

    ``tbr``: a row per tb (``T_*``; updated in place): its position, its connections (-1:
    none), the tb receiving on its out connection (-1: none), its flag's wait-list key (one
    of ``nkeys``); with ``data``, ``tb_base[t, b]`` is where buffer ``b`` of tb ``t``'s GPU
    starts in ``mem_v``/``mem_ok``.
    ``st``: a row per step (``S_*``).  The payloads in flight live in a pool of ``npool``
    chunks at first, compacted (and grown) when full.  With ``exact`` too, each value also
    carries ``mem_t``/``mem_m``/``mem_k`` (see :func:`_join_source`; ``mem_k`` is empty above
    64 ranks) and a reduction that the exact domain refuses is a data error.
    Returns (status, pieces, pieces held per connection).
    """
    ntbs = len(tbr)
    full = ps[mac]
    conn = np.full((nconn, 8), -1, dtype=np.int64)
    conn[:, C_AVAIL] = 0
    conn[:, C_USED] = 0
    cap = 2 * nconn + 64
    runs = np.full((cap, 4), -1, dtype=np.int64)
    free = 0                          # runs [free, cap) never used; freed runs go on a free list
    free_list = -1
    # one intrusive list per flag key and per connection side, and one runnable queue (a tb
    # is in at most one of them; T_NXT links them)
    fk = np.full((nkeys, 2), -1, dtype=np.int64)
    q_head = 0 if ntbs else -1
    q_tail = ntbs - 1
    for t in range(ntbs - 1):
        tbr[t, T_NXT] = t + 1
    pool_v = np.zeros(npool if data else 0, dtype=np.uint64)
    pool_ok = np.zeros(npool if data else 0, dtype=np.bool_)
    cursor = 0
    tmp_v = np.zeros(ntmp if data else 0, dtype=np.uint64)
    tmp_ok = np.zeros(ntmp if data else 0, dtype=np.bool_)
    masks = exact and len(mem_k) > 0
    nx = npool if exact else 0
    pool_t = np.zeros(nx, dtype=np.uint64)
    pool_m = np.zeros(nx, dtype=np.uint64)
    pool_k = np.zeros(nx if masks else 0, dtype=np.uint64)
    nx = ntmp if exact else 0
    tmp_t = np.zeros(nx, dtype=np.uint64)
    tmp_m = np.zeros(nx, dtype=np.uint64)
    tmp_k = np.zeros(nx if masks else 0, dtype=np.uint64)
    total = 0

    while q_head >= 0:
        t = q_head
        q_head = tbr[t, T_NXT]
        if q_head < 0:
            q_tail = -1
        tbr[t, T_NXT] = -1
        end = tbr[t, T_END]
        cin = tbr[t, T_IN]
        cout = tbr[t, T_OUT]
        while tbr[t, T_PC] < end:
            row = tbr[t, T_PC]
            if not tbr[t, T_READY]:
                target = st[row, S_DEP]
                if target >= 0 and tbr[target, T_FLAG] < st[row, S_DEPS]:
                    tbr[t, T_WAITS] = W_DEP
                    _park(t, fk, tbr[target, T_KEY], 0, tbr)
                    break
                tbr[t, T_READY] = 1
            code = st[row, S_CODE]
            fl = code & 0xFF
            cnt = st[row, S_CNT]
            n_pieces = 1 if fl & F_LOCAL else (cnt + mac - 1) // mac
            piece = tbr[t, T_PIECE]
            k = n_pieces - piece
            if fl & F_RECV:
                if conn[cin, C_AVAIL] < k:
                    k = conn[cin, C_AVAIL]
                    if k == 0:
                        tbr[t, T_WAITS] = W_RECV
                        _park(t, conn, cin, C_DATA, tbr)
                        break
            if fl & F_SEND:
                room = nslots - conn[cout, C_USED]
                fits = room // full
                if fits < k:
                    last = n_pieces - 1
                    if piece + fits == last:
                        # only the step's last piece can be smaller than a full one
                        if ps[cnt - last * mac] <= room - fits * full:
                            fits += 1
                    # the hand-off rule (executor.simulate)
                    rx = tbr[t, T_RX]
                    if rx >= 0 and tbr[rx, T_READY] and tbr[rx, T_PC] < tbr[rx, T_END]:
                        rrow = tbr[rx, T_PC]
                        if st[rrow, S_CODE] & F_PLAIN:
                            rx_left = (st[rrow, S_CNT] + mac - 1) // mac - tbr[rx, T_PIECE] - conn[cout, C_AVAIL]
                            if rx_left > fits:
                                fits = rx_left
                    if fits < k:
                        k = fits
                    if k <= 0:
                        tbr[t, T_WAITS] = W_SPACE
                        _park(t, conn, cout, C_SPACE, tbr)
                        break
            lo = piece * mac
            hi = cnt if fl & F_LOCAL else min(cnt, (piece + k) * mac)
            n = hi - lo
            if fl & F_RECV:
                got = 0
                j = k
                while j > 0:
                    r = conn[cin, C_HEAD]
                    rn = runs[r, R_N]
                    take = min(j, rn)
                    if take == rn:
                        m = (rn - 1) * mac + runs[r, R_TAIL]
                        conn[cin, C_USED] -= (rn - 1) * full + ps[runs[r, R_TAIL]]
                        conn[cin, C_HEAD] = runs[r, R_NEXT]
                        if runs[r, R_NEXT] < 0:
                            conn[cin, C_TAIL] = -1
                        runs[r, R_NEXT] = free_list
                        free_list = r
                    else:
                        m = take * mac
                        conn[cin, C_USED] -= take * full
                        runs[r, R_N] = rn - take
                    if data:
                        if got + m > ntmp:
                            return DATA_ERROR, total, conn[:, C_AVAIL].copy()
                        p0 = runs[r, R_POS]
                        for x in range(m):
                            tmp_v[got + x] = pool_v[p0 + x]
                            tmp_ok[got + x] = pool_ok[p0 + x]
                        if exact:
                            _carry(tmp_t, tmp_m, tmp_k, got, pool_t, pool_m, pool_k, p0, m, masks)
                        runs[r, R_POS] = p0 + m
                    got += m
                    conn[cin, C_AVAIL] -= take
                    j -= take
                q_head, q_tail = _wake(conn, cin, C_SPACE, tbr, q_head, q_tail)
                if data and got != n:
                    return DATA_ERROR, total, conn[:, C_AVAIL].copy()
            op = code >> 16
            if data:
                src0 = tb_base[t, st[row, S_SBUF]] + st[row, S_SOFF]
                dst0 = tb_base[t, st[row, S_DBUF]] + st[row, S_DOFF]
                src = src0 + lo
                dst = dst0 + lo
                if fl & F_COMBINE:           # combine what arrived with src
                    for x in range(n):
                        tmp_v[x] = mem_v[src + x] + tmp_v[x]
                        tmp_ok[x] = mem_ok[src + x] and tmp_ok[x]
                        if not tmp_ok[x]:
                            return DATA_ERROR, total, conn[:, C_AVAIL].copy()
                        if exact and not _join(mem_t, mem_m, mem_k, src + x, tmp_t, tmp_m, tmp_k, x,
                                               tmp_t, tmp_m, tmp_k, x, nranks, masks):
                            return DATA_ERROR, total, conn[:, C_AVAIL].copy()
                elif op == 7:         # re: dst + src
                    for x in range(n):
                        tmp_v[x] = mem_v[dst + x] + mem_v[src + x]
                        tmp_ok[x] = mem_ok[dst + x] and mem_ok[src + x]
                        if not tmp_ok[x]:
                            return DATA_ERROR, total, conn[:, C_AVAIL].copy()
                        if exact and not _join(mem_t, mem_m, mem_k, dst + x, mem_t, mem_m, mem_k, src + x,
                                               tmp_t, tmp_m, tmp_k, x, nranks, masks):
                            return DATA_ERROR, total, conn[:, C_AVAIL].copy()
                elif op == 6:         # cpy (through tmp: the ranges may overlap)
                    for x in range(n):
                        tmp_v[x] = mem_v[src + x]
                        tmp_ok[x] = mem_ok[src + x]
                    if exact:
                        _carry(tmp_t, tmp_m, tmp_k, 0, mem_t, mem_m, mem_k, src, n, masks)
                if op == 6 and src0 == dst0:
                    pass              # in place the copy is onto itself: no write
                elif fl & F_WRITE:
                    for x in range(n):
                        mem_v[dst + x] = tmp_v[x]
                        mem_ok[dst + x] = tmp_ok[x]
                    if exact:
                        _carry(mem_t, mem_m, mem_k, dst, tmp_t, tmp_m, tmp_k, 0, n, masks)
            if fl & F_SEND:
                if data and cursor + n > len(pool_v):
                    # compact: the payloads still in flight to the front, in pool order
                    nlive = 0
                    for c in range(nconn):
                        r = conn[c, C_HEAD]
                        while r >= 0:
                            nlive += 1
                            r = runs[r, R_NEXT]
                    live = np.empty(nlive, dtype=np.int64)
                    nlive = 0
                    for c in range(nconn):
                        r = conn[c, C_HEAD]
                        while r >= 0:
                            live[nlive] = r
                            nlive += 1
                            r = runs[r, R_NEXT]
                    cursor = 0
                    for i in np.argsort(runs[live, R_POS]):
                        r = live[i]
                        m = (runs[r, R_N] - 1) * mac + runs[r, R_TAIL]
                        p0 = runs[r, R_POS]
                        for x in range(m):
                            pool_v[cursor + x] = pool_v[p0 + x]
                            pool_ok[cursor + x] = pool_ok[p0 + x]
                        if exact:
                            _carry(pool_t, pool_m, pool_k, cursor, pool_t, pool_m, pool_k, p0, m, masks)
                        runs[r, R_POS] = cursor
                        cursor += m
                    if 2 * (cursor + n) > len(pool_v):
                        size = max(2 * len(pool_v), 2 * (cursor + n))
                        pool_v2 = np.zeros(size, dtype=np.uint64)
                        pool_ok2 = np.zeros(size, dtype=np.bool_)
                        pool_v2[:cursor] = pool_v[:cursor]
                        pool_ok2[:cursor] = pool_ok[:cursor]
                        pool_v, pool_ok = pool_v2, pool_ok2
                        if exact:
                            pool_t2 = np.zeros(size, dtype=np.uint64)
                            pool_m2 = np.zeros(size, dtype=np.uint64)
                            pool_k2 = np.zeros(size if masks else 0, dtype=np.uint64)
                            _carry(pool_t2, pool_m2, pool_k2, 0, pool_t, pool_m, pool_k, 0, cursor, masks)
                            pool_t, pool_m, pool_k = pool_t2, pool_m2, pool_k2
                if free_list >= 0:
                    r = free_list
                    free_list = runs[r, R_NEXT]
                else:
                    if free == cap:
                        runs2 = np.full((2 * cap, 4), -1, dtype=np.int64)
                        runs2[:cap] = runs
                        runs = runs2
                        cap *= 2
                    r = free
                    free += 1
                tail = n - (k - 1) * mac
                runs[r, R_N] = k
                runs[r, R_TAIL] = tail
                runs[r, R_POS] = cursor
                runs[r, R_NEXT] = -1
                if conn[cout, C_TAIL] < 0:
                    conn[cout, C_HEAD] = r
                else:
                    runs[conn[cout, C_TAIL], R_NEXT] = r
                conn[cout, C_TAIL] = r
                conn[cout, C_AVAIL] += k
                conn[cout, C_USED] += (k - 1) * full + ps[tail]
                if data:
                    if op == 0:   # s: a snapshot of src at send time
                        src = tb_base[t, st[row, S_SBUF]] + st[row, S_SOFF] + lo
                        for x in range(n):
                            pool_v[cursor + x] = mem_v[src + x]
                            pool_ok[cursor + x] = mem_ok[src + x]
                        if exact:
                            _carry(pool_t, pool_m, pool_k, cursor, mem_t, mem_m, mem_k, src, n, masks)
                    else:
                        for x in range(n):
                            pool_v[cursor + x] = tmp_v[x]
                            pool_ok[cursor + x] = tmp_ok[x]
                        if exact:
                            _carry(pool_t, pool_m, pool_k, cursor, tmp_t, tmp_m, tmp_k, 0, n, masks)
                    cursor += n
                q_head, q_tail = _wake(conn, cout, C_DATA, tbr, q_head, q_tail)
            total += k
            piece += k
            if piece >= n_pieces:
                key = tbr[t, T_KEY]
                if (code >> 8) & 1:
                    tbr[t, T_FLAG] = row - tbr[t, T_START]
                    q_head, q_tail = _wake(fk, key, 0, tbr, q_head, q_tail)
                tbr[t, T_PIECE] = 0
                tbr[t, T_READY] = 0
                tbr[t, T_PC] = row + 1
                if row + 1 >= end:
                    # waiters on a finished tb re-check once and then block for good
                    q_head, q_tail = _wake(fk, key, 0, tbr, q_head, q_tail)
            else:
                tbr[t, T_PIECE] = piece
    status = OK
    for t in range(ntbs):
        if tbr[t, T_PC] < tbr[t, T_END]:
            status = BLOCKED
            break
    return status, total, conn[:, C_AVAIL].copy()


_KERNEL: Callable[..., Any] | None = None
_NO_NUMBA = False
_CACHED = False      # numba keeps the compiled kernel on disk
_RAN = False         # the kernel ran in this process (its set-up is paid)


def _compiled() -> Callable[..., Any] | None:
    """The kernel compiled by numba (imported here, on first use; None without numba).  Its
    machine code is cached next to this module, or when that directory is read-only in
    numba's user cache directory (or ``NUMBA_CACHE_DIR``); with no writable place at all it
    is compiled in memory, once per process."""
    global _KERNEL, _NO_NUMBA, _CACHED, _wake, _park, _mix, _carry, _join, _inputs, _colsum, _pack, _mismatches
    if _KERNEL is None and not _NO_NUMBA:
        try:
            import numba
        except ImportError:
            _NO_NUMBA = True
            return None
        sources = (_wake_source, _park_source, _mix_source, _carry_source, _join_source, _inputs_source,
                   _colsum_source, _pack_source, _mismatches_source, _kernel_source)
        try:
            compiled = [numba.njit(cache=True, nogil=True)(f) for f in sources]
            _CACHED = True
        except RuntimeError:      # numba found no writable cache directory
            compiled = [numba.njit(cache=False, nogil=True)(f) for f in sources]
        _wake, _park, _mix, _carry, _join, _inputs, _colsum, _pack, _mismatches, _KERNEL = compiled
    return _KERNEL


def worth_it(nsteps: int) -> bool:
    """Whether a run of ``nsteps`` steps should take the kernel: from :data:`KERNEL_MIN_STEPS`
    while it has not run in this process, from :data:`KERNEL_WARM_MIN_STEPS` once it has, and
    from :data:`KERNEL_UNCACHED_MIN_STEPS` when it would have to be compiled first."""
    if _RAN:
        return nsteps >= KERNEL_WARM_MIN_STEPS
    if nsteps < KERNEL_MIN_STEPS or _compiled() is None:
        return False
    return _CACHED or nsteps >= KERNEL_UNCACHED_MIN_STEPS


# =========================================================================== preparation
@dataclass(frozen=True, eq=False)
class _Layout:
    """The program's part of the kernel's input: independent of placement and size."""

    ops: OpStream
    tb_in: np.ndarray
    tb_out: np.ndarray
    tb_rx: np.ndarray
    tb_key: np.ndarray
    nkeys: int
    nconn: int
    flags: np.ndarray
    steps: np.ndarray                      # the kernel's step records (S_*)
    gpu_row: np.ndarray                    # per tb: its GPU's position in p.gpus

    @property
    def cnt(self) -> np.ndarray:
        return self.steps[:, S_CNT]

    @property
    def dep(self) -> np.ndarray:
        """Per step the tb whose flag it waits for (-1: none)."""
        return self.steps[:, S_DEP]


_LAYOUTS: dict[int, tuple[weakref.ref[Program], _Layout | None]] = {}


def layout(p: Program, ops: OpStream | None) -> _Layout | None:
    """The program's arrays for the kernel (cached while ``p`` lives); None when the program
    has something the Python model treats specially (a non-local step of no chunks, a send
    or receive on a tb without that peer, two GPUs with one id): it then runs in Python."""
    hit = _LAYOUTS.get(id(p))
    if hit is not None and hit[0]() is p:
        return hit[1]
    out = _make_layout(p, ops if ops is not None else OpStream.of(p))
    key = id(p)

    def forget(_: weakref.ref[Program]) -> None:
        _LAYOUTS.pop(key, None)

    _LAYOUTS[key] = (weakref.ref(p, forget), out)
    return out


def _groups(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by their values in ``cols``: per row its group, the groups numbered in the
    order of their first rows (as ``d.setdefault(key, len(d))`` numbers keys), and per group
    its last row (the one a loop of ``d[key] = row`` keeps)."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(cols[::-1])          # stable: the rows of a group stay in order
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for col in cols:
        col = col[order]
        new[1:] |= col[1:] != col[:-1]
    first, last = order[new], order[np.append(new[1:], True)]
    by_first = np.argsort(first)
    number = np.empty(len(first), dtype=np.int64)
    number[by_first] = np.arange(len(first))
    group = np.empty(n, dtype=np.int64)
    group[order] = number[np.cumsum(new) - 1]
    return group, last[by_first]


def _make_layout(p: Program, ops: OpStream) -> _Layout | None:
    _compiled()          # _pack compiled, where numba is there
    ids = np.array([g.id for g in p.gpus], dtype=np.int64)
    if len(unique(ids)) != len(ids):
        return None
    flags = _FLAGS8[ops.op]
    cnt = ops.count
    tb = ops.tb
    nonlocal_ = (flags & F_LOCAL) == 0
    if np.any(nonlocal_ & (cnt < 1)) or (len(cnt) and int(cnt.max()) > _I32.max) or len(cnt) > _I32.max:
        return None
    if np.any(((flags & F_RECV) != 0) & (ops.tb_recv[tb] < 0)) or np.any(((flags & F_SEND) != 0) & (ops.tb_send[tb] < 0)):
        return None
    ntbs = ops.ntbs
    gpu, tid, send, recv, chan = ops.tb_gpu, ops.tb_id, ops.tb_send, ops.tb_recv, ops.tb_chan
    # the Python model's dictionaries: connections (sender, receiver, chan) numbered as it
    # meets them, each tb's sending side before its receiving side; the last tb listed under
    # a key wins
    sides = np.stack((send >= 0, recv >= 0), axis=1).ravel()    # entry 2k: tb k sends, 2k + 1: receives
    conn, _ = _groups(np.stack((gpu, recv), axis=1).ravel()[sides], np.stack((send, gpu), axis=1).ravel()[sides],
                      np.repeat(chan, 2)[sides])
    nconn = int(conn.max(initial=-1)) + 1
    entry = np.full(2 * ntbs, -1, dtype=np.int64)
    entry[sides] = conn
    tb_out, tb_in = entry[0::2].copy(), entry[1::2].copy()
    receiver = np.full(nconn, -1, dtype=np.int64)
    receives = np.flatnonzero(recv >= 0)
    np.maximum.at(receiver, tb_in[receives], receives)
    tb_rx = np.full(ntbs, -1, dtype=np.int64)
    tb_rx[send >= 0] = receiver[tb_out[send >= 0]]
    name, winner = _groups(gpu, tid)            # (gpu, tb id) -> the tb the Python model finds under it
    tb_key, _ = _groups(winner[name])
    nkeys = int(tb_key.max(initial=-1)) + 1
    # the tb each step waits for (-1: none): a dependency on an earlier step of its own tb
    # holds by program order, and one on a tb the GPU does not have holds too
    depid = ops.depid.astype(np.int64)
    deps = ops.deps.astype(np.int64)
    row_gpu = ops.tb_gpu[tb]
    waits = (depid >= 0) & ~((depid == ops.tb_id[tb]) & (deps < ops.step))
    dep = np.full(len(depid), -1, dtype=np.int64)
    if ntbs and waits.any():
        name_gpu, name_tid = gpu[winner], tid[winner]
        lo_g, lo_t = int(name_gpu.min()), int(name_tid.min())
        span = int(name_tid.max()) - lo_t + 1
        packed = (name_gpu - lo_g) * span + (name_tid - lo_t)
        order = np.argsort(packed)
        packed, name_vals = packed[order], winner[order]
        w = np.flatnonzero(waits)
        inside = (depid[w] >= lo_t) & (depid[w] < lo_t + span)
        want = (row_gpu[w] - lo_g) * span + (depid[w] - lo_t)
        at = np.minimum(np.searchsorted(packed, want), len(packed) - 1)
        hit = inside & (packed[at] == want)
        dep[w[hit]] = name_vals[at[hit]]
    by_id = np.argsort(ids)
    gpu_row = by_id[np.searchsorted(ids[by_id], gpu)]
    # one int32 record per step (5 million steps at 4096 ranks)
    steps = np.empty((len(cnt), S_WIDTH), dtype=np.int32)
    _pack(_CODE, ops.op, ops.hasdep, cnt, dep, deps, ops.srcoff, ops.dstoff, ops.srcbuf, ops.dstbuf, steps)
    return _Layout(ops, tb_in, tb_out, tb_rx, tb_key, nkeys, nconn, flags, steps, gpu_row)


@dataclass
class KernelResult:
    finished: bool
    pieces: int
    data_ok: bool
    blocked: list[str]
    order: list[str] = field(default_factory=list)    # the exact check's reduction-order warning


def run(p: Program, coll: Collective, model: SizeModel, lay: _Layout, numeric: bool, seed: int,
        pool: int = 0, exact: bool = False) -> KernelResult | None:
    """Simulate ``p`` once with the kernel: deadlock only, or with numeric data (``numeric``).

    ``exact`` (with ``numeric``): the exact check at array speed.  Besides its sum, each value
    carries its origin chunk, its number of leaves, up to 64 ranks the mask of its origin
    ranks, and a hash of its reduction tree; a reduction the exact domain
    (:class:`collc.ir.symbolic.ExactDomain`) refuses is a data error, and a run that passes
    returns the reduction-order warning (``order``) the symbolic postcondition would give.
    Above 64 ranks, a rank counted twice in a value that no output depends on goes unseen (an
    output with one is a wrong sum).

    ``blocked`` explains a deadlock in the words of ``executor.simulate`` (data off only);
    ``data_ok`` is False when a data error occurred (the caller reruns the Python model for
    its messages).  None when the numeric data check does not fit the kernel (an operand
    outside its buffer, an unknown buffer): the Python model handles those.  ``pool``: the
    payload pool's first size in chunks (0: one that rarely needs to grow; tests make it tiny
    so that it is compacted and grown).
    """
    global _RAN
    kernel = _compiled()
    if kernel is None:
        return None
    ops = lay.ops
    ps = np.array([model.piece_slots(c) for c in range(model.mac + 1)], dtype=np.int64)
    mem_v = np.zeros(1, dtype=np.uint64)
    mem_ok = np.zeros(1, dtype=np.bool_)
    npool = ntmp = 0
    mem: dict[tuple[int, str], Any] = {}
    trees: dict[tuple[int, str], np.ndarray] = {}
    amap: dict[tuple[int, str], tuple[str, int]] = {}
    exact = exact and numeric
    mem_t = mem_m = mem_k = np.zeros(1, dtype=np.uint64)
    ntbs = ops.ntbs
    tbr = np.zeros((ntbs, T_WIDTH), dtype=np.int32)
    tb_base = np.zeros((ntbs, len(BUFFERS) + 1), dtype=np.int64)
    if numeric:
        memory = _memory(p, coll, lay, seed, exact)
        if memory is None:
            return None
        mem_v, mem_ok, tb_base, mem, amap, (mem_t, mem_m, mem_k, trees) = memory
        # the pool holds what is in flight; it starts at a size that rarely needs to grow
        sends = int(lay.cnt[(lay.flags & F_SEND) != 0].sum(dtype=np.int64))
        ntmp = int(lay.cnt.max(initial=0)) + model.mac + 1
        npool = pool or max(1, min(sends, max(1 << 20, 8 * lay.nconn, 4 * ntmp)))
    start = ops.tb_start.astype(np.int64)
    tbr[:, T_PC] = tbr[:, T_START] = start[:-1]
    tbr[:, T_END] = start[1:]
    tbr[:, T_NXT] = tbr[:, T_FLAG] = -1
    tbr[:, T_IN], tbr[:, T_OUT], tbr[:, T_RX], tbr[:, T_KEY] = lay.tb_in, lay.tb_out, lay.tb_rx, lay.tb_key
    status, pieces, avail = kernel(tbr, lay.steps, lay.nkeys, lay.nconn, model.mac, model.slots, ps,
                                   numeric, tb_base, mem_v, mem_ok, npool, ntmp,
                                   exact, mem_t, mem_m, mem_k, np.uint64(coll.nranks))
    pc, waits, flag = tbr[:, T_PC], tbr[:, T_WAITS], tbr[:, T_FLAG]
    _RAN = True
    if status == DATA_ERROR:
        return KernelResult(True, int(pieces), False, [])
    if status == BLOCKED:
        return KernelResult(False, int(pieces), True, [] if numeric else _blocked(lay, pc, waits, flag, avail))
    if numeric:
        errors: list[str] = []
        gpus = {g.id: g for g in p.gpus}
        numeric_postcondition(coll, mem, amap, gpus, seed, errors,
                              lambda: _colsum(np.uint64(seed), coll.nranks, coll.input_chunks), _mismatches)
        if errors:
            return KernelResult(True, int(pieces), False, [])
        if exact and coll.kind.reduces:
            return KernelResult(True, int(pieces), True, [], order_warnings(coll, trees, amap, gpus))
    return KernelResult(True, int(pieces), True, [])


def _memory(p: Program, coll: Collective, lay: _Layout, seed: int, exact: bool = False) -> tuple[Any, ...] | None:
    """Every GPU's physical buffers end to end with the inputs set and where each tb's buffers
    start in them; None when a step's operand lies outside
    its buffer (the Python model's slicing then decides what happens).  With ``exact``, the
    exact fields too (tree hashes, meta words, masks; see :func:`_join_source`) and the tree
    hashes' rows by (GPU, buffer)."""
    ops = lay.ops
    c = coll.input_chunks
    ngpu = len(p.gpus)
    start = np.zeros((ngpu, len(BUFFERS)), dtype=np.int64)    # flat start of each physical buffer
    size = np.zeros((ngpu, len(BUFFERS)), dtype=np.int64)
    pb = np.zeros((ngpu, len(BUFFERS)), dtype=np.int64)       # logical buffer -> physical buffer
    base = np.zeros((ngpu, len(BUFFERS)), dtype=np.int64)
    amap: dict[tuple[int, str], tuple[str, int]] = {}
    at = 0
    for gi, g in enumerate(p.gpus):
        for b, name in enumerate(BUFFERS):
            phys, off = coll.alias(g.id, Buffer(name))
            amap[(g.id, name)] = (phys.value, off)
            pb[gi, b], base[gi, b] = BUFFERS.index(phys.value), off
        # only the buffers the runtime really allocates (executor.simulate)
        for b, want in enumerate((max(g.i_chunks, c), max(g.o_chunks, coll.output_chunks), g.s_chunks)):
            size[gi, pb[gi, b]] = max(size[gi, pb[gi, b]], base[gi, b] + want)
        for b in range(len(BUFFERS)):
            start[gi, b] = at
            at += int(size[gi, b])
    mem_v = np.zeros(at, dtype=np.uint64)
    mem_ok = np.zeros(at, dtype=np.bool_)
    ids = np.array([g.id for g in p.gpus], dtype=np.uint64)
    masks = exact and ngpu > 0 and int(ids.max()) < 64 and coll.nranks <= 64
    mem_t = np.zeros(at if exact else 1, dtype=np.uint64)
    mem_m = np.zeros(at if exact else 1, dtype=np.uint64)
    mem_k = np.zeros(at if masks else 0, dtype=np.uint64)
    first = start[np.arange(ngpu), pb[:, 0]] + base[:, 0]
    _inputs(np.uint64(seed), ids, first, c, mem_v, mem_ok, exact, masks, mem_t, mem_m, mem_k)
    # where each tb's logical buffers start (column len(BUFFERS): an unknown buffer, never used)
    g_of = lay.gpu_row
    tb_base = np.zeros((len(g_of), len(BUFFERS) + 1), dtype=np.int64)
    tb_end = np.zeros((len(g_of), len(BUFFERS) + 1), dtype=np.int64)
    for b in range(len(BUFFERS)):
        phys = pb[g_of, b]
        tb_base[:, b] = start[g_of, phys] + base[g_of, b]
        tb_end[:, b] = start[g_of, phys] + size[g_of, phys]
    # every operand a step uses must lie inside its physical buffer (rows in batches); per tb
    # and buffer code, the room from its start to the end of its physical buffer (flat: one
    # gather per operand instead of two two-dimensional ones)
    width = len(BUFFERS) + 1
    room = (tb_end - tb_base).ravel()
    for r0 in range(0, len(ops.tb), 1 << 20):
        rows = slice(r0, r0 + (1 << 20))
        fl, op, cnt, tb = lay.flags[rows], ops.op[rows], lay.cnt[rows], ops.tb[rows]
        flat = tb.astype(np.int64) * width
        for bufs, offs, used in ((ops.srcbuf[rows], ops.srcoff[rows], ((fl & F_READ) != 0) | (op == _RE)),
                                 (ops.dstbuf[rows], ops.dstoff[rows], ((fl & F_WRITE) != 0) | (op == _RE))):
            if np.any(used & ((bufs < 0) | (bufs >= len(BUFFERS)) | (cnt < 0) | (offs < 0) | (offs > _I32.max))):
                return None
            # offsets and counts are below 2^31 here: their sum fits int64
            if np.any(used & (offs.astype(np.int64) + cnt > room[flat + bufs])):
                return None
    mem: dict[tuple[int, str], Any] = {}
    trees: dict[tuple[int, str], np.ndarray] = {}
    for gi, g in enumerate(p.gpus):
        for b in sorted(set(pb[gi].tolist())):     # the buffers the runtime allocates
            a, n = int(start[gi, b]), int(size[gi, b])
            mem[(g.id, BUFFERS[b])] = NumVec(mem_v[a:a + n], mem_ok[a:a + n])
            if exact:
                trees[(g.id, BUFFERS[b])] = mem_t[a:a + n]
    return mem_v, mem_ok, tb_base, mem, amap, (mem_t, mem_m, mem_k, trees)


def _blocked(lay: _Layout, pc: np.ndarray, waits: np.ndarray, flag: np.ndarray, avail: np.ndarray) -> list[str]:
    """The blocked tbs in the words of ``executor.simulate`` (its ``_why``)."""
    ops = lay.ops
    out: list[str] = []
    for t in np.flatnonzero(pc < ops.tb_start[1:]).tolist():
        row = int(pc[t])
        gid, tid = int(ops.tb_gpu[t]), int(ops.tb_id[t])
        head = f"gpu {gid} tb {tid} step {row - int(ops.tb_start[t])} ({TYPES[int(ops.op[row])].value}): "
        w = int(waits[t])
        if w == W_DEP:
            a, b = int(ops.depid[row]), int(ops.deps[row])
            why = f"waits for tb {a} step {b} (flag {int(flag[lay.dep[row]])})"
        elif w == W_RECV:
            why = f"waits to receive from gpu {int(ops.tb_recv[t])} on chan {int(ops.tb_chan[t])}"
        elif w == W_SPACE:
            held = int(avail[lay.tb_out[t]]) if lay.tb_out[t] >= 0 else 0
            why = f"waits for space to send to gpu {int(ops.tb_send[t])} on chan {int(ops.tb_chan[t])} ({held} pieces in flight)"
        else:
            why = "blocked"
        out.append(head + why)
    return out

