"""Topology specs: the text grammar and the YAML/JSON file format.

Grammar: ``FAMILY:ARGS[:OPTIONS]``, e.g. ``ring:8``, ``ring:8:uni``,
``torus:8x8``, ``torus:4x4x4``, ``mesh:4x4``, ``hypercube:4``, ``complete:8``,
``switch:8``, ``fattree:8``, ``bigraph:4x8``, ``dgx2:16``; or a path to an existing ``.yaml`` / ``.yml`` / ``.json`` file.
``OPTIONS`` is a comma-separated list: ``uni`` (ring only), ``bw=<GB/s>`` and
``lat=<us>`` (applied to every link), e.g. ``ring:8:uni,bw=25,lat=0.7``.
Switch fabrics (ranks first, then switch nodes; each rank has one link each way
to its switch): ``fattree:K`` is a K-ary 2-level fat tree (K leaf switches with K
ranks each, K spine switches, a link each way between every leaf and spine);
``bigraph:MxN`` has M ranks on each of N switches (N even), the N/2 upper and N/2
lower switches joined as a complete bipartite graph; ``dgx2:N`` (N even, normally
16) is two switches of N/2 ranks joined by N/2 parallel links each way.  They take
the ``bw=`` and ``lat=`` options.
Routed direct networks of the Swing paper (section 5.4): ``hyperx:RxC`` is a 2D
HyperX (every rank linked to every rank of its row and column, R, C >= 2);
``hammingmesh:AxB:XxY[,bw=..,lat=..]`` is a HammingMesh of A x B boards (a 2D mesh
on each board, A, B >= 1) in an X x Y arrangement (X, Y >= 2), each global row and
column joined by one switch node linked to the board-edge ranks of that line, e.g.
``hammingmesh:2x2:32x32`` (Hx2Mesh) and ``hammingmesh:4x4:16x16`` (Hx4Mesh).  Both
number their ranks row-major over the global grid.
Any spec may end in the host options ``hosts=H`` (H equal contiguous blocks of ranks, one host
each), ``per-host=K`` (K ranks per host) and ``mnnvl=K`` (K consecutive hosts per multi-node NVLink
domain, one CUDA IPC domain), e.g. ``torus:4x4:hosts=2``, ``ring:8:uni,per-host=4``,
``dgx-h100:4:mnnvl=4``; ``hosts=``/``per-host=`` group only topologies of one host per rank (the
machine families place ranks on their boxes themselves).
Any spec may end in ``@GROUP``, the fabric a process group of its ranks sees (``a100:4x8@stride:8``,
``a100:4x8@host:0``; :mod:`collc.topology.groups`, docs/groups.md).
Machine names (:data:`ALIASES`) stand for a family's spec: ``dgx-a100`` is ``a100:1x8`` and
``dgx-a100:N`` is ``a100:Nx8``, likewise ``dgx-h100`` (``h100:Nx8``) and ``mi300x``; a family's own
name alone (``mi250``) is its one-box form.
Families live in :data:`FAMILIES`; a new family is one :func:`register_family`
call.  Its parser receives ``ARGS`` and the raw ``OPTIONS`` text (None when
absent) and may interpret the third field as it likes (``circulant:16:3,4``).

File format (the same dict as :meth:`Topology.to_dict`)::

    name: my-topo          # optional (default: the file name without extension)
    nranks: 4
    nswitches: 0           # optional, default 0; switch nodes are nranks..nranks+nswitches-1
    hosts: [0, 0, 1, 1]    # optional host of each rank (default: one host per rank)
    ipc_domains: [0, 0]    # optional IPC domain of each host (default: one per host)
    params: {dims: "2x2"}  # optional, generator parameters (string values)
    defaults: {bandwidth: 25.0, latency: 0.7}   # optional, GB/s and us (also multiplicity)
    links:                 # directed unless bidirectional: true
      - {src: 0, dst: 1, bandwidth: 25.0, latency: 0.7, multiplicity: 1, kind: nvlink, bidirectional: true}
    cycle: [0, 1, 2, 3]    # optional Hamiltonian cycle over ranks

Link fields other than ``src`` and ``dst`` are optional (falling back to
``defaults``, then to bandwidth 1.0, latency 0.0, multiplicity 1; ``kind``, one of
nvlink/xgmi/pcie/net/mnnvl, falls back to what the hosts say).  A pair of
nodes may appear only once per direction; parallel links use ``multiplicity``.
Unknown keys are errors.  :meth:`Topology.to_dict` writes every link as a
directed link with all fields (no ``defaults``, no ``bidirectional``), so
``Topology.from_dict(t.to_dict()) == t``.

>>> parse_spec("ring:8:uni").name
'ring:8:uni'
>>> len(parse_spec("torus:4x4").links)
64
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, NamedTuple

from collc.errors import TopologyError, did_you_mean
from collc.inputs import MAX_TOPOLOGY_BYTES, check_spec_text, load_json, load_yaml, read_input
from collc.topology import generators
from collc.topology.groups import group_topology, parse_group, split_group
from collc.topology.model import Topology

__all__ = ["FamilyEntry", "FAMILIES", "register_family", "list_families", "Alias", "ALIASES", "register_alias",
           "list_aliases", "expand_alias", "parse_spec", "load_file",
           "dump_json", "parse_link_options", "LinkOptions", "FILE_SUFFIXES", "HOST_OPTIONS", "split_host_options",
           "apply_host_options"]

FILE_SUFFIXES = (".yaml", ".yml", ".json")

#: A family parser: ``(ARGS, OPTIONS or None) -> Topology``.
FamilyParser = Callable[[str, str | None], Topology]


class FamilyEntry(NamedTuple):
    parse: FamilyParser
    description: str
    example: str


#: Registered topology families, in registration order.
FAMILIES: dict[str, FamilyEntry] = {}


def register_family(name: str, parse: FamilyParser, description: str, example: str) -> None:
    """Add a topology family to the spec grammar (names are unique)."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise TopologyError(f"bad topology family name {name!r}")
    if name in FAMILIES:
        raise TopologyError(f"topology family {name!r} is already registered")
    FAMILIES[name] = FamilyEntry(parse, description, example)


def list_families() -> list[tuple[str, str, str]]:
    """``(name, description, example spec)`` for every family, in registration order."""
    return [(name, e.description, e.example) for name, e in FAMILIES.items()]


class Alias(NamedTuple):
    expansion: str      # a spec with ``{n}`` for the box count (1 when the name stands alone)
    description: str


#: Names people type for the machines they own (``dgx-a100``, ``dgx-h100:4``), each standing for
#: a family's spec: ``NAME`` is one box, ``NAME:N`` N boxes.
ALIASES: dict[str, Alias] = {}


def register_alias(name: str, expansion: str, description: str) -> None:
    """Add a machine name; a family's own name is allowed and then means its bare form only
    (``mi250`` = ``mi250:1``, while ``mi250:2`` stays the family's)."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name) or name in ALIASES:
        raise TopologyError(f"bad or repeated topology alias {name!r}")
    if expansion.partition(":")[0] not in FAMILIES:
        raise TopologyError(f"topology alias {name!r} expands to an unknown family: {expansion!r}")
    ALIASES[name] = Alias(expansion, description)


def list_aliases() -> list[tuple[str, str, str]]:
    """``(name as typed, what it expands to, description)`` for every alias."""
    out = []
    for name, a in ALIASES.items():
        typed, expands = (name, a.expansion.format(n=1)) if name in FAMILIES else \
            (f"{name}[:N]", a.expansion.format(n="N"))
        out.append((typed, expands, a.description))
    return out


def expand_alias(spec: str) -> str | None:
    """The family spec an alias stands for (None when ``spec`` is no alias).

    >>> expand_alias("dgx-a100"), expand_alias("dgx-h100:4"), expand_alias("mi250"), expand_alias("mi250:2")
    ('a100:1x8', 'h100:4x8', 'mi250:1', None)
    """
    name, _, rest = spec.partition(":")
    alias = ALIASES.get(name)
    if alias is None or (name in FAMILIES and rest):
        return None
    args, sep, _ = rest.partition(":")
    if sep:
        raise TopologyError(f"topology alias {name!r} takes no options (it is {alias.expansion.format(n='N')}); "
                            f"write {name} or {name}:BOXES")
    boxes = parse_int(args, f"{name} box count") if args else 1
    if boxes < 1:
        raise TopologyError(f"{name} box count must be at least 1, got {boxes}")
    return alias.expansion.format(n=boxes)


# ---------------------------------------------------------------------- argument helpers
class LinkOptions(NamedTuple):
    bandwidth: float = 1.0
    latency: float = 0.0
    uni: bool = False


def parse_link_options(options: str | None, allowed: Collection[str] = ("bw", "lat")) -> LinkOptions:
    """Parse ``uni``, ``bw=<GB/s>``, ``lat=<us>`` (those named in ``allowed``)."""
    result = LinkOptions()
    if options is None:
        return result
    seen: set[str] = set()
    for item in options.split(","):
        key, eq, value = item.strip().partition("=")
        if key not in allowed or (key == "uni") == bool(eq):
            known = ", ".join("uni" if k == "uni" else f"{k}=<number>" for k in allowed)
            raise TopologyError(f"unknown option {item.strip()!r} (allowed: {known})")
        if key in seen:
            raise TopologyError(f"option {key!r} given twice")
        seen.add(key)
        if key == "uni":
            result = result._replace(uni=True)
            continue
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if key == "bw":
            if not math.isfinite(number) or number <= 0:
                raise TopologyError(f"bw must be a positive number of GB/s, got {value!r}")
            result = result._replace(bandwidth=number)
        else:
            if not math.isfinite(number) or number < 0:
                raise TopologyError(f"lat must be a number of microseconds >= 0, got {value!r}")
            result = result._replace(latency=number)
    return result


def parse_int(text: str, what: str) -> int:
    """A plain decimal integer (no sign, no spaces)."""
    if not re.fullmatch(r"[0-9]+", text):
        raise TopologyError(f"{what} must be a positive integer, got {text!r}")
    return int(text)


def parse_dims(text: str, what: str) -> list[int]:
    """Dimensions such as ``4x4x4``."""
    if not re.fullmatch(r"[0-9]+(x[0-9]+)*", text):
        raise TopologyError(f"{what} must be sizes separated by 'x' such as 4x4, got {text!r}")
    return [int(p) for p in text.split("x")]


# ---------------------------------------------------------------------- built-in families
def _parse_ring(args: str, options: str | None) -> Topology:
    o = parse_link_options(options, ("uni", "bw", "lat"))
    return generators.ring(parse_int(args, "ring size"), not o.uni, o.bandwidth, o.latency)


def _parse_torus(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.torus(parse_dims(args, "torus dimensions"), o.bandwidth, o.latency)


def _parse_mesh(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.mesh(parse_dims(args, "mesh dimensions"), o.bandwidth, o.latency)


def _parse_hypercube(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.hypercube(parse_int(args, "hypercube dimension"), o.bandwidth, o.latency)


def _parse_complete(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.complete(parse_int(args, "complete graph size"), o.bandwidth, o.latency)


def _parse_switch(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.switch(parse_int(args, "switch size"), o.bandwidth, o.latency)


def _parse_fattree(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.fattree(parse_int(args, "fat tree arity"), o.bandwidth, o.latency)


def _parse_bigraph(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    if not re.fullmatch(r"[0-9]+x[0-9]+", args):
        raise TopologyError(f"bigraph arguments must be RANKS_PER_SWITCHxSWITCHES such as 4x8, got {args!r}")
    m, nsw = (int(x) for x in args.split("x"))
    return generators.bigraph(m, nsw, o.bandwidth, o.latency)


def _parse_hyperx(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    if not re.fullmatch(r"[0-9]+x[0-9]+", args):
        raise TopologyError(f"hyperx dimensions must be ROWSxCOLUMNS such as 8x8, got {args!r}")
    return generators.hyperx([int(v) for v in args.split("x")], o.bandwidth, o.latency)


def _parse_hammingmesh(args: str, options: str | None) -> Topology:
    if not re.fullmatch(r"[0-9]+x[0-9]+", args):
        raise TopologyError(f"hammingmesh board must be ROWSxCOLUMNS such as 2x2, got {args!r}")
    arrangement, _, rest = (options or "").partition(",")
    if not re.fullmatch(r"[0-9]+x[0-9]+", arrangement):
        raise TopologyError(f"hammingmesh needs the board arrangement BOARD_ROWSxBOARD_COLUMNS as its third "
                            f"field, e.g. hammingmesh:2x2:32x32, got {arrangement!r}")
    o = parse_link_options(rest if rest else None)
    return generators.hammingmesh([int(v) for v in args.split("x")], [int(v) for v in arrangement.split("x")],
                                  o.bandwidth, o.latency)


def _parse_dgx2(args: str, options: str | None) -> Topology:
    o = parse_link_options(options)
    return generators.dgx2(parse_int(args, "dgx2 rank count"), o.bandwidth, o.latency)


register_family("ring", _parse_ring, "ring of N ranks, bidirectional unless 'uni'", "ring:8:uni")
register_family("torus", _parse_torus, "torus of any number of dimensions, row-major ranks", "torus:4x4x4")
register_family("mesh", _parse_mesh, "grid without wraparound, row-major ranks", "mesh:4x4")
register_family("hypercube", _parse_hypercube, "hypercube of dimension D (2^D ranks)", "hypercube:4")
register_family("complete", _parse_complete, "N ranks with a link for every ordered pair", "complete:8")
register_family("switch", _parse_switch, "N ranks on one crossbar switch (NVSwitch-like)", "switch:8")
register_family("fattree", _parse_fattree, "K-ary 2-level fat tree: K leaves of K ranks, K spines", "fattree:8")
register_family("bigraph", _parse_bigraph, "M ranks on each of N switches, upper/lower halves complete bipartite",
                "bigraph:4x8")
register_family("dgx2", _parse_dgx2, "two switches of N/2 ranks joined by N/2 parallel links", "dgx2:16")
register_family("hammingmesh", _parse_hammingmesh,
                "AxB-rank mesh boards in an XxY arrangement, rows and columns joined by switches (routed)",
                "hammingmesh:2x2:4x4")
register_family("hyperx", _parse_hyperx, "2D HyperX: links to every rank in the same row and column (routed)",
                "hyperx:4x4")


# ---------------------------------------------------------------------- files
def load_file(path: str | os.PathLike[str]) -> Topology:
    """Load a topology from a ``.yaml``/``.yml``/``.json`` file."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in FILE_SUFFIXES:
        raise TopologyError(f"topology file {p}: unsupported extension {p.suffix!r} "
                            f"(use {', '.join(FILE_SUFFIXES)})")
    raw = read_input(p, MAX_TOPOLOGY_BYTES, TopologyError, f"topology file {p}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TopologyError(f"cannot read topology file {p}: {exc}") from None
    data: Any
    if suffix == ".json":
        data = load_json(text, f"topology file {p}", TopologyError, unique_keys=True)
    else:
        data = load_yaml(text, f"topology file {p}", TopologyError, unique_keys=True)
    if not isinstance(data, dict):
        raise TopologyError(f"topology file {p}: expected a mapping at the top level, "
                            f"got {type(data).__name__}")
    try:
        return Topology.from_dict(data, default_name=p.stem)
    except TopologyError as exc:
        raise TopologyError(f"topology file {p}: {exc}") from exc


def _looks_like_file(text: str) -> bool:
    return text.lower().endswith(FILE_SUFFIXES) or os.path.isfile(text)


# ---------------------------------------------------------------------- entry points
#: The options that place ranks on hosts, accepted at the end of any spec (docs/algorithms.md
#: "Hosts and link kinds").
HOST_OPTIONS = ("hosts", "per-host", "mnnvl")
_HOST_ITEM = re.compile(r"(hosts|per-host|mnnvl)=(.*)\Z")


def split_host_options(spec: str) -> tuple[str, dict[str, int]]:
    """``torus:4x4:hosts=2`` -> ``("torus:4x4", {"hosts": 2})``: the host options are the
    ``hosts=H``/``per-host=K``/``mnnvl=K`` items of the spec's last ``:`` field (the field is
    dropped when nothing else is left in it).

    >>> split_host_options("ring:8:uni,per-host=4"), split_host_options("kautz:2,2:hosts=3")
    (('ring:8:uni', {'per-host': 4}), ('kautz:2,2', {'hosts': 3}))
    """
    head, sep, last = spec.rpartition(":")
    if not sep:
        return spec, {}
    found: dict[str, int] = {}
    kept: list[str] = []
    for item in last.split(","):
        m = _HOST_ITEM.match(item.strip())
        if m is None:
            kept.append(item)
            continue
        key, value = m.group(1), m.group(2)
        if key in found:
            raise TopologyError(f"option {key!r} given twice")
        found[key] = parse_int(value, key)
        if found[key] < 1:
            raise TopologyError(f"{key} must be at least 1, got {value!r}")
    if not found:
        return spec, {}
    if "hosts" in found and "per-host" in found:
        raise TopologyError("give hosts= or per-host=, not both")
    return (head + sep + ",".join(kept) if kept else head), found


def apply_host_options(topo: Topology, options: dict[str, int]) -> Topology:
    """Group ``topo``'s ranks into hosts (``hosts=H`` equal contiguous blocks, ``per-host=K``
    ranks each) and its hosts into IPC domains (``mnnvl=K`` consecutive hosts per multi-node
    NVLink domain); the name gains the options (``hosts=`` canonical), so it parses back."""
    n = topo.nranks
    hosts: tuple[int, ...] | None = None
    if "hosts" in options or "per-host" in options:
        if topo.nhosts != n:
            raise TopologyError(f"{topo.name} places its ranks on hosts itself ({topo.hosts_summary()}); hosts= "
                                f"and per-host= group topologies of one host per rank")
        per = options["per-host"] if "per-host" in options else 0
        count = options["hosts"] if "hosts" in options else 0
        if per == 0:
            if n % count:
                raise TopologyError(f"hosts={count} does not divide the {n} ranks into equal blocks")
            per = n // count
        elif n % per:
            raise TopologyError(f"per-host={per} does not divide the {n} ranks into equal blocks")
        hosts = tuple(r // per for r in range(n))
    nhosts = max(hosts) + 1 if hosts else topo.nhosts
    domains: tuple[int, ...] | None = None
    if "mnnvl" in options:
        k = options["mnnvl"]
        if topo.nipc_domains != topo.nhosts:
            raise TopologyError(f"{topo.name} already groups its hosts into IPC domains")
        if nhosts % k:
            raise TopologyError(f"mnnvl={k} does not divide the {nhosts} hosts into equal NVLink domains")
        domains = tuple(h // k for h in range(nhosts))
    parts = ([f"hosts={nhosts}"] if hosts else []) + ([f"mnnvl={options['mnnvl']}"] if domains else [])
    name = topo.name + ("," if topo.name.count(":") >= 2 else ":") + ",".join(parts)
    return topo.with_hosts(hosts if hosts else topo.hosts, domains, name)


def parse_spec(text: str) -> Topology:
    """A Topology from a spec string or a topology file path."""
    if not isinstance(text, str):
        raise TopologyError(f"a topology spec must be a string, got {text!r}")
    spec = text.strip()
    if not spec:
        raise TopologyError("empty topology spec")
    if _looks_like_file(spec):
        return load_file(spec)
    check_spec_text(spec, TopologyError)
    head, group = split_group(spec)
    if group is not None:   # SPEC@GROUP: the fabric a process group sees (docs/groups.md)
        parent = parse_spec(head)
        return group_topology(parent, parse_group(group, parent), group.strip())
    try:
        base, host_options = split_host_options(spec)
    except TopologyError as exc:
        raise TopologyError(f"bad topology spec {spec!r}: {exc}") from exc
    if host_options:
        try:
            return apply_host_options(parse_spec(base), host_options)
        except TopologyError as exc:
            if str(exc).startswith("bad topology spec"):
                raise
            raise TopologyError(f"bad topology spec {spec!r}: {exc}") from exc
    expanded = expand_alias(spec)
    if expanded is not None:
        return parse_spec(expanded)
    family, _, rest = spec.partition(":")
    args, sep, options = rest.partition(":")
    entry = FAMILIES.get(family)
    if entry is None and spec[:1].isupper() and "recipe" in FAMILIES:   # a bare recipe: L3(C16(3,4))
        family, args, sep, options = "recipe", spec, "", ""
        entry = FAMILIES["recipe"]
    if entry is None:
        where = f" in spec {spec!r}" if len(spec) <= 40 else ""
        hint = did_you_mean(family, [*FAMILIES, *ALIASES], "collc list topologies")
        raise TopologyError(f"unknown topology family {family[:40]!r}{where}; {hint}; or a path to a "
                            f"{'/'.join(FILE_SUFFIXES)} file")
    if not args:
        raise TopologyError(f"topology spec {spec!r} has no arguments (example: {entry.example})")
    try:
        return entry.parse(args, options if sep else None)
    except TopologyError as exc:
        raise TopologyError(f"bad topology spec {spec!r}: {exc}") from exc


def dump_json(topology: Topology) -> str:
    """The file-format dict as JSON (indent 2, fixed field order, no trailing newline)."""
    return json.dumps(topology.to_dict(), indent=2)


# Families defined in their own modules register themselves on import.
from collc.topology import kautz_dfc as _kautz_dfc  # noqa: E402,F401
from collc.topology import fabrics as _fabrics  # noqa: E402,F401

# The machines of schedules/ (dgx-a100-executor, dgx-h100-executor, mi300x-rccl, mi250-*): one
# box is the fabric those directories were tuned on (tests/test_cli_names.py checks it).
register_alias("dgx-a100", "a100:{n}x8", "DGX A100: 8 A100 on NVSwitch (300 GB/s per GPU each way), 8 NICs")
register_alias("dgx-h100", "h100:{n}x8", "DGX H100: 8 H100 on NVSwitch (NVLink4, 450 GB/s per GPU each way), "
               "8x400 Gb/s NICs")
register_alias("mi300x", "mi300x:{n}", "8 MI300X fully connected by xGMI (7 x 64 GB/s per GPU each way), 8 NICs")
register_alias("mi250", "mi250:{n}", "one MI250 box: 16 GCDs on xGMI")
register_alias("h100", "h100:{n}x8", "one 8-GPU H100 box")
register_alias("a100", "a100:{n}x8", "one 8-GPU A100 box")
