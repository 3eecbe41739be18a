"""Import real machines: NCCL topology XML, ``nvidia-smi topo -m`` and ``rocm-smi --showtopo``.

* **NCCL topology XML** (``NCCL_TOPO_DUMP_FILE`` dumps and ``NCCL_TOPO_FILE`` inputs,
  ``<system version="1">``; RCCL's ``version="2"`` dialect with ``<xgmi>`` links).
  GPUs become ranks (ordered by host, then the ``rank`` attribute, then ``dev``, then
  document order); every CPU (NUMA domain), PCI switch/bridge and NVSwitch becomes a
  switch node.  All NVSwitches of one host are merged into one node, as NCCL itself
  does.  Link bandwidths follow NCCL's own model (``src/graph/topo.h``): NVLink per
  link 18/20/20/12/20.6/40.1 GB/s for sm 60/70/80/86/90/100, PCIe ``GT/s x width``
  as NCCL computes it (16 GT/s x16 = 24 GB/s; 12 GB/s when the file gives no speed),
  inter-socket 16 GB/s (AMD) or 10/6 GB/s (Intel Skylake and later/older).  NICs only
  matter between hosts: several files (one per node) or several ``host_hash`` values
  are joined through one network switch node, each NIC linked at its ``speed``
  (Mb/s); a single host's NICs are listed in ``params`` only.  Each file (each ``host_hash``
  within one) is a host (``Topology.hosts``); NVLink links are ``nvlink``, xGMI ``xgmi``, PCIe
  and inter-socket links ``pcie``, NIC-to-network links ``net``.
* **nvidia-smi topo -m**: ``NV#`` pairs are NVLink (through one NVSwitch node when a
  GPU's NV counts add up to more than the 18 links any GPU has, e.g. ``NV18`` to
  every peer on an H100 box); ``PIX``/``PXB`` groups share a PCIe switch node;
  GPUs not linked by ``SYS`` share a CPU node; CPUs are joined pairwise.  The matrix
  carries no speeds: NVLink 20 GB/s per link, PCIe 24 GB/s, inter-socket 10 GB/s.
* **rocm-smi --showtopo**: ``XGMI`` pairs are direct links (64 GB/s each way, one
  MI300X xGMI link), other pairs go over PCIe through the CPU of each GPU's NUMA node.

Files that describe no GPU (``NCCL_TOPO_FILE`` inputs whose ``<pci>`` stubs carry no
class, which NCCL completes from the live machine) and ``NCCL_GRAPH_FILE``s are
refused with a one-line reason.  ``docs/runtime-tests.md`` explains the choices.

Limits, checked before the graph is built (docs/limits.md): at most
``MAX_RANKS`` GPUs in all; per ``<system>`` at most ``MAX_SYSTEM_NODES`` (640) GPUs
or NICs, NCCL's own ``NCCL_TOPO_MAX_NODES`` (``src/include/graph.h``): NCCL cannot
load a bigger system; at most ``MAX_SYSTEM_CPUS`` (64) CPUs (NUMA domains, joined
pairwise; hosts have at most 16); at most 2^20 directed links, counted as two per
``<pci>``/``<nic>``/``<gpu>``/``<nvlink>``/``<xgmi>`` entry plus the CPU pairs; an ``nvidia-smi``/``rocm-smi``
matrix of at most ``MAX_MATRIX_GPUS`` (2048) GPUs (it has GPUs^2 cells).  Numbers the importer
uses must be in range or the file is refused naming the attribute: ``rank``/``dev``
(0 .. 2^31-1, ranks distinct within a host), ``sm`` (0 .. 10000), ``link_speed``
(at most 128 GT/s, PCIe 7), ``link_width`` (0 .. 32 lanes; 0 means unknown),
NIC ``speed`` (0 .. 10^7 Mb/s), ``<nvlink>``/``<xgmi>`` ``count`` and ``NV#`` cells
(1 .. ``MAX_LINK_COUNT``); an ``<nvlink>``/``<xgmi>`` whose target is no GPU of the
host must say by ``tclass`` that it leads to an NVSwitch or CPU (NCCL requires
``tclass``).  An ``nvidia-smi`` matrix row must have a cell per column and ``X``
on the diagonal.  Text that is not a number at all is read as absent (vendors'
``NCCL_TOPO_FILE`` inputs leave ``link_width=""``), as NCCL does.

:func:`import_with_warnings` also returns what a user must know about the result
(``collc topology import`` prints each as ``collc: warning: ...``): a host with
several GPUs but no NVLink/xGMI (modelled PCIe-only), link bandwidths outside
``PLAUSIBLE_BW`` (1 .. 2000 GB/s per link: below 1 GB/s is slower than PCIe Gen1
x4 or 10 GbE, the slowest path a GPU collective would use; above 2000 is more
than a whole B200's NVLink, 1800 GB/s), and entries the importer ignored.

>>> t = import_text('''<system version="1"><cpu numaid="0" vendor="AuthenticAMD">
...  <pci busid="0000:01:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
...   <gpu dev="0" sm="80" rank="0"/></pci>
...  <pci busid="0000:02:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
...   <gpu dev="1" sm="80" rank="1"/></pci></cpu></system>''', "box.xml")
>>> t.nranks, t.nswitches, t.link(0, 2).bandwidth, t.route(0, 1)
(2, 1, 24.0, (0, 2, 1))
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from lxml import etree  # type: ignore[import-untyped]

from collc.errors import TopologyError
from collc.inputs import MAX_RANKS, MAX_TOPOLOGY_BYTES, one_line, output_file, read_input, show
from collc.outputs import write_file
from collc.topology.model import MAX_CYCLE_SEARCH_RANKS, MAX_FILE_LINKS, Link, Topology
from collc.topology.spec import register_family

__all__ = ["import_files", "import_text", "import_with_warnings", "import_command", "NVLINK_BW", "PCI_BW",
           "MAX_SYSTEM_NODES", "MAX_SYSTEM_CPUS", "MAX_MATRIX_GPUS", "MAX_LINK_COUNT", "PLAUSIBLE_BW"]

#: NCCL's effective NVLink bandwidth per link (GB/s) by compute capability (src/graph/topo.h).
NVLINK_BW = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 89: 12.0, 90: 20.6, 100: 40.1}
NVLINK_DEFAULT = 20.0
PCI_BW = 12.0                # NCCL's PCI_BW (Gen3 x16) when a file gives no usable speed
PCI_GEN4_X16 = 24.0          # what NCCL computes for 16 GT/s x16; the nvidia-smi default
XGMI_BW = 64.0               # one MI300X xGMI link, each way
MAX_NVLINKS_PER_GPU = 18     # H100/B200; more than this per GPU means an NVSwitch
_NCCL_PCI_GEN = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}  # NCCL's per-lane table

#: GPUs, CPUs or NICs of one ``<system>``: NCCL's NCCL_TOPO_MAX_NODES (640 since NCCL 2.30, for
#: 576-GPU NVLink domains); NCCL cannot load more, and CPUs are joined pairwise (quadratic).
MAX_SYSTEM_NODES = 640
#: CPUs (NUMA domains) of one ``<system>``: they are joined pairwise, and real hosts have at most 16
#: (two sockets of 8 sub-NUMA clusters).
MAX_SYSTEM_CPUS = 64
#: GPUs of one nvidia-smi/rocm-smi matrix: it has GPUs^2 cells (2048 read in about 2 s), and no host
#: has near this many (NCCL loads at most MAX_SYSTEM_NODES per system).
MAX_MATRIX_GPUS = 2048
#: Parallel links of one ``<nvlink>``/``<xgmi>`` entry or one ``NV#`` cell: 18 is the most any GPU has
#: (H100, B200); a bound well above it keeps a typo from multiplying a link's bandwidth a billionfold.
MAX_LINK_COUNT = 64
#: Per-link bandwidths (GB/s) outside this range are reported by :func:`import_with_warnings`.
PLAUSIBLE_BW = (1.0, 2000.0)
_MAX_GTS = 128.0             # PCIe 7.0
_MAX_WIDTH = 32              # the widest PCIe link
_MAX_NIC_MBPS = 10 ** 7      # 10 Tb/s, six times today's fastest NIC port
_MAX_INT32 = (1 << 31) - 1   # NCCL keeps rank and dev as int


# --------------------------------------------------------------------------- graph builder
@dataclass
class _Graph:
    """Nodes by key; GPUs kept apart so they become ranks 0..n-1."""

    gpus: list[str] = field(default_factory=list)
    switches: dict[str, None] = field(default_factory=dict)    # ordered set: registration order
    edges: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)   # undirected, sorted key
    directed: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)
    kinds: dict[tuple[str, str], str] = field(default_factory=dict)   # link kind by edges/directed key
    gpu_host: dict[str, int] = field(default_factory=dict)            # host index by GPU key (default 0)
    notes: list[str] = field(default_factory=list)

    def switch(self, key: str) -> str:
        self.switches.setdefault(key, None)
        return key

    def link(self, a: str, b: str, bw: float, mult: int = 1, kind: str = "pcie") -> None:
        if a == b:
            return
        k = (a, b) if a < b else (b, a)
        old = self.edges.get(k)
        if old is None or old[0] * old[1] < bw * mult:
            self.edges[k] = (bw, mult)
            self.kinds[k] = kind

    def arc(self, a: str, b: str, bw: float, mult: int, kind: str = "nvlink") -> None:
        """One direction only (NVLink lists are per GPU); merged with the reverse later."""
        old = self.directed.get((a, b))
        self.directed[(a, b)] = (bw, mult + (old[1] if old else 0))
        self.kinds[(a, b)] = kind

    def build(self, name: str, params: list[tuple[str, str]]) -> Topology:
        if not self.gpus:
            raise TopologyError(f"{name}: no GPU found")
        touched = {n for e in list(self.edges) + list(self.directed) for n in e}
        keep = [k for k in self.switches if k in touched]   # an empty bridge reaches nothing: dropped
        ids = {k: i for i, k in enumerate(self.gpus + keep)}
        links: dict[tuple[int, int], Link] = {}
        for (a, b), (bw, mult) in sorted(self.edges.items()):
            if a in ids and b in ids:
                for s, d in ((a, b), (b, a)):
                    links[(ids[s], ids[d])] = Link(ids[s], ids[d], bw, 0.0, mult, self.kinds[(a, b)])
        for (a, b), (bw, mult) in sorted(self.directed.items()):
            kind = self.kinds[(a, b)]
            links[(ids[a], ids[b])] = Link(ids[a], ids[b], bw, 0.0, mult, kind)
            if (ids[b], ids[a]) not in links:   # a link is symmetric even when only one side lists it
                links[(ids[b], ids[a])] = Link(ids[b], ids[a], bw, 0.0, mult, kind)
        # one file (or one host_hash) is one host: GPUs of one host share CUDA IPC
        hosts = tuple(self.gpu_host.get(k, 0) for k in self.gpus)
        topo = Topology(name, len(self.gpus), tuple(links.values()), len(keep), tuple(params), hosts=hosts)
        for r in _apart_from_first(topo):    # exact route checks only where the quick test fails
            if not topo.rank_reachable(0, r) or not topo.rank_reachable(r, 0):
                raise TopologyError(f"{name}: GPU {self.gpus[r]} is not connected to {self.gpus[0]}")
        return Topology(name, topo.nranks, topo.links, topo.nswitches, topo.params,
                        self._cycle(topo, {ids[k] for k in keep if k.endswith("nvswitch")}), hosts)

    def bandwidth_warnings(self, name: str) -> list[str]:
        """One line per per-link bandwidth outside ``PLAUSIBLE_BW`` (with a link that has it)."""
        lo, hi = PLAUSIBLE_BW
        odd: dict[float, list[tuple[str, str]]] = {}
        for (a, b), (bw, _) in list(self.edges.items()) + list(self.directed.items()):
            if not lo <= bw <= hi and (a in self.gpus or a in self.switches) and \
                    (b in self.gpus or b in self.switches):
                odd.setdefault(bw, []).append((a, b))
        out = []
        for bw, pairs in sorted(odd.items()):
            a, b = min(pairs)
            out.append(f"{_brief_name(name)}: {len(pairs)} link(s) of {bw:g} GB/s (e.g. {_label(a)} - {_label(b)}), outside "
                       f"the plausible {lo:g}..{hi:g} GB/s per link; the model uses it as given, check the "
                       f"file's link_speed/link_width/speed")
        return out

    @staticmethod
    def _cycle(topo: Topology, nvswitches: set[int]) -> tuple[int, ...]:
        """A ring over NVLink/xGMI only (direct GPU links or through an NVSwitch) when one
        exists on a machine small enough to search; else the ranks in order, which keeps
        each host's GPUs together (every rank reaches every other, so any order is a cycle)."""
        n = topo.nranks
        fast = tuple(lk for lk in topo.links if (lk.src < n and lk.dst < n) or lk.src in nvswitches
                     or lk.dst in nvswitches)
        if 2 < n <= MAX_CYCLE_SEARCH_RANKS and fast:
            found = Topology(topo.name, n, fast, topo.nswitches, hosts=topo.hosts).hamiltonian_cycle()
            if found is not None:
                return found
        return tuple(range(n))


def _label(key: str) -> str:
    """A node key without its file/host prefix: ``pci:0000:a1:00.0``, ``cpu0``, ``gpu3``."""
    return key.rsplit("/", 1)[-1]


def _apart_from_first(topo: Topology) -> list[int]:
    """Ranks not joined to rank 0 through switches alone (union-find over switch-switch links).

    Every link the importers add has its reverse, so rank r reaches rank 0 through switches
    when a switch of r and a switch of 0 are in one switch component; the few others are
    checked exactly (a direct link may still join them).  Linear, where a route per rank
    is a search per rank (minutes for hundreds of switches and thousands of GPUs)."""
    n = topo.nranks
    parent = list(range(topo.nnodes))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for lk in topo.links:
        if lk.src >= n and lk.dst >= n:
            parent[root(lk.src)] = root(lk.dst)
    comps = [{root(s) for s in topo.out_neighbors(r) if s >= n} for r in range(n)]
    return [r for r in range(1, n) if not comps[r] & comps[0]]


def _brief_name(name: str) -> str:
    """A joined import's name (``nccl:a.xml+b.xml+...``) cut to its first file for warnings."""
    files = name.split("+")
    return name if len(files) <= 2 else f"{files[0]}+{len(files) - 1} more"


def _host(key: str) -> str:
    """``host 0x5f..`` (its host_hash), or ``the host`` of a file that names none."""
    h = key.split(":", 1)[1]
    return "the host" if h == "host" else f"host {h}"


def _too_long(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def _number(el: etree._Element, attr: str, lo: float, hi: float, where: str,
            integer: bool = True) -> float | None:
    """The attribute as a number in ``lo .. hi``; None when absent or not a number at all (NCCL reads
    such text as 0 / unknown); TopologyError naming the attribute when it is a number out of range."""
    text = (el.get(attr) or "").strip()
    if not text:
        return None
    if integer and re.fullmatch(r"[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)", text):
        value: float = int(text, 0) if len(text) <= 24 else math.inf
    elif re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", text,
                      re.IGNORECASE):
        value = float(text) if len(text) <= 64 else math.inf
    else:
        return None
    if not (lo <= value <= hi):    # NaN fails both tests
        raise TopologyError(f"{where}: <{el.tag}> {attr}=\"{_too_long(text)}\" is out of range "
                            f"({lo:g}..{hi:g})")
    return value


def _pci_bw(el: etree._Element, where: str) -> float:
    speed = el.get("link_speed", "")
    width = _number(el, "link_width", 0, _MAX_WIDTH, f"{where}: pci {el.get('busid', '?')}")
    m = re.match(r"\s*([+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*GT/s", speed)
    gts = float(m.group(1)) if m and len(m.group(1)) <= 64 else (math.inf if m else 0.0)
    if m and not 0 < gts <= _MAX_GTS:
        raise TopologyError(f"{where}: pci {el.get('busid', '?')}: <pci> link_speed=\"{_too_long(speed)}\" is "
                            f"out of range (above 0 and at most {_MAX_GTS:g} GT/s)")
    if not m or not width:
        return PCI_BW
    per_lane = _NCCL_PCI_GEN.get(gts, gts * 7.5)
    return per_lane * width / 80.0


def _nvlink_bw(gpu: etree._Element) -> float:
    sm = int(_number(gpu, "sm", 0, 10000, "") or 0)   # checked when the GPU was read
    if sm >= 100:
        return NVLINK_BW[100]
    return NVLINK_BW.get(sm, NVLINK_DEFAULT)


def _smp_bw(cpu: etree._Element) -> float:
    vendor = cpu.get("vendor", "")
    if vendor == "AuthenticAMD":
        return 16.0
    if vendor == "GenuineIntel":
        model = int(_number(cpu, "modelid", 0, _MAX_INT32, "") or 0)   # checked when the CPU was read
        return 10.0 if model >= 85 else 6.0
    return 6.0


def _is_gpu_class(cls: str | None) -> bool:
    return bool(cls) and (cls or "").lower().startswith(("0x03", "0x12"))


@dataclass
class _Host:
    key: str
    gpus: list[tuple[tuple[int, int, int], str, etree._Element | None, str]] = field(default_factory=list)
    nics: list[tuple[str, float, str]] = field(default_factory=list)   # (node key, GB/s, names)
    cpus: list[tuple[str, etree._Element]] = field(default_factory=list)


def _count_system(root: etree._Element, label: str, before: tuple[int, int]) -> tuple[int, int]:
    """GPUs and (at most) directed links of one ``<system>``, counted with its CPUs, NICs and
    NVLink entries before anything is built for them; ``before`` holds the earlier files' counts."""
    gpus = int(root.xpath("count(.//gpu) + count(.//pci[not(gpu) and not(pci) and ("
                          "starts-with(translate(@class, 'X', 'x'), '0x03') or "
                          "starts-with(translate(@class, 'X', 'x'), '0x12'))])"))
    if before[0] + gpus > MAX_RANKS:
        raise TopologyError(f"{label}: {before[0] + gpus} GPUs{' in all' if before[0] else ''}, more than the "
                            f"{MAX_RANKS} ranks collc handles (counted before anything is built)")
    cpus = int(root.xpath("count(.//cpu)"))
    for what, count, limit, why in (
            ("GPUs", gpus, MAX_SYSTEM_NODES, "NCCL's NCCL_TOPO_MAX_NODES: NCCL cannot load such a system"),
            ("NICs", int(root.xpath("count(.//net) + count(.//nic[not(net)])")), MAX_SYSTEM_NODES,
             "NCCL's NCCL_TOPO_MAX_NODES: NCCL cannot load such a system"),
            ("CPUs", cpus, MAX_SYSTEM_CPUS, "NUMA domains: CPUs are joined pairwise; hosts have at most 16")):
        if count > limit:
            raise TopologyError(f"{label}: {count} {what} in one <system>, more than {limit} ({why})")
    # every entry gives at most one link each way; CPUs are joined pairwise
    links = before[1] + 2 * int(root.xpath("count(.//pci) + count(.//nic) + count(.//gpu) + count(.//nvlink) + "
                                           "count(.//xgmi)")) + cpus * (cpus - 1)
    if links > MAX_FILE_LINKS:
        raise TopologyError(f"{label}: up to {links} directed links{' in all' if before[1] else ''}, more than "
                            f"{MAX_FILE_LINKS} (2^20, the most a topology may have; counted before anything "
                            f"is built)")
    return before[0] + gpus, links


def _check_gpu(gpu: etree._Element, where: str) -> None:
    for attr in ("rank", "dev"):
        _number(gpu, attr, 0, _MAX_INT32, where)
    _number(gpu, "sm", 0, 10000, where)
    for tag in ("nvlink", "xgmi"):
        for ln in gpu.findall(tag):
            _number(ln, "count", 1, MAX_LINK_COUNT, where)


def _nic_speed(nets: list[etree._Element], where: str) -> float:
    """GB/s of a NIC's ports (``speed`` in Mb/s), 0 when none is given."""
    return sum(_number(n, "speed", 0, _MAX_NIC_MBPS, where) or 0 for n in nets) / 8000.0


def _walk_system(root: etree._Element, file_index: int, g: _Graph, hosts: dict[str, _Host],
                 label: str) -> None:
    untyped = 0
    for ci, cpu in enumerate(root.iter("cpu")):
        host_key = f"f{file_index}:{cpu.get('host_hash', 'host')}"
        host = hosts.setdefault(host_key, _Host(host_key))
        _number(cpu, "modelid", 0, _MAX_INT32, f"{label}: cpu {cpu.get('numaid', ci)}")
        ckey = g.switch(f"{host_key}/cpu{cpu.get('numaid', ci)}")
        host.cpus.append((ckey, cpu))

        def visit(el: etree._Element, parent: str) -> None:
            nonlocal untyped
            for child in el:
                if not isinstance(child.tag, str):
                    continue   # comments
                if child.tag == "pci":
                    busid = child.get("busid", "?").lower()
                    where = f"{label}: pci {busid}"
                    gpu = child.find("gpu")
                    nic = child.find("nic")
                    sub_pci = child.find("pci") is not None
                    bw = _pci_bw(child, label)
                    if gpu is not None or (_is_gpu_class(child.get("class")) and not sub_pci):
                        key = f"{host_key}/gpu:{busid}"
                        if gpu is not None:
                            _check_gpu(gpu, where)
                        order = (_int(gpu, "rank"), _int(gpu, "dev"), len(host.gpus)) if gpu is not None \
                            else (1 << 31, 1 << 31, len(host.gpus))
                        host.gpus.append((order, key, gpu, busid))
                        g.link(key, parent, bw)
                    elif nic is not None or (child.get("class") or "").lower().startswith("0x02"):
                        nets = child.findall(".//net")
                        speed = _nic_speed(nets, where)
                        key = f"{host_key}/nic:{busid}"
                        host.nics.append((key, speed or 12.0, ",".join(n.get("name", "?") for n in nets) or busid))
                        g.link(key, parent, bw)
                    elif sub_pci or (child.get("class") or "").lower().startswith("0x06"):
                        key = g.switch(f"{host_key}/pci:{busid}")
                        g.link(key, parent, bw)
                        visit(child, key)
                    else:
                        untyped += 1
                elif child.tag == "nic":     # a NIC straight under the CPU (socket devices)
                    nets = child.findall("net")
                    speed = _nic_speed(nets, f"{label}: nic under {_label(parent)}")
                    key = f"{host_key}/nic:{parent}:{len(host.nics)}"
                    host.nics.append((key, speed or 12.0, ",".join(n.get("name", "?") for n in nets)))
                    g.link(key, parent, PCI_BW)
                elif child.tag == "gpu":     # a GPU without a PCI parent in the file
                    _check_gpu(child, f"{label}: gpu dev {child.get('dev', len(host.gpus))}")
                    key = f"{host_key}/gpu:dev{child.get('dev', len(host.gpus))}"
                    host.gpus.append(((_int(child, "rank"), _int(child, "dev"), len(host.gpus)), key, child, ""))
                    g.link(key, parent, PCI_BW)
        visit(cpu, ckey)
    if untyped:
        g.notes.append(f"{label}: {untyped} PCI device(s) without a class ignored")


def _int(el: etree._Element | None, attr: str, default: int = 1 << 31) -> int:
    if el is None:
        return default
    text = el.get(attr)
    if text is None:
        return default
    try:
        return int(text, 0) if len(text) <= 24 else default
    except ValueError:
        return default


def _finish_hosts(g: _Graph, hosts: dict[str, _Host], name: str) -> list[tuple[str, str]]:
    """Order GPUs, add NVLink/xGMI links, CPU-CPU links and the network join."""
    busid_to_gpu: dict[tuple[str, str], str] = {}
    for index, host in enumerate(hosts.values()):
        host.gpus.sort(key=lambda item: item[0])
        seen: dict[int, str] = {}
        for (rank, _, _), key, gpu, busid in host.gpus:
            if gpu is not None and gpu.get("rank") is not None and rank < 1 << 31:
                if rank in seen:
                    raise TopologyError(f"{name}: GPUs {_label(seen[rank])} and {_label(key)} of "
                                        f"{_host(host.key)} both have rank=\"{rank}\"")
                seen[rank] = key
            g.gpus.append(key)
            g.gpu_host[key] = index
            if busid:
                busid_to_gpu[(host.key, busid)] = key
    selfish: list[str] = []        # GPUs that list a link to themselves (Azure NCv4's inputs do)
    pcie_only: list[str] = []      # hosts of several GPUs without NVLink/xGMI
    for host in hosts.values():
        nvswitch: str | None = None
        host_links = 0
        for _, key, gpu, busid in host.gpus:
            if gpu is None:
                continue
            bw = _nvlink_bw(gpu)
            for tag, per_link in (("nvlink", bw), ("xgmi", XGMI_BW)):
                for ln in gpu.findall(tag):
                    target = (ln.get("target") or "").lower()
                    count = _int(ln, "count", 1)      # 1 .. MAX_LINK_COUNT when given (checked on reading)
                    count = count if count <= MAX_LINK_COUNT else 1
                    peer = busid_to_gpu.get((host.key, target))
                    tclass = (ln.get("tclass") or "").lower()
                    if target == busid:
                        selfish.append(busid)
                    elif peer is not None:
                        g.arc(key, peer, per_link, count, tag)
                        host_links += count
                    elif not tclass or _is_gpu_class(tclass):
                        # NCCL needs tclass, and a GPU target must be in the file: a lost or mistyped busid
                        raise TopologyError(f"{name}: GPU {busid} has an <{tag}> to target=\"{_too_long(target)}\" "
                                            f"but the host has no GPU with that busid"
                                            f"{'' if tclass else ' and no tclass says it is an NVSwitch (0x068000)'}")
                    elif tclass == "0x068000" or tag == "nvlink":
                        nvswitch = nvswitch or g.switch(f"{host.key}/nvswitch")
                        g.arc(key, nvswitch, per_link, count, tag)    # several NVSwitches add up: one node
                        g.arc(nvswitch, key, per_link, count, tag)
                        host_links += count
        if len(host.gpus) > 1 and not host_links:
            sms = sorted({g_.get("sm", "") for _, _, g_, _ in host.gpus if g_ is not None} - {""})
            what = f"sm {'/'.join(sms)}" if sms else "no sm given"
            pcie_only.append(f"{_host(host.key)} has {len(host.gpus)} GPUs ({what})")
        # inter-socket links
        for i, (ca, cpu_a) in enumerate(host.cpus):
            for cb, _ in host.cpus[i + 1:]:
                g.link(ca, cb, _smp_bw(cpu_a))
    if pcie_only:               # one line for all such hosts: a 100-node join gives one warning, not 100
        more = f" (and {len(pcie_only) - 1} more host(s) like it)" if len(pcie_only) > 1 else ""
        g.notes.append(f"{_brief_name(name)}: {pcie_only[0]}{more} but no <nvlink> or <xgmi> entry: modelled "
                       f"PCIe-only, GPUs talk through PCIe switches and CPUs (if the machine has NVLink, dump its "
                       f"topology with NCCL_TOPO_DUMP_FILE)")
    if selfish:
        g.notes.append(f"{_brief_name(name)}: {len(selfish)} GPU(s) list an NVLink/xGMI link to themselves, ignored "
                       f"(e.g. {selfish[0]})")
    params = [("source", "nccl-topo-xml"), ("hosts", str(len(hosts))),
              ("nics", ";".join(f"{n}@{bw:g}GB/s" for h in hosts.values() for _, bw, n in h.nics) or "none")]
    if len(hosts) > 1:
        net = g.switch("network")
        for host in hosts.values():
            if not host.nics:
                raise TopologyError(f"{name}: cannot join {_host(host.key)} to the others: "
                                    f"it has no NIC in the file")
            for key, bw, _ in host.nics:
                g.switch(key)            # a NIC forwards between PCIe and the network
                g.link(key, net, bw, kind="net")
    # on one host NICs carry no traffic between its GPUs: their nodes are never registered, so
    # build() drops their edges
    return params


def _import_xml(roots: Sequence[tuple[etree._Element, str]], name: str) -> tuple[Topology, list[str]]:
    g = _Graph()
    hosts: dict[str, _Host] = {}
    dialects = set()
    total = (0, 0)
    for root, label in roots:      # every file counted before any is walked
        if root.tag == "graphs":
            raise TopologyError(f"{label}: an NCCL_GRAPH_FILE (the rings and trees NCCL chose), not a topology; "
                                f"import the NCCL_TOPO_DUMP_FILE of the same run")
        if root.tag != "system":
            raise TopologyError(f"{label}: not an NCCL topology file (root element <{root.tag}>, expected <system>)")
        total = _count_system(root, label, total)
    for i, (root, label) in enumerate(roots):
        dialects.add("rccl" if root.get("version") == "2" else "nccl")
        before = sum(len(h.gpus) for h in hosts.values())
        _walk_system(root, i, g, hosts, label)
        if sum(len(h.gpus) for h in hosts.values()) == before:
            raise TopologyError(f"{label}: no GPU in this file: its <pci> entries carry no class or <gpu> (an "
                                f"NCCL_TOPO_FILE input that NCCL completes from the live machine); dump the real "
                                f"topology with NCCL_TOPO_DUMP_FILE=topo.xml and import that")
    params = _finish_hosts(g, hosts, name)
    params.append(("dialect", "+".join(sorted(dialects))))
    topo = g.build(name, params)
    return topo, g.notes + g.bandwidth_warnings(name)


# --------------------------------------------------------------------------- smi matrices
_DEV = re.compile(r"^(GPU\d+|NIC\d+|mlx\d*_\d+|[a-z]+\d*_\d+)$")
# nvidia-smi topo -m cells as codes: NV# is its link count (1 .. MAX_LINK_COUNT), the others below 0
_X, _SYS, _NODE, _PHB, _PXB, _PIX, _OTHER = -1, -2, -3, -4, -5, -6, -7
_CELLS = {"X": _X, "SYS": _SYS, "SOC": _SYS, "NODE": _NODE, "PHB": _PHB, "PXB": _PXB, "PIX": _PIX,
          **{f"NV{k}": k for k in range(1, MAX_LINK_COUNT + 1)}}


def _smi_matrix(lines: Sequence[str], start: int, name: str) -> tuple[list[str], dict[str, list[str]]]:
    """Column names of the header at ``start`` and every row's cells after its name (not cut to the
    columns: the CPU affinity follows them).  The column count is bounded before rows are read."""
    header = lines[start].split()
    cols = []
    for tok in header:
        if not _DEV.match(tok):
            break
        cols.append(tok)
    ngpus = sum(1 for c in cols if c.startswith("GPU"))
    if ngpus > MAX_MATRIX_GPUS:
        raise TopologyError(f"{name}: the matrix has {ngpus} GPU columns, more than {MAX_MATRIX_GPUS} (it has "
                            f"GPUs^2 cells; no host has near this many GPUs)")
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1:]:
        toks = line.split()
        if not toks or not _DEV.match(toks[0]):
            break
        rows[toks[0]] = toks[1:]
    return cols, rows


def _smi_codes(cols: list[str], rows: dict[str, list[str]], gpus: list[str], name: str,
               cells: dict[str, int], notes: list[str]) -> list[list[int]]:
    """The GPU x GPU block as codes, row by row; a ragged row, a misplaced X or an NV# cell out of
    range is refused, other unknown words are noted once and read as ``_OTHER``."""
    where = {c: i for i, c in enumerate(cols)}
    idx = [where[gp] for gp in gpus]
    contiguous = idx == list(range(len(gpus)))
    unknown: dict[str, str] = {}
    out: list[list[int]] = []
    for i, a in enumerate(gpus):
        toks = rows[a]
        if len(toks) < len(cols):
            raise TopologyError(f"{name}: row {a} has {len(toks)} cells for {len(cols)} columns (a ragged matrix: "
                                f"every row needs a cell per column)")
        row_cells = toks[:len(gpus)] if contiguous else [toks[j] for j in idx]
        found = list(map(cells.get, row_cells))      # C-speed; None marks a word not in the table
        codes: list[int] = found  # type: ignore[assignment]  # the Nones are replaced just below
        if None in found:                             # the slow path, for those words only
            for j, c in enumerate(row_cells):
                if found[j] is not None:
                    continue
                up = c.upper()
                m = re.fullmatch(r"NV([0-9]+)", up)
                if m:
                    if len(m.group(1)) > 6 or not 1 <= int(m.group(1)) <= MAX_LINK_COUNT:
                        raise TopologyError(f"{name}: cell {_too_long(c)!r} between {a} and {gpus[j]}: an NVLink "
                                            f"count must be 1..{MAX_LINK_COUNT}")
                    codes[j] = int(m.group(1))
                else:
                    codes[j] = cells.get(up, _OTHER)
                    if codes[j] == _OTHER:
                        unknown.setdefault(_too_long(c), f"{a}-{gpus[j]}")
        if codes[i] != _X or codes.count(_X) != 1:
            bad = next(j for j, c in enumerate(codes) if (c == _X) != (j == i))
            raise TopologyError(f"{name}: row {a}: the cell under {gpus[bad]} is {row_cells[bad]!r}; only the "
                                f"diagonal is X (a missing or extra cell shifts the row)")
        out.append(codes)
    for word, pair in unknown.items():
        notes.append(f"{name}: cell {word!r} ({pair}) is not an nvidia-smi relation (X, NV#, PIX, PXB, PHB, NODE, "
                     f"SYS); read as a PCIe path through the CPU")
    return out


def _import_nvidia_smi(text: str, name: str) -> tuple[Topology, list[str]]:
    import numpy as np

    lines = text.splitlines()
    # the header's first token is GPU0 and its second is not the diagonal "X" of the GPU0 row
    start = None
    for i, ln in enumerate(lines):
        head = ln.split(None, 2)
        if head[:1] == ["GPU0"] and (len(head) == 1 or head[1] != "X"):
            start = i
            break
    if start is None:
        raise TopologyError(f"{name}: no 'GPU0 GPU1 ...' header line: not nvidia-smi topo -m output")
    cols, rows = _smi_matrix(lines, start, name)
    gpus = [c for c in cols if c.startswith("GPU")]
    n = len(gpus)
    if n < 1 or any(gp not in rows for gp in gpus):
        raise TopologyError(f"{name}: the matrix does not list every GPU row")
    notes: list[str] = []
    m = np.array(_smi_codes(cols, rows, gpus, name, _CELLS, notes), dtype=np.int16).reshape(n, n)
    g = _Graph()
    g.gpus = [f"gpu{i}" for i in range(n)]
    nv = np.where(m > 0, m, 0)
    if nv.any() and int(nv.sum(axis=1).max()) > MAX_NVLINKS_PER_GPU:
        sw = g.switch("nvswitch")
        for i, links in enumerate(nv.max(axis=1).tolist()):
            if links:
                g.link(g.gpus[i], sw, NVLINK_DEFAULT, links, "nvlink")
    else:
        for i, j in zip(*np.nonzero(nv)):
            g.arc(g.gpus[int(i)], g.gpus[int(j)], NVLINK_DEFAULT, int(nv[i, j]))
    # sockets from the CPU Affinity column when every GPU row has one (NV# cells hide the PCIe relation)
    affinity = [rows[a][len(cols)] if len(rows[a]) > len(cols) else "" for a in gpus]
    if all(affinity) and all(v.upper() != "N/A" for v in affinity):
        ids = {v: k for k, v in enumerate(dict.fromkeys(affinity))}
        aff = np.array([ids[v] for v in affinity])
        same = aff[:, None] == aff[None, :]
        socket = same & (m != _SYS)        # an NV# pair on one socket is a NODE pair
        group = same & ((m == _PIX) | (m == _PXB))
    else:
        socket = m != _SYS
        group = (m == _PIX) | (m == _PXB)
    _pcie_tree(g, socket, group, name)
    if n > 1 and not nv.any():
        notes.append(f"{name}: {n} GPUs but no NV# cell: modelled PCIe-only, GPUs talk through PCIe switches "
                     f"and CPUs")
    params = [("source", "nvidia-smi topo -m"),
              ("nics", ",".join(c for c in cols if not c.startswith("GPU")) or "none")]
    return g.build(name, params), notes + g.bandwidth_warnings(name)


def _components(adjacency: np.ndarray) -> list[int]:
    """Connected-component labels over the upper triangle of a boolean matrix, numbered by first
    member (the old pairwise union-find's order)."""
    import numpy as np
    from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
    from scipy.sparse.csgraph import connected_components  # type: ignore[import-untyped]

    _, labels = connected_components(csr_matrix(np.triu(adjacency, 1)), directed=False)
    first: dict[int, int] = {}
    return [first.setdefault(int(lab), i) for i, lab in enumerate(labels.tolist())]


def _pcie_tree(g: _Graph, socket_adj: np.ndarray, group_adj: np.ndarray, name: str) -> None:
    """CPU nodes per group of GPUs not separated by SYS; PCIe switch nodes per PIX/PXB group."""
    n = len(g.gpus)
    socket, group = _components(socket_adj), _components(group_adj)
    nsockets = len(set(socket))
    if nsockets > MAX_SYSTEM_CPUS:
        raise TopologyError(f"{name}: {nsockets} CPU sockets (groups of GPUs apart by SYS), more than "
                            f"{MAX_SYSTEM_CPUS} (CPUs are joined pairwise; hosts have at most 16)")
    size: dict[int, int] = {}
    for r in group:
        size[r] = size.get(r, 0) + 1
    cpus: dict[int, str] = {}
    for i in range(n):
        if socket[i] not in cpus:
            cpus[socket[i]] = g.switch(f"cpu{len(cpus)}")
        cpu = cpus[socket[i]]
        if size[group[i]] > 1:
            sw = g.switch(f"pcie-switch{group[i]}")     # named by its first member
            g.link(sw, cpu, PCI_GEN4_X16)
            g.link(g.gpus[i], sw, PCI_GEN4_X16)
        else:
            g.link(g.gpus[i], cpu, PCI_GEN4_X16)
    keys = sorted(cpus.values())
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            g.link(a, b, 10.0)


def _import_rocm_smi(text: str, name: str) -> tuple[Topology, list[str]]:
    lines = text.splitlines()
    start = None
    for i, ln in enumerate(lines):
        if "Link Type between two GPUs" in ln:
            start = i + 1
            break
    if start is None:
        raise TopologyError(f"{name}: no 'Link Type between two GPUs' block: not rocm-smi --showtopo output")
    cols, rows = _smi_matrix(lines, start, name)
    gpus = [c for c in cols if c.startswith("GPU")]
    if any(gp not in rows for gp in gpus):
        raise TopologyError(f"{name}: the link type matrix does not list every GPU row")
    numa = {f"GPU{m.group(1)}": int(m.group(2)) if len(m.group(2)) <= 9 else -1
            for m in re.finditer(r"GPU\[(\d+)\]\s*:\s*\(Topology\) Numa Node:\s*(\d+)", text)}
    where = {c: i for i, c in enumerate(cols)}
    g = _Graph()
    g.gpus = [f"gpu{i}" for i in range(len(gpus))]
    cpus: dict[int, str] = {}
    xgmi = 0
    for i, a in enumerate(gpus):
        toks = rows[a]
        if len(toks) < len(cols):
            raise TopologyError(f"{name}: row {a} has {len(toks)} cells for {len(cols)} columns (a ragged matrix: "
                                f"every row needs a cell per column)")
        node = numa.get(a, 0)
        if not 0 <= node <= _MAX_INT32:
            raise TopologyError(f"{name}: {a}'s Numa Node is out of range")
        if node not in cpus and len(cpus) >= MAX_SYSTEM_CPUS:
            raise TopologyError(f"{name}: more than {MAX_SYSTEM_CPUS} NUMA nodes (CPUs are joined pairwise; hosts "
                                f"have at most 16)")
        cpu = cpus.setdefault(node, g.switch(f"cpu{node}"))
        g.link(g.gpus[i], cpu, PCI_GEN4_X16)
        for j, b in enumerate(gpus):
            if i != j and toks[where[b]].upper() == "XGMI":
                xgmi += 1
                if xgmi > MAX_FILE_LINKS:
                    raise TopologyError(f"{name}: more than {MAX_FILE_LINKS} XGMI pairs, the most links a "
                                        f"topology may have")
                g.arc(g.gpus[i], g.gpus[j], XGMI_BW, 1, "xgmi")
    keys = sorted(cpus.values())
    for i, a2 in enumerate(keys):
        for b2 in keys[i + 1:]:
            g.link(a2, b2, 16.0)
    notes = [f"{name}: {len(gpus)} GPUs but no XGMI pair: modelled PCIe-only"] if len(gpus) > 1 and not xgmi else []
    return g.build(name, [("source", "rocm-smi --showtopo")]), notes + g.bandwidth_warnings(name)


# --------------------------------------------------------------------------- entry points
def _kind(text: str) -> str:
    s = text.lstrip()
    if s.startswith("<"):
        return "xml"
    if "ROCm System Management Interface" in text or "Link Type between two GPUs" in text:
        return "rocm-smi"
    return "nvidia-smi"


def _parse_xml(text: str, label: str) -> etree._Element:
    from lxml import etree  # imported here: every command loads this module (the nccl: family)

    try:
        return etree.fromstring(text.encode("utf-8"), etree.XMLParser(remove_comments=True))
    except etree.XMLSyntaxError as exc:
        raise TopologyError(f"{label}: not well-formed XML: {exc}") from exc


def _import_one(text: str, label: str) -> tuple[Topology, list[str]]:
    name = f"nccl:{Path(label).name}"
    kind = _kind(text)
    if kind == "xml":
        return _import_xml([(_parse_xml(text, label), label)], name)
    if kind == "rocm-smi":
        return _import_rocm_smi(text, name)
    return _import_nvidia_smi(text, name)


def import_text(text: str, label: str = "<text>") -> Topology:
    """One file's text: NCCL/RCCL topology XML, nvidia-smi topo -m or rocm-smi --showtopo."""
    return _import_one(text, label)[0]


def import_with_warnings(paths: Sequence[str | Path]) -> tuple[Topology, list[str]]:
    """:func:`import_files`, and one line per thing a user must know about the result (a host of
    several GPUs without NVLink/xGMI, an implausible link bandwidth, an entry ignored)."""
    if not paths:
        raise TopologyError("no topology file given")
    texts: list[tuple[str, str]] = []
    for raw in paths:
        p = Path(raw)
        data = read_input(p, MAX_TOPOLOGY_BYTES, TopologyError, f"topology file {show(str(p))}")
        texts.append((data.decode("utf-8", errors="replace"), str(p)))
    if len(texts) == 1:
        return _import_one(*texts[0])
    kinds = {_kind(t) for t, _ in texts}
    if kinds != {"xml"}:
        raise TopologyError("several files can be joined only when all are NCCL topology XML (one per node)")
    name = "nccl:" + "+".join(Path(label).name for _, label in texts)
    return _import_xml([(_parse_xml(t, label), label) for t, label in texts], name)


def import_files(paths: Sequence[str | Path]) -> Topology:
    """One machine per file (NCCL XML files are joined through a network switch); a single
    nvidia-smi or rocm-smi file."""
    return import_with_warnings(paths)[0]


def import_command(files: Sequence[str], output: str | None) -> int:
    """``collc topology import FILE... [-o topo.yaml]``: summary, and the file when asked."""
    import json

    import yaml  # type: ignore[import-untyped]

    if output:
        suffix = Path(output).suffix.lower()
        if suffix not in (".yaml", ".yml", ".json"):
            raise TopologyError(f"-o {show(output)}: use a .yaml, .yml or .json name")
        output_file(output, error=TopologyError)       # before any work, as every command does
    topo, warnings = import_with_warnings(files)
    data = topo.to_dict()
    if output:
        # libyaml's emitter when present: the pure-Python one takes 1.5 minutes for 400k links
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = json.dumps(data, indent=2) + "\n" if suffix == ".json" else yaml.dump(data, Dumper=dumper,
                                                                                     sort_keys=False)
        write_file(output, text, encoding="utf-8")
    params = dict(topo.params)
    nvl = sum(1 for lk in topo.links if lk.src < topo.nranks and lk.dst < topo.nranks)
    print(f"{topo.name}: {topo.nranks} GPUs, {topo.nswitches} switch nodes, {len(topo.links)} directed links "
          f"({nvl} GPU-to-GPU), source {params.get('source')}, {params.get('hosts', '1')} host(s)")
    bws = sorted({lk.bandwidth for lk in topo.links})
    print(f"  link bandwidths (GB/s per link): {', '.join(f'{b:g}' for b in bws)}")
    if params.get("nics", "none") != "none":
        print(f"  NICs: {params['nics']}")
    if output:
        print(f"wrote {output}; use it as --topology {output}")
    for line in warnings:
        print(f"collc: warning: {one_line(line)}", file=sys.stderr)
    return 0


def _parse_nccl_spec(args: str, options: str | None) -> Topology:
    files = [a for a in args.split(",") if a]
    if options:   # a Windows-free path never holds ':', so OPTIONS is a path continuation
        raise TopologyError(f"nccl: takes FILE[,FILE...] (one per node), got an extra field {options!r}")
    for f in files:
        if not Path(f).is_file():
            raise TopologyError(f"nccl:{args}: no such file {f}")
    return import_files(files)


register_family("nccl", _parse_nccl_spec,
                "a real machine: NCCL topology XML (one per node, comma-separated), nvidia-smi topo -m "
                "or rocm-smi --showtopo text", "nccl:topo.xml")
