"""The lowered Program: gpus -> threadblocks -> steps, the exact model of an MSCCL XML
(and :class:`ParsedFile`, a Program as a reader found it, with what it noticed).

Integers keep the XML's meaning: ``depid``/``deps`` of -1 mean "no dependency"
and offsets of -1 appear on ``nop`` steps, exactly as the runtimes read them.
The reader builds this model from any XML file; the lowering passes build it
from a Schedule; the writer prints it; the checker simulates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from collc.ir.collective import CollKind
from collc.ir.records import fast_init


class StepType(str, Enum):
    SEND = "s"
    RECV = "r"
    RECV_COPY_SEND = "rcs"
    RECV_REDUCE_SEND = "rrs"
    RECV_REDUCE_COPY = "rrc"
    RECV_REDUCE_COPY_SEND = "rrcs"
    COPY = "cpy"
    REDUCE = "re"
    NOP = "nop"

    # Membership in module-level sets: these are on the checker's hot path.
    @property
    def sends(self) -> bool:
        return self in SENDS

    @property
    def receives(self) -> bool:
        return self in RECVS

    @property
    def reduces(self) -> bool:
        return self in REDUCES

    @property
    def reads_src(self) -> bool:
        """True where the step reads its local ``src`` operand."""
        return self in READS_SRC

    @property
    def writes_dst(self) -> bool:
        return self in WRITES_DST


SENDS = frozenset({StepType.SEND, StepType.RECV_COPY_SEND, StepType.RECV_REDUCE_SEND,
                   StepType.RECV_REDUCE_COPY_SEND})
RECVS = frozenset({StepType.RECV, StepType.RECV_COPY_SEND, StepType.RECV_REDUCE_SEND,
                   StepType.RECV_REDUCE_COPY, StepType.RECV_REDUCE_COPY_SEND})
REDUCES = frozenset({StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY, StepType.RECV_REDUCE_COPY_SEND,
                     StepType.REDUCE})
READS_SRC = frozenset({StepType.SEND, StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY,
                       StepType.RECV_REDUCE_COPY_SEND, StepType.COPY, StepType.REDUCE})
WRITES_DST = frozenset({StepType.RECV, StepType.RECV_COPY_SEND, StepType.RECV_REDUCE_COPY,
                        StepType.RECV_REDUCE_COPY_SEND, StepType.COPY, StepType.REDUCE})


class Proto(str, Enum):
    SIMPLE = "Simple"
    LL = "LL"
    LL128 = "LL128"


@fast_init
@dataclass(frozen=True, slots=True)
class Step:
    s: int
    type: StepType
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int = -1
    deps: int = -1
    hasdep: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class Threadblock:
    id: int
    send: int
    recv: int
    chan: int
    steps: tuple[Step, ...]


@fast_init
@dataclass(frozen=True, slots=True)
class Gpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[Threadblock, ...]


@dataclass(frozen=True)
class Program:
    """One ``<algo>``.  ``gpus`` may hold a subset of ranks (a per-rank shard)."""

    name: str
    proto: Proto
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: int
    outofplace: int | None
    min_bytes: int | None
    max_bytes: int | None
    gpus: tuple[Gpu, ...]
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> CollKind:
        return CollKind.parse(self.coll)

    def gpu(self, rank: int) -> Gpu:
        for g in self.gpus:
            if g.id == rank:
                return g
        raise KeyError(rank)


@dataclass(frozen=True)
class Diagnostic:
    """A problem found while reading a file; ``where`` is a line or element path."""

    where: str
    message: str
    kind: str = "error"  # "error" or "warning"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class ParsedFile:
    path: str
    program: Program
    attrs: dict[str, str]          # the <algo> attributes as written
    diagnostics: tuple[Diagnostic, ...]
    missing: tuple[tuple[str, str], ...]  # (element path, attribute) absent from the file
