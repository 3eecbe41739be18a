"""The algorithm registry: each algorithm is registered once; the CLI, ``collc list``
and the tests all read it.

A frontend is ``build(topology, request, options) -> Schedule`` where ``request`` is
a ``Collective`` with chunk factor 1 giving kind, rank count, placement and root;
the frontend picks the chunk factor it needs.  ``build_schedule`` validates the
request against the registration (collective supported, parameters known and
well typed) before calling the frontend.

Besides the user's parameters the options carry :data:`FILE_GPUS`: the number of
``<gpu>`` elements of the file the schedule will be written into (``nranks`` for one
file, 1 for per-rank shards).  The runtime's parser counts every one of them
against each rank's node budget (``collc.limits.parser_nodes``), so a
frontend whose layout depends on that budget reads it; it never reaches the
Schedule's provenance.  Likewise :data:`CHUNKS` and :data:`INSTANCES`, when the caller
knows them (the driver does): the ``--chunks`` and ``--instances`` the schedule will be
lowered with, which multiply its steps per tb and its channels.  A frontend that finds
them absent must leave room for any count the lowering accepts.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from collc.errors import ScheduleError, did_you_mean
from collc.ir.collective import Collective, CollKind
from collc.ir.schedule import Schedule
from collc.topology import Topology

Options = dict[str, object]
#: ``applies(topology, request, options) -> None | reason``: whether an algorithm can run a
#: collective on a topology, decided without building (family, sizes, the routes it needs).
AppliesFn = Callable[[Topology, Collective, Options], "str | None"]

#: Option key set by :func:`build_schedule`, never by users (not an identifier, so no Param can take it).
FILE_GPUS = "@gpus_per_file"
#: Option keys set by :func:`build_schedule` when the caller passes the lowering's counts.
CHUNKS = "@chunks"
INSTANCES = "@instances"
BuildFn = Callable[[Topology, Collective, Options], Schedule]
#: The ranks a build keeps (None: all): ``build_schedule(keep=...)`` sets it around the frontend, and
#: every ``collc.frontends.common.Builder`` made meanwhile drops the transfers that touch none of
#: them (docs/building.md, "Each node builds its own shards"): a kept rank's per-rank ops come only
#: from the transfers it sends or receives, so they are the whole schedule's.
KEEP_RANKS: ContextVar[frozenset[int] | None] = ContextVar("KEEP_RANKS", default=None)
OrbitsFn = Callable[[Topology, CollKind, Options], "tuple[int, ...] | None"]


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
    # parameters to build again with when the lowered program exceeds the parser's node
    # budget and the user left each of them at its default (an ``auto`` layout that
    # predicted a fit the real count refutes)
    budget_fallback: Mapping[str, str] = field(default_factory=dict)
    # whether the algorithm can run on a topology (None: no condition beyond the collective)
    applies: AppliesFn | None = None
    # ranks that stand for every rank of the schedule (one per orbit of its symmetry: each
    # rank's lowering has the peers, channels and tb lengths of one of them), or None where
    # the frontend claims no symmetry; with them a ``--ranks`` build builds and lowers only
    # its own ranks and these (collc.driver, docs/building.md "Each node builds its own shards")
    orbits: OrbitsFn | None = None

    def refusal(self, topology: Topology, request: Collective, options: Options | None = None) -> str | None:
        """Why this algorithm cannot run ``request`` on ``topology`` (None when it can):
        the collective first, then the family's own ``applies`` with the given options
        (default: the parameters' defaults)."""
        if request.kind not in self.collectives:
            have = ", ".join(sorted(k.value for k in self.collectives))
            return f"algorithm {self.name} does not implement {request.kind.value} (it implements {have})"
        if self.applies is None:
            return None
        opts: Options = {p.name: p.default for p in self.params}
        opts.update(options or {})
        return self.applies(topology, request, opts)

    def refusal_of_kind(self, topology: Topology, kind: CollKind, inplace: bool = False,
                        root: int = 0) -> str | None:
        """:meth:`refusal` for ``kind`` on all of the topology's ranks with default parameters
        (``root`` only where the collective has one)."""
        return self.refusal(topology, Collective(kind, topology.nranks, 1, inplace, root if kind.rooted else None))


REGISTRY: dict[str, Algorithm] = {}


def register(alg: Algorithm) -> Algorithm:
    if alg.name in REGISTRY:
        raise ValueError(f"algorithm {alg.name} registered twice")
    REGISTRY[alg.name] = alg
    return alg


def get(name: str) -> Algorithm:
    if name not in REGISTRY:
        _load(name)
    if name not in REGISTRY:
        _load()    # every name, for the suggestion
        raise ScheduleError(f"unknown algorithm {name!r}; {did_you_mean(name, sorted(REGISTRY), 'collc list algorithms')}")
    return REGISTRY[name]


def algorithms() -> list[Algorithm]:
    _load()
    return [REGISTRY[k] for k in sorted(REGISTRY)]


def build_schedule(name: str, topology: Topology, kind: CollKind, inplace: bool = False,
                   root: int | None = None, params: Mapping[str, str] | None = None,
                   gpus_per_file: int | None = None, chunks: int | None = None,
                   instances: int | None = None, keep: frozenset[int] | None = None) -> Schedule:
    """``gpus_per_file``: see :data:`FILE_GPUS` (default: one file when the parser allows
    one, that is up to 1024 ranks, else per-rank shards); ``chunks``, ``instances``: see
    :data:`CHUNKS` (default: unknown, absent from the options).  ``keep``: only the transfers
    that touch these ranks (``collc.frontends.common.KEEP_RANKS``; a partial schedule, for the
    ranks' own ops)."""
    alg = get(name)
    if kind not in alg.collectives:
        raise ScheduleError(alg.refusal_of_kind(topology, kind, inplace) or "")
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
    if gpus_per_file is None:
        gpus_per_file = topology.nranks if topology.nranks <= 1024 else 1
    opts[FILE_GPUS] = gpus_per_file
    if chunks is not None:
        opts[CHUNKS] = chunks
    if instances is not None:
        opts[INSTANCES] = instances
    request = Collective(kind, topology.nranks, 1, inplace, root)
    reason = alg.refusal(topology, request, opts)
    if reason is not None:
        raise ScheduleError(reason)
    if keep is None:
        return alg.build(topology, request, opts)
    token = KEEP_RANKS.set(keep)
    try:
        return alg.build(topology, request, opts)
    finally:
        KEEP_RANKS.reset(token)


def orbit_ranks(name: str, topology: Topology, kind: CollKind, params: Mapping[str, str] | None = None
                ) -> tuple[int, ...] | None:
    """The algorithm's representative ranks for ``kind`` on ``topology`` (``Algorithm.orbits``),
    or None when it claims no symmetry there."""
    alg = get(name)
    if alg.orbits is None:
        return None
    opts: Options = {p.name: p.default for p in alg.params}
    known = {p.name: p for p in alg.params}
    for key, text in (params or {}).items():
        if key in known:
            opts[key] = known[key].parse(text)
    return alg.orbits(topology, kind, opts)


#: Modules of ``collc.frontends`` that register no algorithm (shared helpers); private
#: ``_name`` modules are helpers too.  Every other module must register at least one.
HELPER_MODULES = frozenset({"registry", "common", "expansions", "topology_finder", "ring_relay"})


def frontend_modules() -> list[str]:
    """The names of the frontend modules, discovered from the package (sorted)."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                  if m.name not in HELPER_MODULES and not m.name.startswith("_"))


def _load(wanted: str | None = None) -> None:
    """Import every frontend module once; each registers its algorithms at import.  The
    modules are found in the package, so a new family is one new module (no list to edit).
    With ``wanted``, first the module of that name (``-`` read as ``_``): when it registers
    ``wanted`` the others stay unloaded (a build needs one family; all of them cost start-up)."""
    modules = frontend_modules()
    guess = None if wanted is None else wanted.replace("-", "_")
    if guess in modules:
        importlib.import_module(f"collc.frontends.{guess}")
        if wanted in REGISTRY:
            return
    for name in modules:
        importlib.import_module(f"collc.frontends.{name}")
