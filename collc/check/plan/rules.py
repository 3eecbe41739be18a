"""Static rules of an MSCCL++ execution plan: what the executor's plan reader and device structures accept.

Each rule names the limit or the reader behaviour it enforces (docs/mscclpp.md, "Static rules").  The
executor checks only the op count; the other limits are array sizes of its device-side plan, which an
overflowing plan silently corrupts, so collc enforces them all.

>>> MAX_OPS_PER_TB, MAX_CHANNELS_PER_TB, MAX_CHANNELS_PER_OP, MAX_BUFFS_PER_OP
(64, 16, 8, 10)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collc.check.plan.report import PlanReport
from collc.check.plan.releases import LATEST, SCRATCH_LIMIT, Release
from collc.compiler.mscclpp.plan import (BufferType, Channel, ChannelType, Gpu, LocalBuff, Op, OpName, Plan, Protocol,
                                 RemoteBuff, SwitchBuff, Threadblock)

MAX_OPS_PER_TB = 64            # MAX_OPERATION (checked by the executor, after pipelines are flattened)
MAX_CHANNELS_PER_TB = 16       # MAX_CHANNEL: device handles per type per threadblock, also remote buffers
MAX_CHANNELS_PER_OP = 8        # MAX_CHANNEL_PER_OPERATION
MAX_BUFFS_PER_OP = 10          # MAX_LOCAL_BUFFER_PER_OPERATION (2) + MAX_CHANNEL_PER_OPERATION (8), v0.10
MAX_BUFFS_PER_OP_BEFORE = 8    # MAX_CHANNEL_PER_OPERATION alone: the src/dst arrays of earlier v0.8+ sources
MAX_SEMAPHORES_PER_OP = 16     # MAX_DEVICE_SEMAPHORES
MAX_BARRIERS = 16              # MAX_DEVICE_SYNCERS
MAX_PIPELINE_ITERATIONS = 2 ** 16 - 1   # the kernel's loop counter is a uint16_t
OFFSET_LIMIT = 2 ** 32         # offsets and sizes are uint32_t in the device plan

PACKET_OPS = frozenset({OpName.PUT_PACKETS, OpName.READ_PUT_PACKETS, OpName.REDUCE_SEND_PACKETS,
                        OpName.COPY_PACKETS, OpName.UNPACK_PACKETS, OpName.REDUCE_PACKETS,
                        OpName.REDUCE_COPY_PACKETS, OpName.REDUCE_COPY_SEND_PACKETS})
PUTS = frozenset({OpName.PUT, OpName.PUT_WITH_SIGNAL, OpName.PUT_WITH_SIGNAL_AND_FLUSH})
SIGNALS = frozenset({OpName.SIGNAL, OpName.RELAXED_SIGNAL})
WAITS = frozenset({OpName.WAIT, OpName.RELAXED_WAIT})
INT4_OPS = frozenset({OpName.REDUCE, OpName.REDUCE_SEND, OpName.READ_REDUCE, OpName.READ_REDUCE_SEND,
                      OpName.MULTI_LOAD_REDUCE_STORE})
# Ops whose handler sizes every src/dst entry pair by itself (execution_kernel.hpp: handlePut reads
# outputBufferSizes[i], handlePutPackets and handleGet inputBufferSizes[i]); all others use entry 0's size.
PER_ENTRY_SIZES = PUTS | {OpName.PUT_PACKETS, OpName.GET}
# Ops whose src/dst lists hold remote references after a first local one.
FIRST_LOCAL = frozenset({OpName.REDUCE_SEND, OpName.READ_REDUCE, OpName.READ_REDUCE_SEND, OpName.REDUCE,
                         OpName.REDUCE_SEND_PACKETS, OpName.REDUCE_PACKETS})
# Collective -> output chunks per input chunk, in units of the number of ranks (None: equal sizes).
SIZE_RATIO = {"allgather": (1, "n"), "reducescatter": ("n", 1)}


def where(gpu: int, tb: int, op: str) -> str:
    return f"gpu {gpu} tb {tb} op {op}"


@dataclass(frozen=True)
class ChannelEnd:
    """One GPU-level memory or port channel: its peer, its connection tag, and its partner on the peer."""
    gpu: int
    kind: ChannelType
    index: int
    peer: int
    tag: int


def channel_ends(plan: Plan) -> dict[tuple[int, ChannelType, int], ChannelEnd]:
    """Every real channel, keyed by (gpu, type, index); tags numbered per peer as the executor connects.

    The executor opens one connection per channel entry, memory channels first and then port channels,
    each followed by the "unpaired" connections it adds where the peer has more channels to this GPU
    than this GPU has to the peer; the n-th connection between two GPUs (counted per peer) meets the
    n-th on the other side.
    """
    counts: dict[tuple[int, ChannelType, int], int] = {}
    back: dict[tuple[int, ChannelType], set[int]] = {}
    for g in plan.gpus:
        for kind in (ChannelType.MEMORY, ChannelType.PORT):
            for p in g.peers(kind):
                counts[(g.id, kind, p)] = counts.get((g.id, kind, p), 0) + 1
                back.setdefault((p, kind), set()).add(g.id)
    ends: dict[tuple[int, ChannelType, int], ChannelEnd] = {}
    for g in plan.gpus:
        tags: dict[int, int] = {}
        for kind in (ChannelType.MEMORY, ChannelType.PORT):
            for k, p in enumerate(g.peers(kind)):
                ends[(g.id, kind, k)] = ChannelEnd(g.id, kind, k, p, tags.get(p, 0))
                tags[p] = tags.get(p, 0) + 1
            for p in sorted(back.get((g.id, kind), ())):     # the peers with channels to g (not all n ranks)
                extra = counts.get((p, kind, g.id), 0) - counts.get((g.id, kind, p), 0)
                if p != g.id and extra > 0:
                    tags[p] = tags.get(p, 0) + extra
    return ends


def partner(ends: dict[tuple[int, ChannelType, int], ChannelEnd], end: ChannelEnd) -> ChannelEnd | None:
    for other in ends.values():
        if other.gpu == end.peer and other.peer == end.gpu and other.tag == end.tag:
            return other
    return None


def partners(plan: Plan) -> dict[tuple[int, ChannelType, int], ChannelEnd | None]:
    ends = channel_ends(plan)
    index = {(e.gpu, e.peer, e.tag): e for e in ends.values()}
    return {key: index.get((e.peer, e.gpu, e.tag)) for key, e in ends.items()}


def size_step(plan: Plan) -> int | None:
    """Every accepted message size is a multiple of this (the size the window is on: output for allgather).

    The executor accepts a call when both buffer sizes are whole ``buffer_alignment`` units and those
    units divide evenly into the buffer's chunks.
    """
    g = plan.gpus[0]
    ci, co, a, n = g.input_chunks, g.output_chunks, plan.buffer_alignment, plan.nranks
    if ci == 0 or co == 0:
        return None
    if plan.collective == "allgather":           # size = output; input = size / n
        return math.lcm(a * co, n * a * ci)
    if plan.collective == "reducescatter":       # size = input; output = size / n
        return math.lcm(a * ci, n * a * co)
    return math.lcm(a * ci, a * co)


def size_window(plan: Plan) -> tuple[int, int] | None:
    """The smallest and largest message size in the plan's window that the size check accepts."""
    step = size_step(plan)
    if step is None:
        return None
    first = -(-max(plan.min_message_size, 1) // step) * step
    last = plan.max_message_size // step * step
    return (first, last) if first <= last else None


def check_rules(plan: Plan, rep: PlanReport, release: Release = LATEST) -> None:
    """Append every static finding to ``rep``, for the executor of ``release``."""
    n = plan.nranks
    if n == 0:
        rep.add("plan-empty", "the plan has no GPUs")
        return
    for pos, g in enumerate(plan.gpus):
        if g.id != pos:
            rep.add("gpu-id", f"gpus[{pos}] has id {g.id}: the reader takes gpus[rank] and refuses a mismatch")
    if any(g.id != pos for pos, g in enumerate(plan.gpus)):
        return
    _check_header(plan, rep)
    _check_release(plan, rep, release)
    ends = sorted(partners(plan).items(), key=lambda kv: (kv[0][0], kv[0][1].value, kv[0][2]))
    by_gpu: dict[int, list[tuple[tuple[int, ChannelType, int], ChannelEnd | None]]] = {}
    for key, other in ends:
        by_gpu.setdefault(key[0], []).append((key, other))
    for g in plan.gpus:
        _check_gpu(plan, g, rep)
        peers = {kind: g.peers(kind) for kind in (ChannelType.MEMORY, ChannelType.PORT)}
        for (gid, kind, k), other in by_gpu.get(g.id, ()):
            peer = peers[kind][k]
            if other is None:
                rep.add("channel-pairing", f"gpu {g.id} {kind.value} channel {k} to gpu {peer} has no partner: "
                        f"gpu {peer} has fewer channels back, so its signals reach nobody and waits on it hang")
            elif other.kind is not kind:
                rep.add("channel-pairing", f"gpu {g.id} {kind.value} channel {k} to gpu {peer} meets gpu {peer}'s "
                        f"{other.kind.value} channel {other.index} (connections pair by order per peer)")
        have = {ChannelType.MEMORY: len(peers[ChannelType.MEMORY]), ChannelType.PORT: len(peers[ChannelType.PORT]),
                ChannelType.SWITCH: len(g.switch_groups())}     # once per GPU, not per threadblock
        for pos, tb in enumerate(g.threadblocks):
            _check_tb(plan, g, pos, tb, have, rep)


def _check_header(plan: Plan, rep: PlanReport) -> None:
    g0 = plan.gpus[0]
    for g in plan.gpus:
        if g.input_chunks == 0 or g.output_chunks == 0:
            rep.add("zero-chunks", f"gpu {g.id} has input_chunks {g.input_chunks} and output_chunks "
                    f"{g.output_chunks}: the executor's size check divides by both (a zero crashes it)")
        if (g.input_chunks, g.output_chunks) != (g0.input_chunks, g0.output_chunks):
            rep.add("chunk-counts", f"gpu {g.id} has {g.input_chunks}/{g.output_chunks} input/output chunks, "
                    f"gpu 0 {g0.input_chunks}/{g0.output_chunks}: the chunk size differs between GPUs")
    if any(g.input_chunks == 0 or g.output_chunks == 0 for g in plan.gpus):
        return
    n = plan.nranks
    ratio = {"allgather": n, "reducescatter": 1 / n, "alltoall": 1, "allreduce": 1}.get(plan.collective)
    for g in plan.gpus:
        if ratio is not None and g.output_chunks != g.input_chunks * ratio:
            rep.add("chunk-counts", f"gpu {g.id}: {plan.collective} on {n} ranks needs output_chunks = "
                    f"{ratio if ratio >= 1 else '1/' + str(n)} x input_chunks (the reader requires one chunk size "
                    f"for both buffers), got {g.input_chunks} and {g.output_chunks}")
    if plan.buffer_alignment % 16 != 0 and any(op.name in INT4_OPS for g in plan.gpus
                                               for tb in g.threadblocks for op in tb.flat_ops()):
        rep.add("alignment", f"buffer_alignment {plan.buffer_alignment} is not a multiple of 16: the reduce ops "
                "address memory in 16-byte vectors and truncate unaligned offsets")
    if size_window(plan) is None:
        a, ci = plan.buffer_alignment, g0.input_chunks
        rep.add("size-window", f"no message size in [{plan.min_message_size}, {plan.max_message_size}] divides "
                f"into {ci} input chunks of whole {a}-byte units: the executor refuses every call")
    if plan.max_message_size >= OFFSET_LIMIT:
        rep.add("size-window", f"max_message_size {plan.max_message_size} reaches 4 GiB: the device plan holds "
                "offsets and sizes in 32 bits, so calls of 4 GiB or more address the wrong memory", "warning")


def scratch_bytes(plan: Plan, input_bytes: int) -> int:
    """The scratch buffer the executor allocates for a call with ``input_bytes`` of input
    (``calScratchBufferSize``: a chunk per scratch chunk, twice under LL, twice again when double-buffered)."""
    g = plan.gpus[0]
    per_chunk = -(-input_bytes // max(g.input_chunks, 1))
    size = per_chunk * g.scratch_chunks * (2 if plan.protocol is Protocol.LL else 1) \
        * (2 if plan.use_double_scratch_buffer else 1)
    a = max(plan.buffer_alignment, 1)
    return -(-size // a) * a


def _check_release(plan: Plan, rep: PlanReport, release: Release) -> None:
    """What the plan reader and executor of ``release`` refuse that another release accepts."""
    if not release.knows_packet_copy:
        for g in plan.gpus:
            for tb in g.threadblocks:
                for i, op in enumerate(tb.flat_ops()):
                    if op.name in (OpName.REDUCE_COPY_PACKETS, OpName.REDUCE_COPY_SEND_PACKETS):
                        rep.add("unknown-op", f"{where(g.id, tb.id, f'{i} ({op.name.value})')}: the plan reader before "
                                "v0.9.0 does not know this op name ('Invalid operation type'): the plan does not load")
                        return
    window = size_window(plan)
    if not (release.scratch_limit and plan.reuse_resources and window is not None and plan.gpus[0].scratch_chunks):
        return
    n = plan.nranks

    def inp(size: int) -> int:        # the input bytes of a call of this message size
        return size // n if plan.collective == "allgather" else size
    first, last = window
    if scratch_bytes(plan, inp(first)) > SCRATCH_LIMIT:
        rep.add("scratch-limit", f"reuse_resources: even the smallest accepted size ({first} bytes) needs "
                f"{scratch_bytes(plan, inp(first))} bytes of scratch, above the {SCRATCH_LIMIT} shared scratch buffer "
                f"that the executor (v0.9.0 on) refuses to exceed (setupScratchBuffer): every call fails")
    elif scratch_bytes(plan, inp(last)) > SCRATCH_LIMIT:
        rep.add("scratch-limit", f"reuse_resources: calls near max_message_size {plan.max_message_size} need "
                f"{scratch_bytes(plan, inp(last))} bytes of scratch, above the {SCRATCH_LIMIT} shared scratch buffer: "
                "the executor (v0.9.0 on) refuses them (setupScratchBuffer)", "warning")


def _buffer_chunks(g: Gpu, t: BufferType) -> int:
    return {BufferType.INPUT: g.input_chunks, BufferType.OUTPUT: g.output_chunks,
            BufferType.SCRATCH: g.scratch_chunks}[t]


def _check_gpu(plan: Plan, g: Gpu, rep: PlanReport) -> None:
    n = plan.nranks
    for c in g.channels:
        if isinstance(c, Channel):
            for p in c.connected_to:
                if p == g.id or p >= n:
                    rep.add("channel-peer", f"gpu {g.id} has a {c.channel_type.value} channel to gpu {p} "
                            f"(ranks are 0..{n - 1}, not itself)")
        else:
            for grp in c.rank_groups:
                if g.id not in grp.ranks or any(r >= n for r in grp.ranks) or grp.size != len(grp.ranks):
                    rep.add("switch-group", f"gpu {g.id}: switch rank group {list(grp.ranks)} (size {grp.size}) "
                            "must list its own rank, ranks of the plan, and its size")
    for b, rb in enumerate(g.remote_buffers):
        if rb.rank == g.id or rb.rank >= n:
            rep.add("remote-buffer", f"gpu {g.id} remote_buffers[{b}] is on rank {rb.rank}")
        if not rb.access_channel_types or any(t not in (ChannelType.MEMORY, ChannelType.PORT)
                                              for t in rb.access_channel_types):
            rep.add("remote-buffer", f"gpu {g.id} remote_buffers[{b}] needs memory or port access types")
    if not g.threadblocks:
        rep.add("no-threadblocks", f"gpu {g.id} has no threadblocks", "warning")


def _check_tb(plan: Plan, g: Gpu, pos: int, tb: Threadblock, have: dict[ChannelType, int], rep: PlanReport) -> None:
    if tb.id != pos:
        rep.add("tb-id", f"gpu {g.id} threadblocks[{pos}] has id {tb.id}: the reader stores ops by position "
                "and channels by id")
        return
    flat = tb.flat_ops()
    if len(flat) > MAX_OPS_PER_TB:
        rep.add("op-limit", f"gpu {g.id} tb {tb.id} has {len(flat)} ops (pipelines count their inner ops): the "
                f"executor refuses more than {MAX_OPS_PER_TB} per threadblock")
    for kind in (ChannelType.MEMORY, ChannelType.PORT, ChannelType.SWITCH):
        ids = tb.channel_list(kind)
        if len(ids) > MAX_CHANNELS_PER_TB:
            rep.add("channel-limit", f"gpu {g.id} tb {tb.id} uses {len(ids)} {kind.value} channels: the device "
                    f"plan holds {MAX_CHANNELS_PER_TB} per type")
        avail = have[kind]
        for i in ids:
            if i >= avail:
                rep.add("index-range", f"gpu {g.id} tb {tb.id} names {kind.value} channel {i}; gpu {g.id} has "
                        f"{avail}")
    for c in tb.channels:
        if c.channel_type is ChannelType.NONE:
            rep.add("index-range", f"gpu {g.id} tb {tb.id} lists channels of type none")
    for kind in (ChannelType.MEMORY, ChannelType.PORT):
        bufs = tb.buffer_list(kind)
        if len(bufs) > MAX_CHANNELS_PER_TB:
            rep.add("buffer-limit", f"gpu {g.id} tb {tb.id} references {len(bufs)} remote buffers over "
                    f"{kind.value} channels: the device plan holds {MAX_CHANNELS_PER_TB} per type")
        for b in bufs:
            if b >= len(g.remote_buffers):
                rep.add("index-range", f"gpu {g.id} tb {tb.id} names remote buffer {b}; gpu {g.id} has "
                        f"{len(g.remote_buffers)}")
            elif kind not in g.remote_buffers[b].access_channel_types:
                rep.add("index-range", f"gpu {g.id} tb {tb.id} reaches remote buffer {b} over {kind.value} "
                        f"channels, which the buffer does not list in access_channel_types")
    for i, op in enumerate(tb.ops):
        _check_op(plan, g, tb, op, str(i), rep)
        for j, inner in enumerate(op.ops or ()):
            _check_op(plan, g, tb, inner, f"{i}.{j}", rep)


def remote_target(plan: Plan, g: Gpu, tb: Threadblock, kind: ChannelType | None, b: RemoteBuff
                  ) -> tuple[int, BufferType] | None:
    """The (rank, buffer type) a remote reference of an op on ``kind`` channels reaches, if it is valid."""
    if kind not in (ChannelType.MEMORY, ChannelType.PORT):
        return None
    bufs = tb.buffer_list(kind)
    if b.buffer_id >= len(bufs) or bufs[b.buffer_id] >= len(g.remote_buffers):
        return None
    rb = g.remote_buffers[bufs[b.buffer_id]]
    if rb.rank >= plan.nranks:
        return None
    return rb.rank, rb.type


def _check_op(plan: Plan, g: Gpu, tb: Threadblock, op: Op, idx: str, rep: PlanReport) -> None:
    at = where(g.id, tb.id, f"{idx} ({op.name.value})")
    name = op.name
    kind = op.channel_type
    if op.channel_ids is not None and len(op.channel_ids) > MAX_CHANNELS_PER_OP:
        rep.add("op-channels", f"{at} lists {len(op.channel_ids)} channels: an op holds {MAX_CHANNELS_PER_OP}")
    for side, lst in (("src_buff", op.srcs), ("dst_buff", op.dsts)):
        if len(lst) > MAX_BUFFS_PER_OP:
            rep.add("op-buffers", f"{at} has {len(lst)} entries in {side}: an op holds {MAX_BUFFS_PER_OP}")
        elif len(lst) > MAX_BUFFS_PER_OP_BEFORE:
            rep.add("op-buffers-before-v010", f"{at} has {len(lst)} entries in {side}: v0.10 holds "
                    f"{MAX_BUFFS_PER_OP}, but MSCCL++ sources before it hold {MAX_BUFFS_PER_OP_BEFORE} (the op "
                    f"overflows into the next field there)", "warning")
    if op.semaphore_ids is not None and len(op.semaphore_ids) > MAX_SEMAPHORES_PER_OP:
        rep.add("op-semaphores", f"{at} lists {len(op.semaphore_ids)} semaphores: an op holds "
                f"{MAX_SEMAPHORES_PER_OP}")
    for s in op.semaphore_ids or ():
        if s >= len(g.semaphores):
            rep.add("index-range", f"{at} names semaphore {s}; gpu {g.id} has {len(g.semaphores)}")
    if name in (OpName.SEM_ACQUIRE, OpName.SEM_RELEASE) and not op.semaphore_ids:
        rep.add("op-fields", f"{at} names no semaphore")
    if name is OpName.BARRIER:
        if op.barrier_id is None or op.num_threadblocks is None:
            rep.add("op-fields", f"{at} needs barrier_id and num_threadblocks")
        else:
            if op.barrier_id >= MAX_BARRIERS:
                rep.add("index-range", f"{at} uses barrier {op.barrier_id}; the executor has {MAX_BARRIERS}")
            if not 1 <= op.num_threadblocks <= len(g.threadblocks):
                rep.add("index-range", f"{at} waits for {op.num_threadblocks} threadblocks; gpu {g.id} has "
                        f"{len(g.threadblocks)}")
    if plan.protocol.value == "Simple" and name in PACKET_OPS:
        rep.add("protocol", f"{at} is a packet op in a Simple plan: the scratch buffer is sized for plain data, "
                "and packets take twice the space")
    if name is OpName.MULTI_STORE:
        rep.add("unexecuted-op", f"{at}: this executor has no handler for gstore; the op does nothing")
    if name is OpName.PIPELINE and op.iter_context is not None:
        _check_pipeline(plan, g, op, at, rep)
    # channels
    needs_channels = name in SIGNALS | WAITS | {OpName.FLUSH} or (name in PUTS and kind is ChannelType.PORT) \
        or (name in (OpName.PUT_PACKETS, OpName.READ_PUT_PACKETS) and kind is ChannelType.PORT)
    if needs_channels:
        if kind not in (ChannelType.MEMORY, ChannelType.PORT):
            rep.add("op-fields", f"{at} needs channel_type memory or port")
            return
        if not op.channel_ids:
            rep.add("op-fields", f"{at} names no channel")
    if op.channel_ids is not None and kind is not None and kind is not ChannelType.NONE:
        avail = len(tb.channel_list(kind))
        for c in op.channel_ids:
            if c >= avail:
                rep.add("index-range", f"{at} names {kind.value} channel {c}; tb {tb.id} has {avail}")
    if name is OpName.FLUSH and kind is not ChannelType.PORT:
        rep.add("op-fields", f"{at}: flush works on port channels only")
    if name is OpName.FLUSH and not op.dsts:
        rep.add("flush-noop", f"{at} has no dst_buff: the kernel flushes one channel per destination entry, so "
                "this flush does nothing", "warning")
    if name is OpName.PUT_PACKETS and kind is ChannelType.PORT:
        rep.add("ppkt-port", f"{at}: on port channels the kernel names the local source by a memory id without "
                "the executor context's base, which is right only for the first plan and buffer pair the executor "
                "sets up", "warning")
    if name is OpName.PUT_WITH_SIGNAL and kind is ChannelType.MEMORY or \
            name is OpName.PUT_WITH_SIGNAL_AND_FLUSH and kind is ChannelType.MEMORY:
        rep.add("pws-memory", f"{at}: on memory channels the kernel only copies; no signal is sent", "warning")
    # buffers
    for side, lst in (("src_buff", op.srcs), ("dst_buff", op.dsts)):
        for k, b in enumerate(lst):
            _check_buff(plan, g, tb, op, b, f"{at} {side}[{k}]", rep)
    _check_shape(plan, g, tb, op, at, rep)


def _check_pipeline(plan: Plan, g: Gpu, op: Op, at: str, rep: PlanReport) -> None:
    assert op.iter_context is not None
    ctx = op.iter_context
    nchunks = g.input_chunks or g.output_chunks
    if nchunks == 0:
        return
    # the executor's upper-bound chunk size at the largest message the plan can run (offsets are 32-bit)
    biggest = min(plan.max_message_size, OFFSET_LIMIT - 1)
    if plan.collective == "allgather" and g.input_chunks:
        biggest = biggest * g.input_chunks // max(g.output_chunks, 1)
    units = biggest // plan.buffer_alignment
    chunk = -(-units // nchunks) * plan.buffer_alignment
    iters = -(-(ctx.num_chunks * chunk) // ctx.unit_size)
    if iters > MAX_PIPELINE_ITERATIONS:
        limit = MAX_PIPELINE_ITERATIONS * ctx.unit_size // max(ctx.num_chunks, 1) * nchunks
        rep.add("pipeline-iterations", f"{at}: at max_message_size the pipeline needs {iters} iterations of "
                f"{ctx.unit_size} bytes; the kernel counts them in 16 bits, so inputs above about {limit} bytes "
                "are silently cut short")


def _check_buff(plan: Plan, g: Gpu, tb: Threadblock, op: Op, b: object, at: str, rep: PlanReport) -> None:
    if isinstance(b, LocalBuff):
        have = _buffer_chunks(g, b.type)
        if b.index + b.size > have:
            rep.add("index-range", f"{at} covers {b.type.value} chunks {b.index}..{b.index + b.size - 1}; gpu "
                    f"{g.id} has {have}")
    elif isinstance(b, RemoteBuff):
        kind = op.channel_type
        if kind not in (ChannelType.MEMORY, ChannelType.PORT):
            rep.add("op-fields", f"{at} is a remote reference on an op without a memory or port channel_type")
            return
        bufs = tb.buffer_list(kind)
        if b.buffer_id >= len(bufs):
            rep.add("index-range", f"{at} names remote buffer {b.buffer_id}; tb {tb.id} references {len(bufs)} "
                    f"over {kind.value} channels")
            return
        target = remote_target(plan, g, tb, kind, b)
        if target is None:
            return
        rank, t = target
        have = _buffer_chunks(plan.gpus[rank], t)
        if b.index + b.size > have:
            rep.add("index-range", f"{at} covers gpu {rank}'s {t.value} chunks {b.index}..{b.index + b.size - 1}; "
                    f"it has {have}")
    elif isinstance(b, SwitchBuff):
        ids = tb.channel_list(ChannelType.SWITCH)
        if b.switch_channel_id >= len(ids):
            rep.add("index-range", f"{at} names switch channel {b.switch_channel_id}; tb {tb.id} has {len(ids)}")
            return
        groups = g.switch_groups()
        if ids[b.switch_channel_id] < len(groups):
            t, _ = groups[ids[b.switch_channel_id]]
            have = _buffer_chunks(g, t)
            if b.index + b.size > have:
                rep.add("index-range", f"{at} covers {t.value} chunks {b.index}..{b.index + b.size - 1} of the "
                        f"switch buffer; gpu {g.id} has {have}")


def _check_shape(plan: Plan, g: Gpu, tb: Threadblock, op: Op, at: str, rep: PlanReport) -> None:
    """The src/dst layout each handler assumes (which entries are local, remote, how many)."""
    name, srcs, dsts, kind = op.name, op.srcs, op.dsts, op.channel_type

    def local(b: object) -> bool:
        return isinstance(b, LocalBuff)

    def remote(b: object) -> bool:
        return isinstance(b, RemoteBuff)

    bad: str | None = None
    if name in PUTS:
        if len(srcs) != len(dsts) or not srcs:
            bad = "needs one source per destination"
        elif not all(map(local, srcs)) or not all(map(remote, dsts)):
            bad = "needs local sources and remote destinations"
        elif kind is ChannelType.MEMORY and len({b.type for b in srcs if isinstance(b, LocalBuff)}) > 1:
            bad = "reads every source from the first source's buffer type on memory channels"
        elif kind is ChannelType.PORT and len(op.channels) < len(dsts):
            bad = "needs one port channel per destination"
        elif kind not in (ChannelType.MEMORY, ChannelType.PORT):
            bad = "needs channel_type memory or port"
    elif name is OpName.GET:
        if kind is not ChannelType.MEMORY:
            bad = "reads through memory channels only"
        elif len(srcs) != len(dsts) or not srcs or not all(map(remote, srcs)) or not all(map(local, dsts)):
            bad = "needs remote sources and local destinations, one each"
    elif name is OpName.COPY or name in (OpName.UNPACK_PACKETS, OpName.COPY_PACKETS):
        if len(srcs) != 1 or len(dsts) != 1 or not local(srcs[0]) or not local(dsts[0]):
            bad = "needs one local source and one local destination"
    elif name in (OpName.REDUCE, OpName.REDUCE_SEND):
        if not srcs or not dsts or not all(map(local, srcs)) or not local(dsts[0]) \
                or not all(map(remote, dsts[1:])):
            bad = "needs local sources, a local first destination and remote further destinations"
        elif name is OpName.REDUCE and len(dsts) != 1:
            bad = "writes its first destination only"
    elif name in (OpName.READ_REDUCE, OpName.READ_REDUCE_SEND):
        if not srcs or not dsts or not local(srcs[0]) or not all(map(remote, srcs[1:])) or not local(dsts[0]) \
                or not all(map(remote, dsts[1:])):
            bad = "needs a local first source, remote further sources, a local first destination, remote others"
        elif kind is not ChannelType.MEMORY:
            bad = "reads through memory channels only"
    elif name in (OpName.REDUCE_SEND_PACKETS, OpName.REDUCE_PACKETS):
        if not srcs or not dsts or not all(map(local, srcs)) or not local(dsts[0]) \
                or not all(map(remote, dsts[1:])):
            bad = "needs local sources, a local first destination and remote further destinations"
    elif name in (OpName.REDUCE_COPY_SEND_PACKETS, OpName.REDUCE_COPY_PACKETS):
        if not srcs or len(dsts) < 2 or not all(map(local, srcs)) or not local(dsts[0]) or not local(dsts[1]) \
                or not all(map(remote, dsts[2:])):
            bad = "needs local sources, two local first destinations and remote further destinations"
    elif name in (OpName.PUT_PACKETS, OpName.READ_PUT_PACKETS):
        if len(srcs) != len(dsts) or not srcs or not all(map(local, srcs)) or not all(map(remote, dsts)):
            bad = "needs one local source per remote destination"
        elif kind is ChannelType.PORT and len(op.channels) < len(dsts):
            bad = "needs one port channel per destination"
    elif name is OpName.MULTI_LOAD_REDUCE_STORE:
        if len(srcs) != 1 or len(dsts) != 1 or not isinstance(srcs[0], SwitchBuff) \
                or not isinstance(dsts[0], SwitchBuff):
            bad = "needs one switch source and one switch destination"
    if bad is not None:
        rep.add("op-shape", f"{at} {bad}")
        return
    if name in PER_ENTRY_SIZES:
        # handlePut/handlePutPackets/handleGet size each entry by itself (put: its destination, ppkt and get:
        # its source), so entries of different sizes are fine; a source and its destination must agree
        for k, (s, d) in enumerate(zip(srcs, dsts)):
            if s.size != d.size:
                rep.add("op-sizes", f"{at} entry {k} moves {s.size} chunk(s) from a source of {s.size} into a "
                        f"destination of {d.size}: the kernel uses one of the two sizes, so the other is partly "
                        "ignored or overrun")
                break
    else:
        sizes = {b.size for b in (*srcs, *dsts)}
        if len(sizes) > 1:
            rep.add("op-sizes", f"{at} mixes sizes {sorted(sizes)}: the kernel moves one size for all entries "
                    "(the first source's), so the others are partly ignored or overrun")
    if name in PACKET_OPS:
        for b in (*srcs, *dsts):
            if isinstance(b, RemoteBuff):
                target = remote_target(plan, g, tb, kind, b)
                if target is not None and target[1] is not BufferType.SCRATCH:
                    rep.add("packet-target", f"{at} writes packets into gpu {target[0]}'s {target[1].value} buffer:"
                            " the kernel adds the scratch offset and doubles the index, as for a scratch buffer")
