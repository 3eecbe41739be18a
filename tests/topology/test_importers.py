"""Topology import on every file of the shared corpus (``../shared/corpora/nccl-topo``,
including ``nvidia-smi/``), read in place: each machine imports with the facts read off
its file, and a ring and a MultiTree allreduce built on it pass ``collc check``."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.cli import main
from collc.driver import compile_xml
from collc.errors import TopologyError
from collc.ir.collective import CollKind
from collc.topology import parse_spec
from collc.topology.importers import import_files
from tests.runtime_tests._shared import shared

TOPO = shared("corpora", "nccl-topo")

# file -> (GPUs, GPU-to-GPU directed links, fastest link GB/s); None: refused, with the reason's key words
FACTS: dict[str, tuple[int, int, float] | str] = {
    "aws_g5.48xl-topo.xml": "no GPU in this file",
    "aws_p5.48xl-topo_2025-06.xml": "no GPU in this file",
    "aws_p5.48xl-topo_pr1226.xml": (8, 0, 48.0),          # no nvlink in the file; GPUs at 32 GT/s x16
    "azure_ncv4-topo.xml": (4, 0, 16.0),                  # self-targeted nvlink ignored
    "azure_ndv2-topo.xml": (8, 0, 24.0),                  # GPUs as bare class 0x0302 leaves
    "azure_ndv5-topo.xml": (8, 0, 48.0),
    "graphs/azure_ncv4-graph.xml": "NCCL_GRAPH_FILE",
    "graphs/yccl_4x-rtxa6000_graph.xml": "NCCL_GRAPH_FILE",
    "ibm-cloud_8x-h100_topo.xml": (8, 0, 20.6),           # 18 NVLinks per GPU into NVSwitches
    "nvidia-smi/dgx1_v100_mlx5-rows_topo-m.txt": (8, 32, 24.0),   # hybrid cube-mesh: 4 NV peers per GPU
    "nvidia-smi/gcp-a4_b200_8nic_topo-m.txt": (8, 0, 24.0),
    "nvidia-smi/h100-sxm_nv18_numa_topo-m.txt": (8, 0, 24.0),
    "nvidia-smi/mi308x_rocm-smi_showtopo.txt": (8, 56, 64.0),     # all-to-all xGMI
    "panlichen_8x-rtx3090_topo.xml": (8, 0, 24.0),
    "rccl/rccl_topo_4p3l.xml": (4, 12, 64.0),             # 3 xGMI links per MI100
    "rccl/rccl_topo_8p_940.xml": (8, 56, 64.0),
    "yccl_4x-rtxa6000_topo.xml": (4, 0, 12.0),
    "yccl_8x-h800_topo.xml": (8, 0, 48.0),
}


def _files() -> list[Path]:
    if not TOPO.is_dir():
        return []
    return sorted(p for p in TOPO.rglob("*") if p.is_file() and p.name != "MANIFEST.md")


def _params() -> list[object]:
    files = _files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"topology corpus not found at {TOPO}"))]
    return [pytest.param(p, id=p.relative_to(TOPO).as_posix()) for p in files]


def test_corpus_count() -> None:
    if not TOPO.is_dir():
        pytest.skip(f"topology corpus not found at {TOPO}")
    assert sorted(p.relative_to(TOPO).as_posix() for p in _files()) == sorted(FACTS)


@pytest.mark.parametrize("path", _params())
def test_import_and_build(path: Path) -> None:
    fact = FACTS[path.relative_to(TOPO).as_posix()]
    if isinstance(fact, str):
        with pytest.raises(TopologyError, match=fact):
            import_files([path])
        return
    n, gpu_links, fastest = fact
    topo = import_files([path])
    assert topo.nranks == n
    assert sum(1 for lk in topo.links if lk.src < n and lk.dst < n) == gpu_links
    assert max(lk.bandwidth for lk in topo.links) == fastest
    for alg in ("ring", "multitree"):
        result = compile_xml(topo, alg, CollKind.ALLREDUCE)
        assert result.report.ok, (alg, [f.message for f in result.report.findings][:3])


def _one(rel: str) -> Path:
    p = TOPO / rel
    if not p.is_file():
        pytest.skip(f"{rel} not in the corpus at {TOPO}")
    return p


def test_nvswitch_and_nvlink_counts() -> None:
    h800 = import_files([_one("yccl_8x-h800_topo.xml")])
    # 4 nvlink entries of count 2 per GPU into NVSwitches: one NVSwitch node, 8 links per GPU at 20.6 GB/s
    nvs = [s for s in h800.switches if len(h800.in_neighbors(s)) == 8 and
           all(h800.link(r, s) is not None for r in range(8))]
    assert len(nvs) == 1
    assert {(h800.link(r, nvs[0]).multiplicity, h800.link(r, nvs[0]).bandwidth) for r in range(8)} == {(8, 20.6)}  # type: ignore[union-attr]
    ibm = import_files([_one("ibm-cloud_8x-h100_topo.xml")])   # counts 5/5/4/4 = 18
    assert {lk.multiplicity for lk in ibm.links if lk.bandwidth == 20.6} == {18}
    dgx1 = import_files([_one("nvidia-smi/dgx1_v100_mlx5-rows_topo-m.txt")])
    assert dgx1.link(0, 3).multiplicity == 2 and dgx1.link(0, 1).multiplicity == 1  # type: ignore[union-attr]
    assert dgx1.link(0, 5) is None and dgx1.route(0, 5) is not None   # SYS: through both CPUs
    cyc = dgx1.hamiltonian_cycle()   # the ring ring-allreduce uses runs over NVLink only
    assert cyc is not None and all(dgx1.link(a, b) is not None for a, b in zip(cyc, cyc[1:] + cyc[:1]))


def test_multi_node_join() -> None:
    a, b = _one("yccl_8x-h800_topo.xml"), _one("ibm-cloud_8x-h100_topo.xml")
    topo = import_files([a, b])
    assert topo.nranks == 16 and dict(topo.params)["hosts"] == "2"
    net = [s for s in topo.switches if len(topo.out_neighbors(s)) == 16]   # 8 NICs per host
    assert len(net) == 1
    assert sorted({topo.link(s, net[0]).bandwidth for s in topo.in_neighbors(net[0])}) == [25.0, 50.0]  # type: ignore[union-attr]
    assert topo.route(0, 15) is not None and net[0] in topo.route(0, 15)  # type: ignore[operator]
    for alg in ("ring", "multitree"):
        assert compile_xml(topo, alg, CollKind.ALLREDUCE).report.ok


def test_spec_family_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _one("rccl/rccl_topo_8p_940.xml")
    assert parse_spec(f"nccl:{path}").nranks == 8
    out = tmp_path / "mi300x.yaml"
    assert main(["topology", "import", str(path), "-o", str(out)]) == 0
    assert "8 GPUs" in capsys.readouterr().out
    assert parse_spec(str(out)).links == import_files([path]).links
    xml = tmp_path / "ring.xml"
    assert main(["build", "--topology", f"nccl:{path}", "--algorithm", "ring", "--collective", "allreduce",
                 "-o", str(xml)]) == 0
    assert main(["topology", "import", str(_one("aws_g5.48xl-topo.xml"))]) == 2
    assert "no GPU in this file" in capsys.readouterr().err
    assert main(["topology", "show", f"nccl:{tmp_path / 'missing.xml'}"]) == 2
