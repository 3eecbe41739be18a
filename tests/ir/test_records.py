"""fast_init keeps a frozen dataclass's behaviour: signature, defaults, __post_init__, frozenness, pickling."""

from __future__ import annotations

import pickle
from typing import Any
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from collc.compiler.msccl.program import Step, StepType
from collc.errors import ScheduleError
from collc.ir.collective import Buffer
from collc.ir.records import fast_init
from collc.ir.schedule import Op, Transfer


def _declare() -> type[Any]:
    """The same record declared afresh: one copy stays as the dataclass made it, one gets fast_init."""
    @dataclass(frozen=True, slots=True)
    class Rec:
        a: int
        b: str = "x"
        c: tuple[int, ...] = ()
        d: int = field(init=False, compare=False, default=7)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")
    return Rec


Plain = _declare()
Fast = fast_init(_declare())


@pytest.mark.parametrize("args,kwargs", [((1,), {}), ((1, "y"), {}), ((2,), {"c": (3, 4)}), ((), {"a": 5, "b": "z"})])
def test_same_fields_as_the_generated_init(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    fast, plain = Fast(*args, **kwargs), Plain(*args, **kwargs)
    assert (fast.a, fast.b, fast.c, fast.d) == (plain.a, plain.b, plain.c, plain.d)
    assert repr(fast) == repr(plain)


def test_post_init_runs_and_instances_stay_frozen() -> None:
    with pytest.raises(ValueError, match="negative"):
        Fast(-1)
    f = Fast(1)
    with pytest.raises(FrozenInstanceError):
        f.a = 2
    with pytest.raises(TypeError):
        Fast()  # a required field is still required
    with pytest.raises(TypeError):
        Fast(1, "x", (), 4)  # and no extra positional ones


def test_ir_records_built_by_fast_init() -> None:
    t = Transfer(3, 0, 1, Buffer.INPUT, range(2, 4), Buffer.OUTPUT, range(0, 2), Op.REDUCE, 1)
    assert (t.step, t.src, t.dst, t.src_idx, t.dst_idx, t.op, t.lane) == (3, 0, 1, range(2, 4), range(0, 2),
                                                                          Op.REDUCE, 1)
    assert Transfer(0, 0, 1, Buffer.INPUT, range(1), Buffer.OUTPUT, range(1)).lane == 0   # defaults
    assert pickle.loads(pickle.dumps(t)) == t and hash(pickle.loads(pickle.dumps(t))) == hash(t)
    with pytest.raises(ScheduleError, match="own chunks"):
        Transfer(0, 2, 2, Buffer.OUTPUT, range(0, 2), Buffer.OUTPUT, range(1, 3))
    s = Step(0, StepType.SEND, "i", 0, "i", 0, 1)
    assert (s.depid, s.deps, s.hasdep) == (-1, -1, 0)
    assert repr(s) == ("Step(s=0, type=<StepType.SEND: 's'>, srcbuf='i', srcoff=0, dstbuf='i', dstoff=0, cnt=1, "
                       "depid=-1, deps=-1, hasdep=0)")
