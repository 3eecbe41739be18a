"""The op stream: a Program as a struct of arrays (numpy), one row per step.

The checker's whole-program rules run over these arrays (a pass is a few vectorized
operations instead of a Python loop over one object per step); the Program's objects are
consulted only to explain what the arrays found wrong, with the same messages.

Rows are in document order: gpus as listed, their tbs as listed, each tb's steps in order.
A tb is named by its index ``k`` in that order (``tb_gpu[k]``, ``tb_id[k]``); its steps are
rows ``tb_start[k]`` to ``tb_start[k + 1]``.

>>> from collc.compiler.msccl.program import Gpu, Proto, Step, Threadblock
>>> s = Step(0, StepType.SEND, "i", 0, "o", 0, 2)
>>> r = Step(0, StepType.RECV, "i", 0, "o", 0, 2)
>>> prog = Program("x", Proto.SIMPLE, 1, 2, 2, "allgather", 0, 1, 0, 0,
...                (Gpu(0, 1, 2, 0, (Threadblock(0, 1, -1, 0, (s,)),)),
...                 Gpu(1, 1, 2, 0, (Threadblock(0, -1, 0, 0, (r,)),))))
>>> ops = OpStream.of(prog)
>>> ops.tb.tolist(), ops.count.tolist(), [TYPES[o].value for o in ops.op]
([0, 1], [2, 2], ['s', 'r'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from collc.check.runtime_model import FLAGS
from collc.compiler.msccl.program import Program, StepType

#: Step types by op code (``OpStream.op``).
TYPES: tuple[StepType, ...] = tuple(StepType)
_CODE = {t: i for i, t in enumerate(TYPES)}
#: Buffers by code; a name the runtime does not know gets code ``len(BUFFERS)``.
BUFFERS = ("i", "o", "s")
_BUF = {b: i for i, b in enumerate(BUFFERS)}
BAD_BUFFER = len(BUFFERS)
# the attributes :meth:`OpStream.of` reads, fetched at C speed
_TBS, _ID, _STEPS = attrgetter("tbs"), attrgetter("id"), attrgetter("steps")
_TB_HEAD = attrgetter("id", "send", "recv", "chan")
_INTS = attrgetter("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep")
_TYPE, _SRCBUF, _DSTBUF = attrgetter("type"), attrgetter("srcbuf"), attrgetter("dstbuf")
#: Flags of each op code (``runtime_model.FLAGS``), indexable by an op array.
OP_FLAGS = np.array([FLAGS[t] for t in TYPES], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class OpStream:
    """Per-tb and per-step arrays of one Program: int64 per tb; per step int32 (int64 when
    some value reaches 2^30), int8 for the op and buffer codes and ``hasdep``."""

    # per tb
    tb_gpu: np.ndarray
    tb_id: np.ndarray
    tb_send: np.ndarray
    tb_recv: np.ndarray
    tb_chan: np.ndarray
    tb_start: np.ndarray      # first row of each tb, plus the total at the end
    # per step
    tb: np.ndarray            # tb index of the row
    step: np.ndarray          # position of the step in its tb
    op: np.ndarray            # index into TYPES
    s: np.ndarray             # the step's ``s`` attribute
    srcbuf: np.ndarray        # index into BUFFERS (BAD_BUFFER if unknown)
    srcoff: np.ndarray
    dstbuf: np.ndarray
    dstoff: np.ndarray
    count: np.ndarray
    depid: np.ndarray
    deps: np.ndarray
    hasdep: np.ndarray

    @property
    def flags(self) -> np.ndarray:
        out: np.ndarray = OP_FLAGS[self.op]
        return out

    @property
    def ntbs(self) -> int:
        return len(self.tb_id)

    @staticmethod
    def of(p: Program) -> OpStream:
        tb_list = [t for g in p.gpus for t in g.tbs]
        per_gpu = np.fromiter(map(len, map(_TBS, p.gpus)), dtype=np.int64, count=len(p.gpus))
        gids = np.fromiter(map(_ID, p.gpus), dtype=np.int64, count=len(p.gpus))
        nsteps = np.fromiter(map(len, map(_STEPS, tb_list)), dtype=np.int64, count=len(tb_list))
        # one row per distinct Step object, gathered by index: a program shares one immutable Step
        # among equal steps (the reader does, 14 times over at 4096 ranks), and grouping the steps'
        # ids in numpy costs a fraction of reading ten attributes of each
        flat = list(chain.from_iterable(map(_STEPS, tb_list)))
        ids = np.fromiter(map(id, flat), dtype=np.int64, count=len(flat))
        # rows in the order of the Steps' ids (as sorting them gives), each step's row by ``inverse``
        _, first, which = np.unique(ids, return_index=True, return_inverse=True)
        del ids
        distinct = list(map(flat.__getitem__, first.tolist()))
        del flat, first
        n = len(distinct)
        table = np.empty((n, 10), dtype=np.int64)
        table[:, [1, 3, 5, 6, 7, 8, 9]] = np.fromiter(chain.from_iterable(map(_INTS, distinct)), dtype=np.int64,
                                                      count=7 * n).reshape(n, 7)
        table[:, 0] = np.fromiter(map(_CODE.__getitem__, map(_TYPE, distinct)), dtype=np.int64, count=n)
        table[:, 2] = np.fromiter(map(_BUF.get, map(_SRCBUF, distinct), repeat(BAD_BUFFER)), dtype=np.int64, count=n)
        table[:, 4] = np.fromiter(map(_BUF.get, map(_DSTBUF, distinct), repeat(BAD_BUFFER)), dtype=np.int64, count=n)
        del distinct
        cols = [col[which] for col in narrow([table[:, k] for k in range(10)])]     # narrowed, then gathered
        del which
        head = np.empty((len(tb_list), 5), dtype=np.int64)
        head[:, 0] = np.repeat(gids, per_gpu)
        head[:, 1:] = np.fromiter(chain.from_iterable(map(_TB_HEAD, tb_list)), dtype=np.int64,
                                  count=4 * len(tb_list)).reshape(len(tb_list), 4)
        return OpStream.of_columns(head, nsteps, cols)

    @staticmethod
    def of_columns(head: np.ndarray, nsteps: np.ndarray, cols: Sequence[np.ndarray]) -> OpStream:
        """From the tbs' (gpu, id, send, recv, chan) rows, their step counts and the ten per-step
        columns (:data:`COLUMNS`, as :func:`narrow` gives them), in document order."""
        start = np.zeros(len(head) + 1, dtype=np.int64)
        np.cumsum(nsteps, out=start[1:])
        tb = np.repeat(np.arange(len(head), dtype=np.int32), nsteps)
        step = (np.arange(len(tb), dtype=np.int64) - start[tb]).astype(np.int32)
        return OpStream(tb_gpu=head[:, 0].copy(), tb_id=head[:, 1].copy(), tb_send=head[:, 2].copy(),
                        tb_recv=head[:, 3].copy(), tb_chan=head[:, 4].copy(), tb_start=start, tb=tb, step=step,
                        op=cols[0], s=cols[1], srcbuf=cols[2], srcoff=cols[3], dstbuf=cols[4], dstoff=cols[5],
                        count=cols[6], depid=cols[7], deps=cols[8], hasdep=cols[9])


#: The per-step columns, in the order of :meth:`OpStream.of_columns`.
COLUMNS = ("op", "s", "srcbuf", "srcoff", "dstbuf", "dstoff", "count", "depid", "deps", "hasdep")
_CODES = (0, 2, 4, 9)     # op, srcbuf, dstbuf, hasdep


def narrow(cols: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The ten per-step columns in their stored types: int32 when every value fits with room
    for a sum of two (else int64), int8 for the codes that fit it (memory at 4096 ranks).  The
    same for any split of the rows: narrowing parts and then their concatenation gives what
    narrowing the whole does."""
    lo = min((int(c.min()) for c in cols if len(c)), default=0)
    hi = max((int(c.max()) for c in cols if len(c)), default=0)
    wide = np.int32 if max(hi, -lo) < 1 << 30 else np.int64
    out: list[np.ndarray] = []
    for k, col in enumerate(cols):
        if k in _CODES and (len(col) == 0 or (col.min() >= -128 and col.max() <= 127)):
            out.append(col.astype(np.int8, copy=False))
        else:
            out.append(col.astype(wide, copy=False))
    return out
