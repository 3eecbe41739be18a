"""MSCCL++ execution plans (JSON, schema of MSCCL++ v0.8 and later): reader and printer.

``read_plan`` turns a plan file (or its text) into a :class:`~collc.compiler.mscclpp.plan.Plan`, failing with
one :class:`~collc.compiler.mscclpp.plan.PlanError` line that names the JSON path when the text is not JSON
or breaks the schema the executor's plan reader expects (a required key missing, a value of the wrong
kind, an unknown op, buffer or channel type).  Rules about the values (limits, index ranges, pairing)
are the checker's (:mod:`collc.check.plan.rules`).  ``write_plan`` prints a Plan with the key order
and layout of the MSCCL++ DSL (``json.dumps(indent=2)`` plus a newline), so the same Plan always
gives the same bytes.  See ``docs/mscclpp.md``.

>>> text = write_plan(read_plan(write_plan(Plan("p", "allgather", Protocol.SIMPLE, True, ()))))
>>> text.splitlines()[1]
'  "name": "p",'
"""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import Any, Callable, TypeVar

from collc.inputs import (MAX_PLAN_BYTES, MAX_PLAN_INT, MAX_PLAN_LIST, MAX_PLAN_OPS,
                          MAX_PLAN_OPS_PER_TB, MAX_PLAN_TBS, MAX_PLAN_THREADBLOCKS, MAX_PLAN_THREADS, MAX_RANKS,
                          check_program_size, one_line, read_input, show)
from collc.compiler.mscclpp.plan import (AnyChannel, Buff, BufferType, Channel, ChannelType, Gpu, IterContext, LocalBuff,
                                 Op, OpName, Plan, PlanError, Protocol, RankGroup, ReduceOp, RemoteBuff,
                                 RemoteBuffer, Semaphore, SwitchBuff, SwitchChannel, TbChannels, TbgInfo,
                                 TbRemoteBuffers, Threadblock)

E = TypeVar("E", bound=Enum)
T = TypeVar("T")

# Collectives the executor's plan reader knows (``collective`` of a plan names one of them).
COLLECTIVES = ("allgather", "allreduce", "alltoall", "broadcast", "reduce", "reducescatter", "sendrecv")


class _Count:
    """Threadblocks and ops of one plan read so far: its totals are bounded before each list is read."""

    def __init__(self) -> None:
        self.tbs = 0
        self.ops = 0


class _Obj:
    """A JSON object with its path, for error messages that say where the problem is."""

    def __init__(self, raw: Any, path: str, count: _Count | None = None) -> None:
        if not isinstance(raw, dict):
            raise PlanError(f"{path}: expected a JSON object, got {_kind(raw)}")
        self.raw: dict[str, Any] = raw
        self.path = path
        self.count = count if count is not None else _Count()     # shared by the objects of one plan

    def has(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str) -> Any:
        if key not in self.raw:
            raise PlanError(f"{self.path}: missing key '{key}'")
        return self.raw[key]

    def int_(self, key: str, default: int | None = None, lo: int = 0, hi: int = MAX_PLAN_INT, why: str = "") -> int:
        if default is not None and key not in self.raw:
            return default
        return _int(self.get(key), f"{self.path}.{key}", lo, hi, why)

    def opt_int(self, key: str) -> int | None:
        return self.int_(key) if key in self.raw else None

    def bool_(self, key: str, default: bool | None = None) -> bool:
        if default is not None and key not in self.raw:
            return default
        v = self.get(key)
        if not isinstance(v, bool):
            raise PlanError(f"{self.path}.{key}: expected true or false, got {json.dumps(v)[:40]}")
        return v

    def str_(self, key: str) -> str:
        v = self.get(key)
        if not isinstance(v, str):
            raise PlanError(f"{self.path}.{key}: expected a string, got {json.dumps(v)[:40]}")
        return v

    def enum(self, key: str, cls: type[E]) -> E:
        return _enum(self.get(key), cls, f"{self.path}.{key}")

    def opt_enum(self, key: str, cls: type[E]) -> E | None:
        return self.enum(key, cls) if key in self.raw else None

    def list_(self, key: str, limit: int = MAX_PLAN_LIST, why: str = "") -> list[Any]:
        v = self.get(key)
        if not isinstance(v, list):
            raise PlanError(f"{self.path}.{key}: expected a list, got {_kind(v)}")
        if len(v) > limit:
            reason = why or "the executor's device structures hold at most 16"
            raise PlanError(f"{self.path}.{key} has {len(v)} entries, more than the {limit} collc reads ({reason})")
        return v

    def ints(self, key: str, limit: int = MAX_PLAN_LIST, why: str = "") -> tuple[int, ...]:
        return tuple(_int(v, f"{self.path}.{key}[{i}]") for i, v in enumerate(self.list_(key, limit, why)))

    def objs(self, key: str, make: Callable[[_Obj], T], limit: int = MAX_PLAN_LIST, why: str = "") -> tuple[T, ...]:
        return tuple(make(_Obj(v, f"{self.path}.{key}[{i}]", self.count))
                     for i, v in enumerate(self.list_(key, limit, why)))


def _int(v: Any, path: str, lo: int = 0, hi: int = MAX_PLAN_INT, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise PlanError(f"{path}: expected a non-negative integer, got {_value(v)}")
    if v < lo:
        raise PlanError(f"{path}: expected " + ("a non-negative integer" if lo == 0 else f"at least {lo}")
                        + f", got {_value(v)}")
    if v > hi:
        reason = why or "the executor reads 64-bit integers"
        raise PlanError(f"{path} is {_value(v)}, above the limit of {hi} ({reason})")
    return v


def _value(v: Any) -> str:
    return one_line(json.dumps(v), 40)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(v), "null")


def _enum(v: Any, cls: type[E], path: str) -> E:
    try:
        return cls(v)
    except (ValueError, TypeError):    # TypeError: a list or object is not hashable
        allowed = ", ".join(str(m.value) for m in cls)
        raise PlanError(f"{path}: unknown value {_value(v)} (expected one of {allowed})") from None


def _buff(o: _Obj) -> Buff:
    kinds = [k for k in ("type", "buffer_id", "switch_channel_id") if o.has(k)]
    if len(kinds) != 1:
        raise PlanError(f"{o.path}: a buffer reference needs exactly one of type, buffer_id, switch_channel_id")
    index, size = o.int_("index"), o.int_("size")
    if kinds[0] == "type":
        return LocalBuff(o.enum("type", BufferType), index, size)
    if kinds[0] == "buffer_id":
        return RemoteBuff(o.int_("buffer_id"), index, size)
    return SwitchBuff(o.int_("switch_channel_id"), index, size)


def _op(o: _Obj) -> Op:
    name = o.enum("name", OpName)
    tbg = None
    if o.has("tbg_info"):
        t = _Obj(o.get("tbg_info"), f"{o.path}.tbg_info")
        tbg = TbgInfo(t.int_("tb_id"), t.int_("tbg_size", hi=MAX_PLAN_TBS, why="a group holds threadblocks of one "
                                                                                   "GPU"))
    it = None
    if o.has("iter_context"):
        c = _Obj(o.get("iter_context"), f"{o.path}.iter_context")
        it = IterContext(c.int_("unit_size"), c.int_("num_chunks"))
    if name is OpName.PIPELINE and (it is None or not o.has("ops")):
        raise PlanError(f"{o.path}: a pipeline op needs iter_context and ops")
    return Op(
        name=name,
        src_buff=o.objs("src_buff", _buff) if o.has("src_buff") else None,
        dst_buff=o.objs("dst_buff", _buff) if o.has("dst_buff") else None,
        channel_ids=o.ints("channel_ids") if o.has("channel_ids") else None,
        channel_type=o.opt_enum("channel_type", ChannelType),
        reduce_op=o.opt_enum("reduce_op", ReduceOp),
        tbg_info=tbg,
        barrier_id=o.opt_int("barrier_id"),
        num_threadblocks=o.opt_int("num_threadblocks"),
        semaphore_ids=o.ints("semaphore_ids") if o.has("semaphore_ids") else None,
        iter_context=it,
        ops=o.objs("ops", _op, MAX_PLAN_OPS_PER_TB, _OPS_WHY) if name is OpName.PIPELINE else None,
    )


def _channel(o: _Obj) -> AnyChannel:
    kind = o.enum("channel_type", ChannelType)
    if kind is ChannelType.SWITCH:
        # The v0.10 reader reads buffer_type unconditionally for a switch channel.
        groups = o.objs("rank_groups", lambda g: RankGroup(g.int_("size"), g.ints("ranks", MAX_RANKS, _GPU_LIST)),
                        MAX_RANKS, _GPU_LIST)
        return SwitchChannel(o.enum("buffer_type", BufferType), groups)
    if kind is ChannelType.NONE:
        raise PlanError(f"{o.path}.channel_type: a GPU channel cannot be of type none")
    return Channel(kind, o.ints("connected_to", MAX_RANKS, _GPU_LIST))


_OPS_WHY = "64 times the executor's limit of 64"


def _flat_ops(raw: list[Any]) -> int:
    """Ops of a raw op list as the executor counts them: a pipeline's inner ops too."""
    inner = (op.get("ops") for op in raw if isinstance(op, dict))
    return len(raw) + sum(len(x) for x in inner if isinstance(x, list))


def _tb(o: _Obj) -> Threadblock:
    raw = o.list_("ops", MAX_PLAN_OPS_PER_TB, _OPS_WHY)
    n = _flat_ops(raw)
    if n > MAX_PLAN_OPS_PER_TB:
        raise PlanError(f"{o.path}.ops: {n} ops with the pipelines' inner ops, more than the {MAX_PLAN_OPS_PER_TB} "
                        f"collc reads per threadblock ({_OPS_WHY})")
    o.count.ops += n
    if o.count.ops > MAX_PLAN_OPS:
        raise PlanError(f"{o.path}: the plan has more than {MAX_PLAN_OPS} ops, the most collc checks "
                        "(the executor simulation visits each op)")
    return Threadblock(
        id=o.int_("id"),
        ops=o.objs("ops", _op, MAX_PLAN_OPS_PER_TB, _OPS_WHY),
        channels=o.objs("channels", lambda c: TbChannels(c.enum("channel_type", ChannelType),
                                                        c.ints("channel_ids"), c.opt_enum("buff", BufferType))),
        remote_buffer_refs=o.objs("remote_buffer_refs", lambda r: TbRemoteBuffers(
            r.enum("access_channel_type", ChannelType), r.ints("remote_buffer_ids")))
        if o.has("remote_buffer_refs") else None,
    )


_GPU_LIST = f"{MAX_RANKS} ranks are the most collc handles"


def _gpu(o: _Obj) -> Gpu:
    tbs = o.list_("threadblocks", MAX_PLAN_TBS, "threadblocks wait on one another, so all must be resident at once")
    o.count.tbs += len(tbs)
    if o.count.tbs > MAX_PLAN_THREADBLOCKS:
        raise PlanError(f"{o.path}.threadblocks: the plan has more than {MAX_PLAN_THREADBLOCKS} threadblocks, "
                        "the most collc checks (the executor simulation keeps a vector clock per threadblock)")
    return Gpu(
        id=o.int_("id"),
        input_chunks=o.int_("input_chunks"),
        output_chunks=o.int_("output_chunks"),
        scratch_chunks=o.int_("scratch_chunks"),
        threadblocks=o.objs("threadblocks", _tb, MAX_PLAN_TBS),
        channels=o.objs("channels", _channel, MAX_RANKS, _GPU_LIST),
        remote_buffers=o.objs("remote_buffers", lambda r: RemoteBuffer(
            r.int_("rank"), r.enum("type", BufferType),
            tuple(_enum(v, ChannelType, f"{r.path}.access_channel_types[{i}]")
                  for i, v in enumerate(r.list_("access_channel_types")))), MAX_RANKS, _GPU_LIST),
        semaphores=o.objs("semaphores", lambda s: Semaphore(s.int_("init_value")), MAX_RANKS, _GPU_LIST)
        if o.has("semaphores") else (),
    )


class _Refused(ValueError):
    """A JSON value the plan reader refuses while decoding (raised by the decoder's hooks)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Refused(f"duplicate key {_value(dup)} in one object (JSON readers keep either value)")
    return d


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number (plan values are integers)")


def _integer(text: str) -> int:
    # every plan value fits in 64 bits (20 digits); this also keeps int() of the text cheap
    if len(text.lstrip("-")) > 20:
        raise _Refused(f"integer {text[:20]}... ({len(text.lstrip('-'))} digits) does not fit in 64 bits")
    return int(text)


def load_plan_json(text: str, where: str = "plan") -> Any:
    """JSON text as values, refusing what ``json.loads`` accepts but a plan cannot mean: duplicate keys,
    ``NaN``/``Infinity``, integers beyond 64 bits; nesting too deep for the decoder ends in its
    RecursionError (the C decoder checks its depth, so no bracket count is needed first)."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_integer)
    except json.JSONDecodeError as e:
        raise PlanError(f"{where}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except _Refused as e:
        raise PlanError(f"{where}: {e}") from None
    except RecursionError:
        raise PlanError(f"{where}: not valid JSON: nesting too deep") from None
    except ValueError as e:
        raise PlanError(f"{where}: not valid JSON: {one_line(e, 120)}") from None


def parse_plan(text: str, where: str = "plan") -> Plan:
    """A Plan from JSON text; ``where`` prefixes the error message.

    Sizes are bounded while reading (collc/inputs.py, docs/limits.md): lists before they
    are read, the plan's threadblocks and ops as they add up, its chunk slots before returning.
    """
    raw = load_plan_json(text, where)
    try:
        o = _Obj(raw, "plan")
        collective = o.str_("collective")
        if collective not in COLLECTIVES:
            raise PlanError(f"plan.collective: unknown collective {_value(collective)} (the executor knows "
                            f"{', '.join(COLLECTIVES)})")
        plan = Plan(
            name=o.str_("name"),
            collective=collective,
            protocol=o.enum("protocol", Protocol),
            inplace=o.bool_("inplace"),
            gpus=o.objs("gpus", _gpu, MAX_RANKS, f"{MAX_RANKS} ranks are the most collc handles"),
            reuse_resources=o.bool_("reuse_resources", False),
            num_threads_per_block=o.int_("num_threads_per_block", 1024, 1, MAX_PLAN_THREADS,
                                         "CUDA and HIP launch at most 1024 threads per block"),
            use_double_scratch_buffer=o.bool_("use_double_scratch_buffer", False),
            buffer_alignment=o.int_("buffer_alignment", 16),
            min_message_size=o.int_("min_message_size", 0),
            max_message_size=o.int_("max_message_size", 2 ** 64 - 1),
        )
        g = plan.gpus
        check_program_size(len(g), max((max(x.input_chunks, x.output_chunks) for x in g), default=0),
                           sum(x.input_chunks + x.output_chunks + x.scratch_chunks for x in g), "plan", PlanError)
        return plan
    except PlanError as e:
        raise PlanError(f"{where}: {e}") from None
    except RecursionError:
        raise PlanError(f"{where}: nesting too deep") from None


def is_plan_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an MSCCL++ plan rather than an MSCCL XML: a regular file (nothing else is
    opened: a FIFO would block) named ``.json`` or whose first non-blank character is ``{``."""
    p = Path(path)
    if not p.is_file():
        return False
    if p.suffix.lower() == ".json":
        return True
    try:
        with p.open("rb") as f:
            head = f.read(256).lstrip()
    except OSError:
        return False
    return head.startswith(b"{")


def read_plan(source: str | os.PathLike[str]) -> Plan:
    """A Plan from a path, or from JSON text when ``source`` is a string that starts with ``{``."""
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return parse_plan(source)
    path = Path(source)
    data = read_input(path, MAX_PLAN_BYTES, PlanError)   # regular files only, read without blocking
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlanError(f"cannot read {show(path)}: not UTF-8 text (byte {e.start})") from None
    return parse_plan(text, show(path))


# ---------------------------------------------------------------- printer

def _buff_json(b: Buff) -> dict[str, Any]:
    if isinstance(b, LocalBuff):
        return {"type": b.type.value, "index": b.index, "size": b.size}
    if isinstance(b, RemoteBuff):
        return {"buffer_id": b.buffer_id, "index": b.index, "size": b.size}
    return {"switch_channel_id": b.switch_channel_id, "index": b.index, "size": b.size}


def _op_json(op: Op) -> dict[str, Any]:
    # The DSL's key order: name, buffers, channels, then the op-specific fields.
    d: dict[str, Any] = {"name": op.name.value}
    if op.iter_context is not None:
        d["iter_context"] = {"unit_size": op.iter_context.unit_size, "num_chunks": op.iter_context.num_chunks}
    if op.ops is not None:
        d["ops"] = [_op_json(o) for o in op.ops]
    if op.src_buff is not None:
        d["src_buff"] = [_buff_json(b) for b in op.src_buff]
    if op.dst_buff is not None:
        d["dst_buff"] = [_buff_json(b) for b in op.dst_buff]
    if op.semaphore_ids is not None:
        d["semaphore_ids"] = list(op.semaphore_ids)
    if op.barrier_id is not None:
        d["barrier_id"] = op.barrier_id
    if op.num_threadblocks is not None:
        d["num_threadblocks"] = op.num_threadblocks
    if op.channel_ids is not None:
        d["channel_ids"] = list(op.channel_ids)
    if op.channel_type is not None:
        d["channel_type"] = op.channel_type.value
    if op.reduce_op is not None:
        d["reduce_op"] = op.reduce_op.value
    if op.tbg_info is not None:
        d["tbg_info"] = {"tb_id": op.tbg_info.tb_id, "tbg_size": op.tbg_info.tbg_size}
    return d


def _channel_json(c: AnyChannel) -> dict[str, Any]:
    if isinstance(c, SwitchChannel):
        return {"channel_type": c.channel_type.value, "buffer_type": c.buffer_type.value,
                "rank_groups": [{"size": g.size, "ranks": list(g.ranks)} for g in c.rank_groups]}
    return {"channel_type": c.channel_type.value, "connected_to": list(c.connected_to)}


def _tb_json(tb: Threadblock) -> dict[str, Any]:
    d: dict[str, Any] = {"id": tb.id, "ops": [_op_json(o) for o in tb.ops], "channels": []}
    for c in tb.channels:
        cd: dict[str, Any] = {} if c.buff is None else {"buff": c.buff.value}
        cd.update({"channel_type": c.channel_type.value, "channel_ids": list(c.channel_ids)})
        d["channels"].append(cd)
    if tb.remote_buffer_refs is not None:
        d["remote_buffer_refs"] = [{"access_channel_type": r.access_channel_type.value,
                                    "remote_buffer_ids": list(r.remote_buffer_ids)} for r in tb.remote_buffer_refs]
    return d


def _gpu_json(g: Gpu) -> dict[str, Any]:
    return {
        "id": g.id, "input_chunks": g.input_chunks, "output_chunks": g.output_chunks,
        "scratch_chunks": g.scratch_chunks,
        "threadblocks": [_tb_json(t) for t in g.threadblocks],
        "channels": [_channel_json(c) for c in g.channels],
        "remote_buffers": [{"rank": r.rank, "type": r.type.value,
                            "access_channel_types": [t.value for t in r.access_channel_types]}
                           for r in g.remote_buffers],
        "semaphores": [{"init_value": s.init_value} for s in g.semaphores],
    }


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as JSON values, keys in the DSL's order."""
    return {
        "name": plan.name, "collective": plan.collective, "protocol": plan.protocol.value,
        "inplace": plan.inplace, "reuse_resources": plan.reuse_resources,
        "gpus": [_gpu_json(g) for g in plan.gpus],
        "num_threads_per_block": plan.num_threads_per_block,
        "use_double_scratch_buffer": plan.use_double_scratch_buffer,
        "buffer_alignment": plan.buffer_alignment,
        "min_message_size": plan.min_message_size, "max_message_size": plan.max_message_size,
    }


def write_plan(plan: Plan) -> str:
    """The plan's JSON text: two-space indent and a final newline, as the DSL writes it."""
    return json.dumps(plan_json(plan), indent=2) + "\n"
