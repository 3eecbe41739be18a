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
  (Mb/s); a single host's NICs are listed in ``params`` only.
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

>>> t = import_text('''<system version="1"><cpu numaid="0" vendor="AuthenticAMD">
...  <pci busid="0000:01:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
...   <gpu dev="0" sm="80" rank="0"/></pci>
...  <pci busid="0000:02:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
...   <gpu dev="1" sm="80" rank="1"/></pci></cpu></system>''', "box.xml")
>>> t.nranks, t.nswitches, t.link(0, 2).bandwidth, t.route(0, 1)
(2, 1, 24.0, (0, 2, 1))
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml import etree  # type: ignore[import-untyped]

from collc.errors import TopologyError
from collc.inputs import MAX_TOPOLOGY_BYTES, output_file, read_input, show
from collc.outputs import write_file
from collc.topology.model import MAX_CYCLE_SEARCH_RANKS, Link, Topology
from collc.topology.spec import register_family

__all__ = ["import_files", "import_text", "import_command", "NVLINK_BW", "PCI_BW"]

#: NCCL's effective NVLink bandwidth per link (GB/s) by compute capability (src/graph/topo.h).
NVLINK_BW = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 89: 12.0, 90: 20.6, 100: 40.1}
NVLINK_DEFAULT = 20.0
PCI_BW = 12.0                # NCCL's PCI_BW (Gen3 x16) when a file gives no usable speed
PCI_GEN4_X16 = 24.0          # what NCCL computes for 16 GT/s x16; the nvidia-smi default
XGMI_BW = 64.0               # one MI300X xGMI link, each way
MAX_NVLINKS_PER_GPU = 18     # H100/B200; more than this per GPU means an NVSwitch
_NCCL_PCI_GEN = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}  # NCCL's per-lane table


# --------------------------------------------------------------------------- graph builder
@dataclass
class _Graph:
    """Nodes by key; GPUs kept apart so they become ranks 0..n-1."""

    gpus: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    edges: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)   # undirected, sorted key
    directed: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def switch(self, key: str) -> str:
        if key not in self.switches:
            self.switches.append(key)
        return key

    def link(self, a: str, b: str, bw: float, mult: int = 1) -> None:
        if a == b:
            return
        k = (a, b) if a < b else (b, a)
        old = self.edges.get(k)
        if old is None or old[0] * old[1] < bw * mult:
            self.edges[k] = (bw, mult)

    def arc(self, a: str, b: str, bw: float, mult: int) -> None:
        """One direction only (NVLink lists are per GPU); merged with the reverse later."""
        old = self.directed.get((a, b))
        self.directed[(a, b)] = (bw, mult + (old[1] if old else 0))

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
                    links[(ids[s], ids[d])] = Link(ids[s], ids[d], bw, 0.0, mult)
        for (a, b), (bw, mult) in sorted(self.directed.items()):
            links[(ids[a], ids[b])] = Link(ids[a], ids[b], bw, 0.0, mult)
            if (ids[b], ids[a]) not in links:   # a link is symmetric even when only one side lists it
                links[(ids[b], ids[a])] = Link(ids[b], ids[a], bw, 0.0, mult)
        topo = Topology(name, len(self.gpus), tuple(links.values()), len(keep), tuple(params))
        for r in range(1, topo.nranks):
            if not topo.rank_reachable(0, r) or not topo.rank_reachable(r, 0):
                raise TopologyError(f"{name}: GPU {self.gpus[r]} is not connected to {self.gpus[0]}")
        return Topology(name, topo.nranks, topo.links, topo.nswitches, topo.params,
                        self._cycle(topo, {ids[k] for k in keep if k.endswith("nvswitch")}))

    @staticmethod
    def _cycle(topo: Topology, nvswitches: set[int]) -> tuple[int, ...]:
        """A ring over NVLink/xGMI only (direct GPU links or through an NVSwitch) when one
        exists on a machine small enough to search; else the ranks in order, which keeps
        each host's GPUs together (every rank reaches every other, so any order is a cycle)."""
        n = topo.nranks
        fast = tuple(lk for lk in topo.links if (lk.src < n and lk.dst < n) or lk.src in nvswitches
                     or lk.dst in nvswitches)
        if 2 < n <= MAX_CYCLE_SEARCH_RANKS and fast:
            found = Topology(topo.name, n, fast, topo.nswitches).hamiltonian_cycle()
            if found is not None:
                return found
        return tuple(range(n))


def _pci_bw(el: etree._Element) -> float:
    speed, width = el.get("link_speed", ""), el.get("link_width", "")
    m = re.match(r"\s*([0-9.]+)\s*GT/s", speed)
    try:
        w = int(width)
    except ValueError:
        w = 0
    if not m or w <= 0:
        return PCI_BW
    gts = float(m.group(1))
    per_lane = _NCCL_PCI_GEN.get(gts, gts * 7.5)
    return per_lane * w / 80.0


def _nvlink_bw(gpu: etree._Element) -> float:
    try:
        sm = int(gpu.get("sm", "0"))
    except ValueError:
        sm = 0
    if sm >= 100:
        return NVLINK_BW[100]
    return NVLINK_BW.get(sm, NVLINK_DEFAULT)


def _smp_bw(cpu: etree._Element) -> float:
    vendor = cpu.get("vendor", "")
    if vendor == "AuthenticAMD":
        return 16.0
    if vendor == "GenuineIntel":
        try:
            model = int(cpu.get("modelid", "0"))
        except ValueError:
            model = 0
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


def _walk_system(root: etree._Element, file_index: int, g: _Graph, hosts: dict[str, _Host],
                 label: str) -> None:
    untyped = 0
    for ci, cpu in enumerate(root.iter("cpu")):
        host_key = f"f{file_index}:{cpu.get('host_hash', 'host')}"
        host = hosts.setdefault(host_key, _Host(host_key))
        ckey = g.switch(f"{host_key}/cpu{cpu.get('numaid', ci)}")
        host.cpus.append((ckey, cpu))

        def visit(el: etree._Element, parent: str) -> None:
            nonlocal untyped
            for child in el:
                if not isinstance(child.tag, str):
                    continue   # comments
                if child.tag == "pci":
                    busid = child.get("busid", "?").lower()
                    gpu = child.find("gpu")
                    nic = child.find("nic")
                    sub_pci = child.find("pci") is not None
                    bw = _pci_bw(child)
                    if gpu is not None or (_is_gpu_class(child.get("class")) and not sub_pci):
                        key = f"{host_key}/gpu:{busid}"
                        order = (_int(gpu, "rank"), _int(gpu, "dev"), len(host.gpus)) if gpu is not None \
                            else (1 << 30, 1 << 30, len(host.gpus))
                        host.gpus.append((order, key, gpu, busid))
                        g.link(key, parent, bw)
                    elif nic is not None or (child.get("class") or "").lower().startswith("0x02"):
                        nets = child.findall(".//net")
                        speed = sum(_int(n, "speed", 0) for n in nets) / 8000.0
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
                    speed = sum(_int(n, "speed", 0) for n in nets) / 8000.0
                    key = f"{host_key}/nic:{parent}:{len(host.nics)}"
                    host.nics.append((key, speed or 12.0, ",".join(n.get("name", "?") for n in nets)))
                    g.link(key, parent, PCI_BW)
                elif child.tag == "gpu":     # a GPU without a PCI parent in the file
                    key = f"{host_key}/gpu:dev{child.get('dev', len(host.gpus))}"
                    host.gpus.append(((_int(child, "rank"), _int(child, "dev"), len(host.gpus)), key, child, ""))
                    g.link(key, parent, PCI_BW)
        visit(cpu, ckey)
    if untyped:
        g.notes.append(f"{label}: {untyped} PCI device(s) without a class ignored")


def _int(el: etree._Element | None, attr: str, default: int = 1 << 30) -> int:
    if el is None:
        return default
    text = el.get(attr)
    if text is None:
        return default
    try:
        return int(text, 0)
    except ValueError:
        return default


def _finish_hosts(g: _Graph, hosts: dict[str, _Host], name: str) -> list[tuple[str, str]]:
    """Order GPUs, add NVLink/xGMI links, CPU-CPU links and the network join."""
    busid_to_gpu: dict[tuple[str, str], str] = {}
    for host in hosts.values():
        host.gpus.sort(key=lambda item: item[0])
        for _, key, _, busid in host.gpus:
            g.gpus.append(key)
            if busid:
                busid_to_gpu[(host.key, busid)] = key
    nvl_total = 0
    for host in hosts.values():
        nvswitch: str | None = None
        for _, key, gpu, busid in host.gpus:
            if gpu is None:
                continue
            bw = _nvlink_bw(gpu)
            for tag, per_link in (("nvlink", bw), ("xgmi", XGMI_BW)):
                for ln in gpu.findall(tag):
                    target = (ln.get("target") or "").lower()
                    count = max(1, _int(ln, "count", 1))
                    peer = busid_to_gpu.get((host.key, target))
                    if target == busid:
                        g.notes.append(f"{name}: GPU {busid} lists an {tag} to itself (ignored)")
                    elif peer is not None:
                        g.arc(key, peer, per_link, count)
                        nvl_total += count
                    elif (ln.get("tclass") or "").lower() == "0x068000" or tag == "nvlink":
                        nvswitch = nvswitch or g.switch(f"{host.key}/nvswitch")
                        g.arc(key, nvswitch, per_link, count)    # several NVSwitches add up: one node
                        g.arc(nvswitch, key, per_link, count)
                        nvl_total += count
        # inter-socket links
        for i, (ca, cpu_a) in enumerate(host.cpus):
            for cb, _ in host.cpus[i + 1:]:
                g.link(ca, cb, _smp_bw(cpu_a))
    params = [("source", "nccl-topo-xml"), ("hosts", str(len(hosts))),
              ("nics", ";".join(f"{n}@{bw:g}GB/s" for h in hosts.values() for _, bw, n in h.nics) or "none")]
    if len(hosts) > 1:
        net = g.switch("network")
        for host in hosts.values():
            if not host.nics:
                raise TopologyError(f"{name}: cannot join host {host.key.split(':', 1)[1]} to the others: "
                                    f"it has no NIC in the file")
            for key, bw, _ in host.nics:
                g.switch(key)            # a NIC forwards between PCIe and the network
                g.link(key, net, bw)
    # on one host NICs carry no traffic between its GPUs: their nodes are never registered, so
    # build() drops their edges
    return params


def _import_xml(roots: Sequence[tuple[etree._Element, str]], name: str) -> Topology:
    g = _Graph()
    hosts: dict[str, _Host] = {}
    dialects = set()
    for i, (root, label) in enumerate(roots):
        if root.tag == "graphs":
            raise TopologyError(f"{label}: an NCCL_GRAPH_FILE (the rings and trees NCCL chose), not a topology; "
                                f"import the NCCL_TOPO_DUMP_FILE of the same run")
        if root.tag != "system":
            raise TopologyError(f"{label}: not an NCCL topology file (root element <{root.tag}>, expected <system>)")
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
    return topo


# --------------------------------------------------------------------------- smi matrices
_DEV = re.compile(r"^(GPU\d+|NIC\d+|mlx\d*_\d+|[a-z]+\d*_\d+)$")


def _smi_matrix(lines: Sequence[str], start: int) -> tuple[list[str], dict[str, list[str]], int]:
    header = lines[start].split()
    cols = []
    for tok in header:
        if not _DEV.match(tok):
            break
        cols.append(tok)
    rows: dict[str, list[str]] = {}
    i = start + 1
    while i < len(lines):
        toks = lines[i].split()
        if not toks or not _DEV.match(toks[0]):
            break
        rows[toks[0]] = toks[1:1 + len(cols)]
        i += 1
    return cols, rows, i


def _import_nvidia_smi(text: str, name: str) -> Topology:
    lines = text.splitlines()
    # the header's first token is GPU0 and its second is not the diagonal "X" of the GPU0 row
    start = next((i for i, ln in enumerate(lines) if ln.split()[:1] == ["GPU0"]
                  and (len(ln.split()) == 1 or ln.split()[1] != "X")), None)
    if start is None:
        raise TopologyError(f"{name}: no 'GPU0 GPU1 ...' header line: not nvidia-smi topo -m output")
    cols, rows, _ = _smi_matrix(lines, start)
    rows_full = {ln.split()[0]: ln.split()[1:] for ln in lines[start + 1:] if ln.split()[:1] and
                 _DEV.match(ln.split()[0])}
    gpus = [c for c in cols if c.startswith("GPU")]
    n = len(gpus)
    if n < 1 or any(gp not in rows for gp in gpus):
        raise TopologyError(f"{name}: the matrix does not list every GPU row")
    rel = {(a, b): rows[a][cols.index(b)].upper() for a in gpus for b in gpus if a != b}
    g = _Graph()
    g.gpus = [f"gpu{i}" for i in range(n)]
    nv = {k: int(v[2:]) for k, v in rel.items() if re.fullmatch(r"NV\d+", v)}
    per_gpu = {a: sum(c for (x, _), c in nv.items() if x == a) for a in gpus}
    if nv and max(per_gpu.values()) > MAX_NVLINKS_PER_GPU:
        sw = g.switch("nvswitch")
        for i, a in enumerate(gpus):
            links = max((c for (x, _), c in nv.items() if x == a), default=0)
            if links:
                g.link(g.gpus[i], sw, NVLINK_DEFAULT, links)
    else:
        for (a, b), c in nv.items():
            g.arc(g.gpus[gpus.index(a)], g.gpus[gpus.index(b)], NVLINK_DEFAULT, c)
    # sockets from the CPU Affinity column when every GPU row has one (NV# cells hide the PCIe relation)
    affinity = {a: (rows_full[a][len(cols)] if len(rows_full[a]) > len(cols) else "") for a in gpus}
    if all(affinity.values()) and all(v.upper() != "N/A" for v in affinity.values()):
        def relation(a: str, b: str) -> str:
            r = rel[(a, b)]
            if affinity[a] != affinity[b]:
                return "SYS"
            return "NODE" if r.startswith("NV") else r
    else:
        def relation(a: str, b: str) -> str:
            return rel[(a, b)]
    _pcie_tree(g, gpus, relation)
    params = [("source", "nvidia-smi topo -m"),
              ("nics", ",".join(c for c in cols if not c.startswith("GPU")) or "none")]
    return g.build(name, params)


def _pcie_tree(g: _Graph, gpus: list[str], rel: Callable[[str, str], str]) -> None:
    """CPU nodes per group of GPUs not separated by SYS; PCIe switch nodes per PIX/PXB group."""
    from networkx.utils import UnionFind  # type: ignore[import-untyped]  # imported lazily: slow import

    n = len(gpus)
    socket, group = UnionFind(range(n)), UnionFind(range(n))
    for i in range(n):
        for j in range(i + 1, n):
            r = rel(gpus[i], gpus[j])
            if r not in ("SYS", "SOC"):
                socket.union(i, j)
            if r in ("PIX", "PXB"):
                group.union(i, j)
    cpus: dict[int, str] = {}
    for i in range(n):
        if socket[i] not in cpus:
            cpus[socket[i]] = g.switch(f"cpu{len(cpus)}")
        cpu = cpus[socket[i]]
        members = [j for j in range(n) if group[j] == group[i]]
        if len(members) > 1:
            sw = g.switch(f"pcie-switch{members[0]}")
            g.link(sw, cpu, PCI_GEN4_X16)
            g.link(g.gpus[i], sw, PCI_GEN4_X16)
        else:
            g.link(g.gpus[i], cpu, PCI_GEN4_X16)
    keys = sorted(cpus.values())
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            g.link(a, b, 10.0)


def _import_rocm_smi(text: str, name: str) -> Topology:
    lines = text.splitlines()
    start = None
    for i, ln in enumerate(lines):
        if "Link Type between two GPUs" in ln:
            start = i + 1
            break
    if start is None:
        raise TopologyError(f"{name}: no 'Link Type between two GPUs' block: not rocm-smi --showtopo output")
    cols, rows, _ = _smi_matrix(lines, start)
    gpus = [c for c in cols if c.startswith("GPU")]
    numa = {f"GPU{m.group(1)}": int(m.group(2))
            for m in re.finditer(r"GPU\[(\d+)\]\s*:\s*\(Topology\) Numa Node:\s*(\d+)", text)}
    g = _Graph()
    g.gpus = [f"gpu{i}" for i in range(len(gpus))]
    cpus: dict[int, str] = {}
    for i, a in enumerate(gpus):
        cpu = cpus.setdefault(numa.get(a, 0), g.switch(f"cpu{numa.get(a, 0)}"))
        g.link(g.gpus[i], cpu, PCI_GEN4_X16)
        for j, b in enumerate(gpus):
            if i != j and rows[a][cols.index(b)].upper() == "XGMI":
                g.arc(g.gpus[i], g.gpus[j], XGMI_BW, 1)
    keys = sorted(cpus.values())
    for i, a2 in enumerate(keys):
        for b2 in keys[i + 1:]:
            g.link(a2, b2, 16.0)
    return g.build(name, [("source", "rocm-smi --showtopo")])


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


def import_text(text: str, label: str = "<text>") -> Topology:
    """One file's text: NCCL/RCCL topology XML, nvidia-smi topo -m or rocm-smi --showtopo."""
    name = f"nccl:{Path(label).name}"
    kind = _kind(text)
    if kind == "xml":
        return _import_xml([(_parse_xml(text, label), label)], name)
    if kind == "rocm-smi":
        return _import_rocm_smi(text, name)
    return _import_nvidia_smi(text, name)


def import_files(paths: Sequence[str | Path]) -> Topology:
    """One machine per file (NCCL XML files are joined through a network switch); a single
    nvidia-smi or rocm-smi file."""
    if not paths:
        raise TopologyError("no topology file given")
    texts: list[tuple[str, str]] = []
    for raw in paths:
        p = Path(raw)
        data = read_input(p, MAX_TOPOLOGY_BYTES, TopologyError, f"topology file {show(str(p))}")
        texts.append((data.decode("utf-8", errors="replace"), str(p)))
    if len(texts) == 1:
        return import_text(*texts[0])
    kinds = {_kind(t) for t, _ in texts}
    if kinds != {"xml"}:
        raise TopologyError("several files can be joined only when all are NCCL topology XML (one per node)")
    name = "nccl:" + "+".join(Path(label).name for _, label in texts)
    return _import_xml([(_parse_xml(t, label), label) for t, label in texts], name)


def import_command(files: Sequence[str], output: str | None) -> int:
    """``collc topology import FILE... [-o topo.yaml]``: summary, and the file when asked."""
    import json

    import yaml  # type: ignore[import-untyped]

    if output:
        suffix = Path(output).suffix.lower()
        if suffix not in (".yaml", ".yml", ".json"):
            raise TopologyError(f"-o {show(output)}: use a .yaml, .yml or .json name")
        output_file(output, error=TopologyError)       # before any work, as every command does
    topo = import_files(files)
    data = topo.to_dict()
    if output:
        text = json.dumps(data, indent=2) + "\n" if suffix == ".json" else yaml.safe_dump(data, sort_keys=False)
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
