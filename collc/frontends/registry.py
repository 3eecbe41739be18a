"""The algorithm registry: each algorithm is registered once; the CLI, ``collc list``
and the tests all read it.

A frontend is ``build(topology, request, options) -> Schedule`` where ``request`` is
a ``Collective`` with chunk factor 1 giving kind, rank count, placement and root;
the frontend picks the chunk factor it needs.  ``build_schedule`` validates the
request against the registration (collective supported, parameters known and
well typed) before calling the frontend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from collc.errors import ScheduleError
from collc.ir.collective import Collective, CollKind
from collc.ir.schedule import Schedule
from collc.topology import Topology

Options = dict[str, object]
BuildFn = Callable[[Topology, Collective, Options], Schedule]


@dataclass(frozen=True)
class Param:
    name: str
    kind: type
    default: object
    doc: str
    choices: tuple[str, ...] = ()

    def parse(self, text: str) -> object:
        if self.choices and text not in self.choices:
            raise ScheduleError(f"parameter {self.name}={text!r}: choose one of {', '.join(self.choices)}")
        if self.kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ScheduleError(f"parameter {self.name}={text!r} is not a boolean")
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise ScheduleError(f"parameter {self.name}={text!r} is not an integer") from None
        return text


@dataclass(frozen=True)
class Algorithm:
    name: str
    collectives: frozenset[CollKind]
    topologies: str
    summary: str
    reference: str
    build: BuildFn
    params: tuple[Param, ...] = ()
    example: str = ""
    defaults: Mapping[str, object] = field(default_factory=dict)
    # optional extra lines for `collc build --report` (e.g. MultiTree's tree heights)
    report: Callable[[Topology, Schedule], list[str]] | None = None
    # pair a receive peer with a send peer in one tb (fused rcs/rrs ops); False keeps
    # every tb on one directed link so that no send waits behind an unrelated receive
    pair_tbs: bool = True


REGISTRY: dict[str, Algorithm] = {}


def register(alg: Algorithm) -> Algorithm:
    if alg.name in REGISTRY:
        raise ValueError(f"algorithm {alg.name} registered twice")
    REGISTRY[alg.name] = alg
    return alg


def get(name: str) -> Algorithm:
    _load()
    if name not in REGISTRY:
        raise ScheduleError(f"unknown algorithm {name!r} (known: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name]


def algorithms() -> list[Algorithm]:
    _load()
    return [REGISTRY[k] for k in sorted(REGISTRY)]


def build_schedule(name: str, topology: Topology, kind: CollKind, inplace: bool = False,
                   root: int | None = None, params: Mapping[str, str] | None = None) -> Schedule:
    alg = get(name)
    if kind not in alg.collectives:
        have = ", ".join(sorted(k.value for k in alg.collectives))
        raise ScheduleError(f"algorithm {name} does not implement {kind.value} (it implements {have})")
    if kind.rooted and root is None:
        root = 0
    if root is not None and not kind.rooted:
        raise ScheduleError(f"{kind.value} takes no root")
    if root is not None and not 0 <= root < topology.nranks:
        raise ScheduleError(f"root {root} is outside 0..{topology.nranks - 1}")
    known = {p.name: p for p in alg.params}
    opts: Options = {p.name: p.default for p in alg.params}
    for key, text in (params or {}).items():
        if key not in known:
            raise ScheduleError(f"algorithm {name} has no parameter {key!r}"
                                f"{' (it takes ' + ', '.join(known) + ')' if known else ' (it takes none)'}")
        opts[key] = known[key].parse(text)
    request = Collective(kind, topology.nranks, 1, inplace, root)
    return alg.build(topology, request, opts)


def _load() -> None:
    """Import the frontend modules once; each registers its algorithms at import."""
    from collc.frontends import (binomial_tree, direct, forestcoll, hdrm, multitree,  # noqa: F401
                                 recursive_doubling, ring, ring2d, swing, torus_baselines, trees)
