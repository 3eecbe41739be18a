"""Collectives and their MSCCL buffer layouts.

A collective over ``nranks`` ranks with chunk factor ``c`` cuts the buffers into
chunks exactly as the MSCCL runtimes do (docs/runtime-model.md;
``nchunksperloop`` and ``sizeMultiplier``):

==============  ==========  ===========  ==============  ==============================
collective      i chunks    o chunks     nchunksperloop  postcondition (rank r, chunk k)
==============  ==========  ===========  ==============  ==============================
allreduce       c           c            c               o[r][k] = sum_q i[q][k]
allgather       c           N*c          N*c             o[r][q*c+k] = i[q][k]
reducescatter   N*c         c            N*c             o[r][k] = sum_q i[q][r*c+k]
alltoall        N*c         N*c          N*c             o[r][q*c+k] = i[q][r*c+k]
broadcast       c           c            c               o[r][k] = i[root][k]
reduce          c           c            c               o[root][k] = sum_q i[q][k]
==============  ==========  ===========  ==============  ==============================

In-place calls alias the buffers the way the runtime tests placement
(docs/runtime-model.md): allreduce, alltoall, broadcast and reduce use one buffer
(``o`` is ``i``); allgather's input is the slice ``o[r*c : (r+1)*c]`` of the output;
reducescatter's output is the slice ``i[r*c : (r+1)*c]`` of the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from collc.errors import ScheduleError, did_you_mean


class CollKind(str, Enum):
    """Collective kinds; values are the executor dialect's ``coll`` spellings."""

    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    ALLTOALL = "alltoall"
    BROADCAST = "broadcast"
    REDUCE = "reduce"

    @classmethod
    def parse(cls, text: str) -> CollKind:
        """Accept the executor spelling, the legacy ``reduce_scatter`` and dashes."""
        key = text.strip().lower().replace("-", "").replace("_", "")
        for kind in cls:
            if kind.value == key:
                return kind
        hint = did_you_mean(key, [k.value for k in cls], "collc list collectives")
        raise ScheduleError(f"unknown collective {text!r}; {hint}")

    @property
    def reduces(self) -> bool:
        return self in (CollKind.ALLREDUCE, CollKind.REDUCESCATTER, CollKind.REDUCE)

    @property
    def rooted(self) -> bool:
        return self in (CollKind.BROADCAST, CollKind.REDUCE)

    @property
    def size_multiplier_is_n(self) -> bool:
        """True where the runtime multiplies ``count`` by ``ngpus`` (sizeMultiplier)."""
        return self in (CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLTOALL)


class Buffer(str, Enum):
    """Logical buffers; values are the XML spellings."""

    INPUT = "i"
    OUTPUT = "o"
    SCRATCH = "s"


# A slot value is a set of contributions (origin rank, origin input chunk).
Contribution = tuple[int, int]


@dataclass(frozen=True)
class Collective:
    """A collective call shape: kind, ranks, chunk factor, placement and root."""

    kind: CollKind
    nranks: int
    chunk_factor: int = 1
    inplace: bool = False
    root: int | None = None

    def __post_init__(self) -> None:
        if self.nranks < 1:
            raise ScheduleError(f"a collective needs at least one rank, got {self.nranks}")
        if self.chunk_factor < 1:
            raise ScheduleError(f"chunk factor must be >= 1, got {self.chunk_factor}")
        if self.kind.rooted:
            if self.root is None or not 0 <= self.root < self.nranks:
                raise ScheduleError(f"{self.kind.value} needs a root in 0..{self.nranks - 1}, got {self.root}")
        elif self.root is not None:
            raise ScheduleError(f"{self.kind.value} takes no root")

    # ---- layout -------------------------------------------------------------
    @property
    def input_chunks(self) -> int:
        if self.kind in (CollKind.REDUCESCATTER, CollKind.ALLTOALL):
            return self.nranks * self.chunk_factor
        return self.chunk_factor

    @property
    def output_chunks(self) -> int:
        if self.kind in (CollKind.ALLGATHER, CollKind.ALLTOALL):
            return self.nranks * self.chunk_factor
        return self.chunk_factor

    @property
    def nchunksperloop(self) -> int:
        return max(self.input_chunks, self.output_chunks)

    def buffer_size(self, buf: Buffer) -> int:
        if buf is Buffer.INPUT:
            return self.input_chunks
        if buf is Buffer.OUTPUT:
            return self.output_chunks
        raise ScheduleError("the scratch buffer has no fixed size")

    def alias(self, rank: int, buf: Buffer) -> tuple[Buffer, int]:
        """Where logical buffer ``buf`` of ``rank`` lives: (physical buffer, chunk offset).

        Out-of-place, every buffer is its own.  In place, the aliased buffer is
        folded into the one the runtime really allocates.
        """
        if not self.inplace or buf is Buffer.SCRATCH:
            return buf, 0
        c = self.chunk_factor
        if self.kind is CollKind.ALLGATHER:
            return (Buffer.OUTPUT, rank * c) if buf is Buffer.INPUT else (buf, 0)
        if self.kind is CollKind.REDUCESCATTER:
            return (Buffer.INPUT, rank * c) if buf is Buffer.OUTPUT else (buf, 0)
        return Buffer.INPUT, 0

    def physical(self, rank: int, buf: Buffer, index: int) -> tuple[Buffer, int]:
        """Map a logical slot to the slot that holds it under this placement."""
        b, base = self.alias(rank, buf)
        return b, base + index

    # ---- pre- and postcondition --------------------------------------------
    def initial(self, rank: int, index: int) -> Contribution:
        """The contribution held by input chunk ``index`` of ``rank`` at the start."""
        return (rank, index)

    def expected(self, rank: int) -> list[tuple[int, int, range | tuple[int, ...]]]:
        """Obligations of ``rank``: (output index, origin input chunk, origin ranks).

        Output chunk ``index`` of ``rank`` must hold the sum over the origin ranks of
        their input chunk ``origin``.  Ranks with no obligation (non-roots of reduce)
        get an empty list.  Compact on purpose: 1024 ranks x 1024 chunks stays cheap.
        """
        n, c = self.nranks, self.chunk_factor
        k = self.kind
        everyone = range(n)
        if k is CollKind.ALLREDUCE:
            return [(i, i, everyone) for i in range(c)]
        if k is CollKind.ALLGATHER:
            return [(q * c + i, i, (q,)) for q in range(n) for i in range(c)]
        if k is CollKind.REDUCESCATTER:
            return [(i, rank * c + i, everyone) for i in range(c)]
        if k is CollKind.ALLTOALL:
            return [(q * c + i, rank * c + i, (q,)) for q in range(n) for i in range(c)]
        assert self.root is not None  # checked in __post_init__
        if k is CollKind.BROADCAST:
            return [(i, i, (self.root,)) for i in range(c)]
        if rank != self.root:
            return []
        return [(i, i, everyone) for i in range(c)]

    def obligations_class(self, rank: int) -> int:
        """Ranks of one class have equal ``expected`` lists (a rank's own only where its
        obligations name it), so a checker can build and compare each list once."""
        if self.kind in (CollKind.REDUCESCATTER, CollKind.ALLTOALL):
            return rank
        if self.kind is CollKind.REDUCE:
            return -1 if rank == self.root else -2
        return -1

    def verdict_key(self, rank: int, row: list[int | None], base: int) -> tuple[int, list[int | None]]:
        """What ``rank``'s postcondition verdict depends on, given the physical row holding its
        output from ``base``: its obligations' class and the values at the outputs they
        constrain.  Ranks with equal keys get equal verdicts, so a checker judges one of them."""
        outs = self.obligated_outputs(rank)
        return self.obligations_class(rank), row[base + outs.start:base + outs.stop]

    def obligated_outputs(self, rank: int) -> range:
        """The output indices ``expected(rank)`` constrains, without listing them: all of
        them, or none on the non-roots of reduce."""
        if self.kind is CollKind.REDUCE and rank != self.root:
            return range(0)
        return range(self.output_chunks)

    def contributions(self, rank: int) -> dict[int, frozenset[Contribution]]:
        """The same obligations as explicit contribution sets (small collectives only)."""
        return {idx: frozenset((q, origin) for q in ranks) for idx, origin, ranks in self.expected(rank)}

    def describe(self) -> str:
        place = "in-place" if self.inplace else "out-of-place"
        root = f", root {self.root}" if self.root is not None else ""
        return f"{self.kind.value} on {self.nranks} ranks, chunk factor {self.chunk_factor}, {place}{root}"
