"""How the runtime slices a message into pieces and how many FIFO slots a piece takes
(docs/runtime-model.md, "Connections are bounded FIFOs").

The checker and the event simulator run programs on this model (``collc.check.runtime_model``
re-exports it); the lowering uses it too, to pair threadblocks only where the model says a
paired tb's sends cannot wait for a receiver (``collc.compiler.msccl.threadblocks``).

>>> m = size_model(Proto.SIMPLE, 8, None)     # maxBytes="0": one-chunk pieces, the tightest case
>>> m.pieces, m.send_slots(1), m.send_slots(2), m.send_slots(3)
(2, 4, 8, 12)
>>> size_model(Proto.LL, 8, None).send_slots(8)
8
>>> big = size_model(Proto.SIMPLE, 8, 8 * 5 * 1024 * 1024)   # 5 MiB chunks: runs of 2 MiB
>>> big.mac, big.iterations, big.slice_bytes(), big.slice_bytes(last=True)
(1, 3, 2097152, 1048576)
"""

from __future__ import annotations

from dataclasses import dataclass

from collc.limits import LIMITS, LL128_BUFF, LL_BUFF, NCCL_STEPS, SIMPLE_BUFF, Dialect
from collc.compiler.msccl.program import Proto

@dataclass(frozen=True)
class SizeModel:
    """How the runtime slices at one message size.

    ``mac`` is maxAllowedCount (chunks per piece).  A connection has ``slots`` slots
    (NCCL_STEPS = 8); a piece takes ``piece_slots`` of them: 1 for LL and LL128; for
    Simple 4 (two 2-step slices), or 2 when the piece is no larger than the minimum
    slice (1/32 of a slice, 32 KiB), since NCCL's Simple primitives then send it as one
    slice [ours, from prims_simple].  ``nbytes`` None is the unbounded worst case.

    ``loop_bytes`` is the executor's ``chunkSize`` in bytes (``mscclRunInterpreter``: one
    step's bytes, times ``MSCCL_CHUNKSTEPS`` = 4 at Simple; the data bytes of a step at LL
    and LL128, as ``mscclSetupCount``'s ``chunkEffectiveSize``): the kernel's ``gridOffset``
    loop runs every tb's whole program ``iterations`` times, each time on the next
    ``loop_bytes`` of every chunk (the last on what is left), so a piece carries at most
    ``mac x loop_bytes`` bytes.
    """

    nbytes: int | None
    mac: int
    slots: int
    chunk_bytes: int | None
    simple: bool
    loop_bytes: int | None = None

    @property
    def iterations(self) -> int:
        """Runs of the program: ``ceil(chunk_bytes / loop_bytes)`` (``mscclSetupProxy``'s nLoops)."""
        if self.chunk_bytes is None or self.loop_bytes is None:
            return 1
        return -(-self.chunk_bytes // self.loop_bytes)

    def slice_bytes(self, last: bool = False) -> int | None:
        """Bytes of each chunk one run moves: ``loop_bytes``, or in the ``last`` run what is
        left of the chunk (all of it when there is one run)."""
        if self.chunk_bytes is None or self.loop_bytes is None:
            return self.chunk_bytes
        if last:
            return self.chunk_bytes - (self.iterations - 1) * self.loop_bytes
        return min(self.chunk_bytes, self.loop_bytes)

    def piece_slots(self, chunks: int, last: bool = False) -> int:
        """Slots a piece of ``chunks`` chunks takes (in the ``last`` run when ``last``)."""
        if not self.simple:
            return 1
        per_chunk = self.slice_bytes(last)
        if per_chunk is not None and chunks * per_chunk <= SIMPLE_BUFF // NCCL_STEPS * 2 // 32:
            return 2
        return 4

    @property
    def pieces(self) -> int:
        """Pieces of the largest kind a connection holds."""
        return self.slots // self.piece_slots(self.mac)

    def send_slots(self, cnt: int) -> int:
        """Slots a step of ``cnt`` chunks fills on its connection when none is drained: full
        pieces of ``mac`` chunks, then the smaller last one (as the executor counts them)."""
        full, last = divmod(cnt, self.mac)
        return full * self.piece_slots(self.mac) + (self.piece_slots(last) if last else 0)

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
    return SizeModel(nbytes, min(71, max(1, eff // chunk)), NCCL_STEPS, chunk, simple, eff)


def buffering_model(pieces: int) -> SizeModel:
    """A hypothetical runtime whose connections hold ``pieces`` one-chunk pieces."""
    return SizeModel(None, 1, pieces, None, False)


def window_top(dialect: Dialect, max_bytes: int | None) -> int | None:
    """The largest message size a file's window admits, where the check runs (the tightest
    slicing): ``maxBytes``, or for the legacy runtime just below its default 128 MB bound;
    None (any size) for ``maxBytes="0"``."""
    if max_bytes:
        return max_bytes
    if dialect is Dialect.LEGACY:
        return LIMITS[dialect].legacy_default_max_bytes - 1
    return None
