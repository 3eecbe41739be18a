"""The lowered one-sided model: an MSCCL++ execution plan (JSON schema of MSCCL++ v0.8 and later).

A :class:`Plan` holds exactly what the MSCCL++ executor reads from a plan file: a header, and per GPU
its chunk counts, its channels (memory and port channels with the peer of each channel index; switch
channels with their rank groups), the peers' buffers it may access (``remote_buffers``), its
semaphores, and its threadblocks, each with tb-local channel and remote-buffer references and an
ordered list of ops.  Enum values are the exact spellings of the JSON; a key absent from the file is
``None`` here (the executor treats some absent keys differently from empty lists).  The plan reader
and printer live in :mod:`collc.backends.mscclpp`; the checker in :mod:`collc.check`.  The runtime
semantics are described in ``docs/mscclpp.md``.

>>> op = Op(OpName.SIGNAL, channel_ids=(0,), channel_type=ChannelType.MEMORY)
>>> op.name.value, op.channel_ids
('signal', (0,))
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union

from collc.errors import EmitError


class PlanError(EmitError):
    """A plan breaks the schema (a field of the wrong kind, a required key missing, an invariant)."""


class Protocol(str, Enum):
    SIMPLE = "Simple"
    LL = "LL"


class ChannelType(str, Enum):
    MEMORY = "memory"
    PORT = "port"
    SWITCH = "switch"
    NONE = "none"


class BufferType(str, Enum):
    INPUT = "i"
    OUTPUT = "o"
    SCRATCH = "s"


class ReduceOp(str, Enum):
    SUM = "sum"


class OpName(str, Enum):
    """Every op name the v0.10 plan reader knows (``getOpType`` of the executor)."""
    NOP = "nop"
    BARRIER = "barrier"
    PUT = "put"
    PUT_WITH_SIGNAL = "pws"
    PUT_WITH_SIGNAL_AND_FLUSH = "pwsf"
    GET = "get"
    COPY = "copy"
    SIGNAL = "signal"
    WAIT = "wait"
    FLUSH = "flush"
    REDUCE = "re"
    REDUCE_SEND = "res"
    READ_REDUCE = "rre"
    READ_REDUCE_SEND = "rres"
    PUT_PACKETS = "ppkt"
    READ_PUT_PACKETS = "rppkt"
    REDUCE_SEND_PACKETS = "respkt"
    COPY_PACKETS = "cpkt"
    UNPACK_PACKETS = "upkt"
    REDUCE_PACKETS = "repkt"
    REDUCE_COPY_PACKETS = "recpkt"
    REDUCE_COPY_SEND_PACKETS = "recspkt"
    MULTI_LOAD_REDUCE_STORE = "glres"
    MULTI_STORE = "gstore"
    RELAXED_SIGNAL = "rlxsignal"
    RELAXED_WAIT = "rlxwait"
    PIPELINE = "pipeline"
    SEM_ACQUIRE = "sem_acquire"
    SEM_RELEASE = "sem_release"


def _nonneg(what: str, *values: int) -> None:
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise PlanError(f"{what}: expected a non-negative integer, got {v!r}")


@dataclass(frozen=True, slots=True)
class LocalBuff:
    """``{"type", "index", "size"}``: chunks ``index .. index+size-1`` of the GPU's own buffer."""
    type: BufferType
    index: int
    size: int

    def __post_init__(self) -> None:
        _nonneg("buffer reference", self.index, self.size)


@dataclass(frozen=True, slots=True)
class RemoteBuff:
    """``{"buffer_id", "index", "size"}``: a peer's buffer, through the tb's remote-buffer references."""
    buffer_id: int
    index: int
    size: int

    def __post_init__(self) -> None:
        _nonneg("remote buffer reference", self.buffer_id, self.index, self.size)


@dataclass(frozen=True, slots=True)
class SwitchBuff:
    """``{"switch_channel_id", "index", "size"}``: the multicast buffer of a tb's switch channel."""
    switch_channel_id: int
    index: int
    size: int

    def __post_init__(self) -> None:
        _nonneg("switch buffer reference", self.switch_channel_id, self.index, self.size)


Buff = Union[LocalBuff, RemoteBuff, SwitchBuff]


@dataclass(frozen=True, slots=True)
class TbgInfo:
    """A thread-block group: this tb handles slice ``tb_id`` of ``tbg_size`` of every buffer range."""
    tb_id: int
    tbg_size: int

    def __post_init__(self) -> None:
        _nonneg("tbg_info", self.tb_id, self.tbg_size)
        if self.tbg_size == 0 or self.tb_id >= self.tbg_size:
            raise PlanError(f"tbg_info: tb_id {self.tb_id} outside a group of {self.tbg_size}")


@dataclass(frozen=True, slots=True)
class IterContext:
    """A pipeline's iteration: ``num_chunks`` chunks processed ``unit_size`` bytes at a time."""
    unit_size: int
    num_chunks: int

    def __post_init__(self) -> None:
        _nonneg("iter_context", self.unit_size, self.num_chunks)
        if self.unit_size == 0:
            raise PlanError("iter_context: unit_size must be positive")


@dataclass(frozen=True, slots=True)
class Op:
    """One op of a threadblock; ``None`` marks a key the file does not have."""
    name: OpName
    src_buff: tuple[Buff, ...] | None = None
    dst_buff: tuple[Buff, ...] | None = None
    channel_ids: tuple[int, ...] | None = None
    channel_type: ChannelType | None = None
    reduce_op: ReduceOp | None = None
    tbg_info: TbgInfo | None = None
    barrier_id: int | None = None
    num_threadblocks: int | None = None
    semaphore_ids: tuple[int, ...] | None = None
    iter_context: IterContext | None = None
    ops: tuple[Op, ...] | None = None

    def __post_init__(self) -> None:
        where = f"op {self.name.value}"
        for ids in (self.channel_ids, self.semaphore_ids):
            if ids is not None:
                _nonneg(where, *ids)
        for v in (self.barrier_id, self.num_threadblocks):
            if v is not None:
                _nonneg(where, v)
        if (self.name is OpName.PIPELINE) != (self.iter_context is not None and self.ops is not None):
            raise PlanError(f"{where}: a pipeline op and only a pipeline op has iter_context and ops")
        if self.ops is not None and any(o.name is OpName.PIPELINE for o in self.ops):
            raise PlanError(f"{where}: pipelines do not nest")

    @property
    def srcs(self) -> tuple[Buff, ...]:
        return self.src_buff or ()

    @property
    def dsts(self) -> tuple[Buff, ...]:
        return self.dst_buff or ()

    @property
    def channels(self) -> tuple[int, ...]:
        return self.channel_ids or ()


@dataclass(frozen=True, slots=True)
class RankGroup:
    size: int
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        _nonneg("rank group", self.size, *self.ranks)


@dataclass(frozen=True, slots=True)
class Channel:
    """A GPU-level memory or port channel list: the k-th entry of ``connected_to`` is channel k's peer."""
    channel_type: ChannelType
    connected_to: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.channel_type not in (ChannelType.MEMORY, ChannelType.PORT):
            raise PlanError(f"a channel with connected_to must be memory or port, not {self.channel_type.value}")
        _nonneg("connected_to", *self.connected_to)


@dataclass(frozen=True, slots=True)
class SwitchChannel:
    """A GPU-level switch (NVLS multicast) channel over ``buffer_type``; one entry per rank group."""
    buffer_type: BufferType
    rank_groups: tuple[RankGroup, ...]
    channel_type: ChannelType = ChannelType.SWITCH

    def __post_init__(self) -> None:
        if self.channel_type is not ChannelType.SWITCH:
            raise PlanError("a switch channel must have channel_type switch")


AnyChannel = Union[Channel, SwitchChannel]


@dataclass(frozen=True, slots=True)
class RemoteBuffer:
    """A buffer of GPU ``rank`` that this GPU accesses through channels of the listed types."""
    rank: int
    type: BufferType
    access_channel_types: tuple[ChannelType, ...]

    def __post_init__(self) -> None:
        _nonneg("remote buffer rank", self.rank)


@dataclass(frozen=True, slots=True)
class Semaphore:
    init_value: int

    def __post_init__(self) -> None:
        _nonneg("semaphore init_value", self.init_value)


@dataclass(frozen=True, slots=True)
class TbChannels:
    """A tb's channels of one type: ids into the GPU's channels of that type (concatenated)."""
    channel_type: ChannelType
    channel_ids: tuple[int, ...]
    buff: BufferType | None = None

    def __post_init__(self) -> None:
        _nonneg("threadblock channel id", *self.channel_ids)


@dataclass(frozen=True, slots=True)
class TbRemoteBuffers:
    """A tb's remote buffers reached through one channel type: ids into the GPU's ``remote_buffers``."""
    access_channel_type: ChannelType
    remote_buffer_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        _nonneg("remote buffer id", *self.remote_buffer_ids)


@dataclass(frozen=True, slots=True)
class Threadblock:
    id: int
    ops: tuple[Op, ...]
    channels: tuple[TbChannels, ...]
    remote_buffer_refs: tuple[TbRemoteBuffers, ...] | None = None

    def __post_init__(self) -> None:
        _nonneg("threadblock id", self.id)

    def channel_list(self, kind: ChannelType) -> tuple[int, ...]:
        """The tb-local channel index -> GPU-level channel index of ``kind`` (per-type concatenation)."""
        return tuple(i for c in self.channels if c.channel_type is kind for i in c.channel_ids)

    def buffer_list(self, kind: ChannelType) -> tuple[int, ...]:
        """The tb-local remote-buffer index -> the GPU's ``remote_buffers`` index, for accesses over ``kind``."""
        return tuple(i for r in (self.remote_buffer_refs or ()) if r.access_channel_type is kind
                     for i in r.remote_buffer_ids)

    def flat_ops(self) -> tuple[Op, ...]:
        """The ops as the executor stores them: a pipeline op followed by its inner ops."""
        out: list[Op] = []
        for op in self.ops:
            out.append(op)
            out.extend(op.ops or ())
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Gpu:
    id: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    threadblocks: tuple[Threadblock, ...]
    channels: tuple[AnyChannel, ...]
    remote_buffers: tuple[RemoteBuffer, ...]
    semaphores: tuple[Semaphore, ...] = ()

    def __post_init__(self) -> None:
        _nonneg(f"gpu {self.id}", self.id, self.input_chunks, self.output_chunks, self.scratch_chunks)

    def peers(self, kind: ChannelType) -> tuple[int, ...]:
        """GPU-level channel index of ``kind`` -> peer rank (the per-type concatenation of connected_to)."""
        return tuple(p for c in self.channels if isinstance(c, Channel) and c.channel_type is kind
                     for p in c.connected_to)

    def switch_groups(self) -> tuple[tuple[BufferType, RankGroup], ...]:
        """GPU-level switch channel index -> (buffer type, rank group), one per rank group."""
        return tuple((c.buffer_type, g) for c in self.channels if isinstance(c, SwitchChannel)
                     for g in c.rank_groups)


MAX_MESSAGE_SIZE = 2 ** 64 - 1


@dataclass(frozen=True, slots=True)
class Plan:
    """A whole execution plan; the header fields the reader defaults are stored with their effective value."""
    name: str
    collective: str
    protocol: Protocol
    inplace: bool
    gpus: tuple[Gpu, ...]
    reuse_resources: bool = False
    num_threads_per_block: int = 1024
    use_double_scratch_buffer: bool = False
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = MAX_MESSAGE_SIZE

    def __post_init__(self) -> None:
        _nonneg("plan header", self.num_threads_per_block, self.buffer_alignment, self.min_message_size,
                self.max_message_size)
        if self.buffer_alignment == 0:
            raise PlanError("buffer_alignment must be positive")
        if self.min_message_size > self.max_message_size:
            raise PlanError(f"min_message_size {self.min_message_size} > max_message_size {self.max_message_size}")
        if self.max_message_size > MAX_MESSAGE_SIZE:
            raise PlanError("max_message_size does not fit in 64 bits")

    @property
    def nranks(self) -> int:
        return len(self.gpus)

    def divides(self, size: int) -> bool:
        """Whether the executor can split a call of ``size`` bytes (nccl-tests' size: the gathered
        total for allgather) into this plan's input chunks: each must be a multiple of
        ``buffer_alignment`` bytes (docs/mscclpp-backend.md)."""
        in_bytes = size // self.nranks if self.collective == "allgather" else size
        return in_bytes % (self.buffer_alignment * self.gpus[0].input_chunks) == 0

    def runs_at(self, size: int) -> bool:
        """Whether the executor takes this plan for a call of ``size`` bytes: its window and :meth:`divides`."""
        return self.min_message_size <= size <= self.max_message_size and self.divides(size)
