"""The runtime's execution model shared by the checker and the event simulator
(docs/runtime-model.md): how a message size is sliced into pieces, how many FIFO slots a
piece takes (``SizeModel``, defined with the lowering that must respect it:
:mod:`collc.compiler.buffering`), and what each step type does (its flags).

>>> m = size_model(Proto.SIMPLE, 8, 8 * 1024)
>>> m.mac, m.piece_slots(1), m.pieces
(71, 2, 2)
>>> pieces_of(StepType.RECV_REDUCE_SEND, 5, 2), pieces_of(StepType.COPY, 5, 2)
(3, 1)
"""

from __future__ import annotations

# re-exported: the checker and the event simulator take the slicing from here
from collc.compiler.buffering import SizeModel as SizeModel
from collc.compiler.buffering import buffering_model as buffering_model
from collc.compiler.buffering import size_model as size_model
from collc.compiler.msccl.program import READS_SRC, RECVS, REDUCES, SENDS, WRITES_DST, Proto, StepType

# Step-type flags (bit set).  LOCAL: one piece, no connection (cpy, re, nop); READ: reads
# its src operand before any receive (all readers but re, which reads dst and src);
# PLAIN: a receive that only writes what arrives (r, rrc); COMBINE: reduces the arriving
# data with src (rrs, rrc, rrcs).
F_RECV, F_SEND, F_LOCAL, F_READ, F_WRITE, F_PLAIN, F_COMBINE, F_REDUCE = 1, 2, 4, 8, 16, 32, 64, 128

PLAIN_RECV = frozenset({StepType.RECV, StepType.RECV_REDUCE_COPY})
LOCAL = frozenset({StepType.NOP, StepType.COPY, StepType.REDUCE})

#: The flags of each step type.
FLAGS: dict[StepType, int] = {
    t: (F_RECV if t in RECVS else 0) | (F_SEND if t in SENDS else 0)
    | (F_LOCAL if t in LOCAL else 0)
    | (F_READ if t in READS_SRC and t is not StepType.REDUCE else 0)
    | (F_WRITE if t in WRITES_DST else 0) | (F_PLAIN if t in PLAIN_RECV else 0)
    | (F_COMBINE if t in (StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY,
                          StepType.RECV_REDUCE_COPY_SEND) else 0)
    | (F_REDUCE if t in REDUCES else 0)
    for t in StepType}


def pieces_of(ty: StepType, cnt: int, mac: int) -> int:
    """Pieces of a step of ``cnt`` chunks when a piece holds ``mac``: a local step is one."""
    return 1 if ty in LOCAL else -(-cnt // mac)


def waits_for(tb: int, pos: int, depid: int, deps: int) -> bool:
    """Whether step ``pos`` of tb ``tb`` waits for a flag: a dependency on an earlier step of its
    own tb already holds by program order."""
    return depid >= 0 and not (depid == tb and deps < pos)
