"""The runtime's execution model shared by the checker and the event simulator
(docs/runtime-model.md): how a message size is sliced into pieces, how many FIFO slots a
piece takes, and what each step type does (its flags).

>>> m = size_model(Proto.SIMPLE, 8, 8 * 1024)
>>> m.mac, m.piece_slots(1), m.pieces
(71, 2, 2)
>>> pieces_of(StepType.RECV_REDUCE_SEND, 5, 2), pieces_of(StepType.COPY, 5, 2)
(3, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from collc.compiler.limits import LL128_BUFF, LL_BUFF, NCCL_STEPS, SIMPLE_BUFF
from collc.compiler.program import READS_SRC, RECVS, REDUCES, SENDS, WRITES_DST, Proto, StepType

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


@dataclass(frozen=True)
class SizeModel:
    """How the runtime slices at one message size.

    ``mac`` is maxAllowedCount (chunks per piece).  A connection has ``slots`` slots
    (NCCL_STEPS = 8); a piece takes ``piece_slots`` of them: 1 for LL and LL128; for
    Simple 4 (two 2-step slices), or 2 when the piece is no larger than the minimum
    slice (1/32 of a slice, 32 KiB), since NCCL's Simple primitives then send it as one
    slice [ours, from prims_simple].  ``nbytes`` None is the unbounded worst case.
    """

    nbytes: int | None
    mac: int
    slots: int
    chunk_bytes: int | None
    simple: bool

    def piece_slots(self, chunks: int) -> int:
        if not self.simple:
            return 1
        if self.chunk_bytes is not None and chunks * self.chunk_bytes <= SIMPLE_BUFF // NCCL_STEPS * 2 // 32:
            return 2
        return 4

    @property
    def pieces(self) -> int:
        """Pieces of the largest kind a connection holds."""
        return self.slots // self.piece_slots(self.mac)

    def describe(self) -> str:
        size = "any size (maxBytes=0)" if self.nbytes is None else f"{self.nbytes} bytes"
        return f"{size}: {self.mac} chunk(s) per piece, {self.pieces} pieces per connection"


def size_model(proto: Proto, nchunks: int, nbytes: int | None) -> SizeModel:
    simple = proto is Proto.SIMPLE
    if nbytes is None:
        return SizeModel(None, 1, NCCL_STEPS, None, simple)
    if simple:
        eff = SIMPLE_BUFF // NCCL_STEPS * 4
    elif proto is Proto.LL:
        eff = LL_BUFF // NCCL_STEPS // 2
    else:
        eff = LL128_BUFF // NCCL_STEPS // 16 * 15
    chunk = max(1, -(-nbytes // max(nchunks, 1)))
    return SizeModel(nbytes, min(71, max(1, eff // chunk)), NCCL_STEPS, chunk, simple)


def buffering_model(pieces: int) -> SizeModel:
    """A hypothetical runtime whose connections hold ``pieces`` one-chunk pieces."""
    return SizeModel(None, 1, pieces, None, False)
