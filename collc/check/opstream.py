"""The op stream: a Program as a struct of arrays (numpy), one row per step.

The checker's whole-program rules run over these arrays (a pass is a few vectorized
operations instead of a Python loop over one object per step); the Program's objects are
consulted only to explain what the arrays found wrong, with the same messages.

Rows are in document order: gpus as listed, their tbs as listed, each tb's steps in order.
A tb is named by its index ``k`` in that order (``tb_gpu[k]``, ``tb_id[k]``); its steps are
rows ``tb_start[k]`` to ``tb_start[k + 1]``.

>>> from collc.compiler.program import Gpu, Proto, Step, Threadblock
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

from dataclasses import dataclass

import numpy as np

from collc.check.runtime_model import FLAGS
from collc.compiler.program import Program, StepType

#: Step types by op code (``OpStream.op``).
TYPES: tuple[StepType, ...] = tuple(StepType)
_CODE = {t: i for i, t in enumerate(TYPES)}
#: Buffers by code; a name the runtime does not know gets code ``len(BUFFERS)``.
BUFFERS = ("i", "o", "s")
_BUF = {b: i for i, b in enumerate(BUFFERS)}
BAD_BUFFER = len(BUFFERS)
#: Flags of each op code (``runtime_model.FLAGS``), indexable by an op array.
OP_FLAGS = np.array([FLAGS[t] for t in TYPES], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class OpStream:
    """Per-tb and per-step arrays of one Program (int64 per tb; per step int32 when every
    value is below 2^30, else int64)."""

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
        tbs = [(g.id, t) for g in p.gpus for t in g.tbs]
        nsteps = np.fromiter((len(t.steps) for _, t in tbs), dtype=np.int64, count=len(tbs))
        start = np.zeros(len(tbs) + 1, dtype=np.int64)
        np.cumsum(nsteps, out=start[1:])
        # one GPU at a time (no list of every step's tuple at 4096 ranks), narrowed to int32
        # when every value fits with room for a sum of two
        parts = [np.array([(_CODE[st.type], st.s, _BUF.get(st.srcbuf, BAD_BUFFER), st.srcoff,
                            _BUF.get(st.dstbuf, BAD_BUFFER), st.dstoff, st.cnt, st.depid, st.deps, st.hasdep)
                           for t in g.tbs for st in t.steps], dtype=np.int64).reshape(-1, 10) for g in p.gpus]
        a = np.concatenate(parts) if parts else np.zeros((0, 10), dtype=np.int64)
        del parts
        if len(a) and max(int(a.max()), -int(a.min())) < 1 << 30:
            a = a.astype(np.int32)
        head = np.array([(gid, t.id, t.send, t.recv, t.chan) for gid, t in tbs], dtype=np.int64).reshape(len(tbs), 5)
        tb = np.repeat(np.arange(len(tbs), dtype=np.int64), nsteps)
        return OpStream(tb_gpu=head[:, 0], tb_id=head[:, 1], tb_send=head[:, 2], tb_recv=head[:, 3],
                        tb_chan=head[:, 4], tb_start=start, tb=tb, step=np.arange(len(a), dtype=np.int64) - start[tb],
                        op=a[:, 0], s=a[:, 1], srcbuf=a[:, 2], srcoff=a[:, 3], dstbuf=a[:, 4], dstoff=a[:, 5],
                        count=a[:, 6], depid=a[:, 7], deps=a[:, 8], hasdep=a[:, 9])
