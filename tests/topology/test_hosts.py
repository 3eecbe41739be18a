"""Hosts, IPC domains and link kinds (issue 28 part 1; docs/algorithms.md "Hosts and link kinds"):
what each generator sets, the hosts=/per-host=/mnnvl= spec options, the file format's round trip,
and the import of a two-node NCCL dump pair (one file per node, one host each)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collc.cli import main
from collc.errors import TopologyError
from collc.topology import Link, Topology, load_file, parse_spec
from collc.topology.importers import import_files
from tests._shared import have, missing, shared


@pytest.mark.parametrize("spec, hosts, kinds", [
    ("a100:2x8", "2 hosts x 8 ranks", {"nvlink": 32, "net": 64}),
    ("dgx-h100:3", "3 hosts x 8 ranks", {"nvlink": 48, "net": 96}),
    ("h100:1x8", "1 host x 8 ranks", {"nvlink": 16}),
    ("mi300x:2", "2 hosts x 8 ranks", {"xgmi": 112, "net": 64}),
    ("mi250:2", "2 hosts x 16 ranks", {"xgmi": 112, "net": 64}),
    ("mi250:8+4", "2 hosts (8, 4 ranks)", {"xgmi": 26, "net": 24}),
    ("switch:8", "1 host x 8 ranks", {"nvlink": 16}),
    ("dgx2:16", "1 host x 16 ranks", {"nvlink": 34}),
    ("ring:8", "8 hosts x 1 rank", {"net": 16}),
    ("torus:4x4", "16 hosts x 1 rank", {"net": 64}),
    ("fattree:2", "4 hosts x 1 rank", {"net": 16}),
    ("kautz:2,2", "6 hosts x 1 rank", {"net": 12}),
    ("circulant:8:1,3", "8 hosts x 1 rank", {"net": 32}),
])
def test_generator_hosts_and_kinds(spec: str, hosts: str, kinds: dict[str, int]) -> None:
    t = parse_spec(spec)
    assert t.hosts_summary() == hosts
    assert t.link_kind_counts() == kinds
    # MSCCL++ needs equal contiguous IPC domains: boxes of 8 and 4 GCDs are not
    assert t.contiguous_ipc_domains() == (spec != "mi250:8+4")
    assert Topology.from_dict(t.to_dict()) == t and parse_spec(t.name) == t


def test_boxes_are_hosts() -> None:
    t = parse_spec("a100:2x8")
    assert [t.host(r) for r in (0, 7, 8, 15)] == [0, 0, 1, 1] and t.ipc_domain(8) == 1
    assert t.host_ranks == (tuple(range(8)), tuple(range(8, 16)))
    # NVSwitch links are nvlink, NIC and IB-switch links net, whatever the hosts say
    assert t.link_kind(t.link(0, 16)) == "nvlink" and t.link_kind(t.link(0, 18)) == "net"


@pytest.mark.parametrize("spec, name, hosts, kinds", [
    ("torus:4x4:hosts=2", "torus:4x4:hosts=2", "2 hosts x 8 ranks", {"nvlink": 48, "net": 16}),
    ("ring:8:uni,per-host=4", "ring:8:uni,hosts=2", "2 hosts x 4 ranks", {"nvlink": 6, "net": 2}),
    ("circulant:16:3,4,hosts=4", "circulant:16:3,4,hosts=4", "4 hosts x 4 ranks", {"nvlink": 8, "net": 56}),
    ("ring:8:per-host=2,mnnvl=2", "ring:8:hosts=4,mnnvl=2",
     "4 hosts x 2 ranks, 2 IPC domains (multi-node NVLink)", {"nvlink": 8, "mnnvl": 4, "net": 4}),
    ("dgx-h100:4:mnnvl=4", "h100:4x8:mnnvl=4", "4 hosts x 8 ranks, 1 IPC domain (multi-node NVLink)",
     {"nvlink": 64, "net": 128}),
])
def test_host_options(spec: str, name: str, hosts: str, kinds: dict[str, int]) -> None:
    t = parse_spec(spec)
    assert (t.name, t.hosts_summary(), t.link_kind_counts()) == (name, hosts, kinds)
    assert parse_spec(t.name) == t and Topology.from_dict(t.to_dict()) == t


def test_mnnvl_joins_ipc_domains() -> None:
    t = parse_spec("a100:4x8:mnnvl=2")
    assert [t.ipc_domain(r) for r in (0, 8, 16, 31)] == [0, 0, 1, 1] and t.nipc_domains == 2
    assert t.to_dict()["ipc_domains"] == [0, 0, 1, 1]


@pytest.mark.parametrize("spec, needle", [
    ("torus:4x4:hosts=3", "hosts=3 does not divide the 16 ranks"),
    ("ring:8:per-host=3", "per-host=3 does not divide"),
    ("ring:8:hosts=2,per-host=4", "not both"),
    ("ring:8:hosts=2,hosts=2", "given twice"),
    ("ring:8:hosts=0", "at least 1"),
    ("ring:8:hosts=x", "hosts must be a positive integer"),
    ("a100:2x8:hosts=1", "places its ranks on hosts itself (2 hosts x 8 ranks)"),
    ("switch:8:per-host=4", "places its ranks on hosts itself"),
    ("a100:3x8:mnnvl=2", "mnnvl=2 does not divide the 3 hosts"),
])
def test_bad_host_options(spec: str, needle: str) -> None:
    with pytest.raises(TopologyError, match=None) as exc:
        parse_spec(spec)
    assert needle in str(exc.value) and spec in str(exc.value)


def test_file_hosts_kinds_and_defaults(tmp_path: Path) -> None:
    f = tmp_path / "two.json"
    f.write_text(json.dumps({"nranks": 4, "hosts": [0, 0, 1, 1], "links": [
        {"src": 0, "dst": 1, "bidirectional": True, "kind": "nvlink"},
        {"src": 1, "dst": 2, "bidirectional": True},
        {"src": 2, "dst": 3, "bidirectional": True, "kind": "pcie"}]}))
    t = load_file(f)
    assert t.hosts_summary() == "2 hosts x 2 ranks" and t.link_kind_counts() == {"nvlink": 2, "pcie": 2, "net": 2}
    assert t.link(1, 2).kind is None and t.link_kind(t.link(1, 2)) == "net"    # derived, not stored
    # without hosts a file is one host per rank, as a direct-connect graph
    f.write_text(json.dumps({"nranks": 2, "links": [{"src": 0, "dst": 1, "bidirectional": True}]}))
    assert load_file(f).hosts == (0, 1)


@pytest.mark.parametrize("data, needle", [
    ({"nranks": 2, "hosts": [0]}, "hosts has 1 entries but there are 2 ranks"),
    ({"nranks": 2, "hosts": [0, 2]}, "none skipped; 1 has no rank"),
    ({"nranks": 2, "hosts": "01"}, "hosts must be a list of integers"),
    ({"nranks": 2, "hosts": [0, 1], "ipc_domains": [0, 0, 0]}, "ipc_domains has 3 entries but there are 2 hosts"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 1, "kind": "fiber"}]}, "kind must be one of nvlink, xgmi"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 1, "kind": "nvlink"}]}, "is nvlink but joins host 0 and host 1"),
    ({"nranks": 2, "ipc_domains": [0, 1], "links": [{"src": 0, "dst": 1, "kind": "mnnvl"}]},
     "is mnnvl but joins hosts of different IPC domains"),
])
def test_bad_file_hosts(data: dict[str, object], needle: str) -> None:
    with pytest.raises(TopologyError) as exc:
        Topology.from_dict(data)
    assert needle in str(exc.value)


def test_show_json_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for spec in ("a100:2x8", "ring:8:hosts=4,mnnvl=2", "torus:4x4"):
        assert main(["topology", "show", spec, "--json"]) == 0
        text = capsys.readouterr().out
        f = tmp_path / "t.json"
        f.write_text(text)
        assert main(["topology", "show", str(f), "--json"]) == 0
        assert capsys.readouterr().out == text
        assert load_file(f) == parse_spec(spec)


def test_transpose_and_with_hosts_keep_hosts() -> None:
    t = parse_spec("ring:8:uni,hosts=2")
    assert t.transpose().hosts == t.hosts and t.transpose().transpose() == t
    assert parse_spec("ring:4").with_hosts((0, 0, 1, 1)).hosts_summary() == "2 hosts x 2 ranks"
    odd = Topology("odd", 4, (Link(0, 1), Link(1, 0)), hosts=(0, 1, 0, 1))
    assert not odd.contiguous_ipc_domains()      # MSCCL++'s rank / nranksPerIpcDomain would misjudge it


NCCL = ("corpora", "nccl-topo")


@pytest.mark.skipif(not have(*NCCL), reason=missing(*NCCL))
def test_import_two_nodes_one_host_each(tmp_path: Path) -> None:
    """Two NCCL_TOPO_DUMP_FILEs (the same H800 box dumped on two nodes) join as two hosts: NVLink
    inside each, PCIe to the NICs, the NICs on the network."""
    dump = str(shared(*NCCL, "yccl_8x-h800_topo.xml"))
    t = import_files([dump, dump])
    assert t.hosts_summary() == "2 hosts x 8 ranks" and t.contiguous_ipc_domains()
    kinds = t.link_kind_counts()
    assert set(kinds) == {"nvlink", "pcie", "net"} and kinds["nvlink"] == 32
    assert t.ipc_domain(0) != t.ipc_domain(8)
    one = import_files([dump])
    assert one.hosts_summary() == "1 host x 8 ranks" and "net" not in one.link_kind_counts()
    out = tmp_path / "two.json"
    assert main(["topology", "import", dump, dump, "-o", str(out)]) == 0
    assert load_file(out).hosts == t.hosts and load_file(out).link_kind_counts() == kinds


@pytest.mark.skipif(not have(*NCCL), reason=missing(*NCCL))
def test_import_matrices_are_one_host() -> None:
    rocm = import_files([str(shared(*NCCL, "nvidia-smi", "mi308x_rocm-smi_showtopo.txt"))])
    assert rocm.hosts_summary() == "1 host x 8 ranks" and rocm.link_kind_counts()["xgmi"] == 56
    smi = import_files([str(shared(*NCCL, "nvidia-smi", "h100-sxm_nv18_numa_topo-m.txt"))])
    assert smi.link_kind_counts()["nvlink"] == 16
