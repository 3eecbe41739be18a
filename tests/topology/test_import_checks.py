"""Unit checks behind ``tests/test_bad_input_topology.py``: the linear nvidia-smi import builds the
PCIe tree the matrix describes, the quick connectivity test agrees with routes, warnings come back
from the library, and topology files refuse duplicate keys and out-of-range defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.errors import TopologyError
from collc.inputs import load_json, load_yaml
from collc.topology import Topology
from collc.topology.importers import _apart_from_first, import_files, import_text, import_with_warnings
from collc.topology.model import Link

# GPU0-1 and GPU2-3 share a PCIe switch each; the pairs sit on two sockets; GPU1-2 NV2 across them
SMI = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity
GPU0\t X \tPIX\tSYS\tSYS\t0-7
GPU1\tPIX\t X \tNV2\tSYS\t0-7
GPU2\tSYS\tNV2\t X \tPXB\t8-15
GPU3\tSYS\tSYS\tPXB\t X \t8-15
"""


def test_nvidia_smi_pcie_tree() -> None:
    t = import_text(SMI, "box.txt")
    assert (t.nranks, t.nswitches) == (4, 4)          # cpu0, pcie-switch0, cpu1, pcie-switch2
    assert t.link(1, 2).multiplicity == 2 and t.link(2, 1).multiplicity == 2  # type: ignore[union-attr]
    assert t.link(0, 1) is None and t.route(0, 1) == (0, 5, 1)   # through their PCIe switch
    assert t.route(0, 3) == (0, 5, 4, 6, 7, 3)        # switch, CPU, the other CPU, switch
    # NV2 pair on two sockets: GPU1 and GPU2 are SYS apart for the PCIe tree (CPU affinity differs)
    assert t.route(1, 2) == (1, 2)


def test_quick_connectivity_agrees_with_routes() -> None:
    t = import_text(SMI, "box.txt")
    assert _apart_from_first(t) == []
    # rank 2 only by a direct link to rank 1: the quick test flags it, the exact check decides
    links = (Link(0, 3), Link(3, 0), Link(1, 3), Link(3, 1), Link(1, 2), Link(2, 1))
    t2 = Topology("t", 3, links, nswitches=1)
    assert _apart_from_first(t2) == [2]
    assert t2.rank_reachable(0, 1) and not t2.rank_reachable(0, 2)


def test_warnings_come_back_from_the_library(tmp_path: Path) -> None:
    path = tmp_path / "pcie.txt"
    path.write_text(SMI.replace("NV2", "SYS"))
    topo, warnings = import_with_warnings([path])
    assert topo == import_files([path]) and len(warnings) == 1 and "no NV# cell" in warnings[0]


@pytest.mark.parametrize("cell, message", [("NV0", "1..64"), ("NV65", "1..64"), ("nv" + "9" * 9, "1..64")])
def test_nv_cells_out_of_range(cell: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        import_text(SMI.replace("NV2", cell), "box.txt")


def test_duplicate_keys_only_when_asked() -> None:
    assert load_json('{"a": 1, "a": 2}', "x") == {"a": 2}            # JSON's own rule: the last wins
    with pytest.raises(TopologyError, match="key a is given twice"):
        load_json('{"b": {"a": 1, "a": 2}}', "x", TopologyError, unique_keys=True)
    assert load_yaml("a: 1\na: 2\n", "x") == {"a": 2}
    with pytest.raises(TopologyError, match="key a is given twice"):
        load_yaml("b:\n  - {a: 1, a: 2}\n", "x", TopologyError, unique_keys=True)
    assert load_yaml("a: &x {k: 1}\nb: *x\n", "x", TopologyError, unique_keys=True) == {"a": {"k": 1},
                                                                                       "b": {"k": 1}}


@pytest.mark.parametrize("defaults, message", [({"bandwidth": 0}, "defaults.bandwidth"),
                                               ({"bandwidth": 2e9}, "defaults.bandwidth"),
                                               ({"latency": -1}, "defaults.latency"),
                                               ({"latency": 10 ** 400}, "defaults.latency")])
def test_defaults_in_range_even_without_links(defaults: dict[str, float], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        Topology.from_dict({"nranks": 1, "defaults": defaults})
