"""``collc topology show`` prints hosts and link kinds; ``collc build --backend mscclpp`` puts transfers
between hosts on port channels (Simple and LL) and refuses what they cannot express (non-contiguous IPC
domains: exit 2, one line, no file); ``collc check
--topology`` reports the same as ``memory-channel-across-hosts`` on built and corpus plans (issue 28;
docs/mscclpp-backend.md "Across hosts").  The XML backend builds across hosts as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collc.cli import main
from tests._shared import have, missing, shared
from tests.test_bad_input import run_refused

Capture = pytest.CaptureFixture[str]
PLANS = ("corpora", "mscclpp-plans")


def test_show_prints_hosts_and_kinds(capsys: Capture) -> None:
    assert main(["topology", "show", "a100:2x8"]) == 0
    out = capsys.readouterr().out
    assert "hosts:          2 hosts x 8 ranks\n" in out and "link kinds:     nvlink 32, net 64\n" in out
    assert main(["topology", "show", "ring:8:per-host=2,mnnvl=2"]) == 0
    out = capsys.readouterr().out
    assert "hosts:          4 hosts x 2 ranks, 2 IPC domains (multi-node NVLink)" in out
    assert "link kinds:     nvlink 8, net 4, mnnvl 4" in out


@pytest.mark.parametrize("spec, protocol", [("a100:2x8", "Simple"), ("ring:4", "Simple"), ("ring:4", "LL"),
                                            ("torus:2x4:hosts=2", "Simple")])
def test_build_across_hosts_uses_port_channels(tmp_path: Path, capsys: Capture, spec: str, protocol: str) -> None:
    """Transfers between IPC domains go over port channels; the plan passes check on SPEC's hosts."""
    out = tmp_path / "p.json"
    assert main(["build", "--backend", "mscclpp", "--topology", spec, "--algorithm", "ring", "--collective",
                 "allreduce", "--protocol", protocol, "-o", str(out)]) == 0
    capsys.readouterr()
    kinds = {c["channel_type"] for g in json.loads(out.read_text())["gpus"] for c in g["channels"]}
    assert "port" in kinds
    assert main(["check", str(out), "--topology", spec]) == 0
    assert "memory-channel-across-hosts" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, needle", [
    (["--topology", "mi250:8+4"], "are not equal contiguous blocks of ranks"),
])
def test_build_refuses_what_port_channels_cannot_express(tmp_path: Path, capsys: Capture, argv: list[str],
                                                         needle: str) -> None:
    run_refused(tmp_path, capsys, ["build", "--backend", "mscclpp", *argv, "--algorithm", "ring", "--collective",
                                   "allgather", "-o", str(tmp_path / "p.json")], needle)


@pytest.mark.parametrize("spec", ["a100:1x8", "a100:2x8:mnnvl=2", "ring:8:hosts=1"])
def test_build_in_one_ipc_domain(tmp_path: Path, capsys: Capture, spec: str) -> None:
    out = tmp_path / "p.json"
    assert main(["build", "--backend", "mscclpp", "--topology", spec, "--algorithm", "ring", "--collective",
                 "allreduce", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["check", str(out), "--topology", spec]) == 0
    assert "memory-channel-across-hosts" not in capsys.readouterr().out


def test_xml_backend_builds_across_hosts(tmp_path: Path, capsys: Capture) -> None:
    """MSCCL XML runtimes connect through NCCL's transports: any host."""
    assert main(["build", "--topology", "a100:2x8", "--algorithm", "ring", "--collective", "allreduce",
                 "-o", str(tmp_path / "p.xml")]) == 0


def test_check_finds_memory_channels_across_hosts(tmp_path: Path, capsys: Capture) -> None:
    plan = tmp_path / "s8.json"
    assert main(["build", "--backend", "mscclpp", "--topology", "switch:8", "--algorithm", "ring", "--collective",
                 "allreduce", "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["check", str(plan), "--topology", "a100:2x4", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)[0]["findings"]
    across = [f for f in found if f["code"] == "memory-channel-across-hosts"]
    assert {f["severity"] for f in across} == {"error"} and len(across) == 4
    assert across[0]["message"].startswith("rank 0 -> rank 7 cross hosts (host 0 -> host 1) on a100:2x4")
    # without --topology: no verdict on placement, one info finding, the plan passes
    assert main(["check", str(plan)]) == 0
    assert "info: [placement-not-judged]" in capsys.readouterr().out
    # a topology of other size: named, not judged
    assert main(["check", str(plan), "--topology", "ring:4"]) == 1
    assert "[topology-ranks] the plan has 8 ranks but ring:4 has 4" in capsys.readouterr().out


def test_check_bad_topology_is_refused(tmp_path: Path, capsys: Capture) -> None:
    plan = tmp_path / "s4.json"
    assert main(["build", "--backend", "mscclpp", "--topology", "switch:4", "--algorithm", "ring", "--collective",
                 "allgather", "-o", str(plan)]) == 0
    capsys.readouterr()
    run_refused(tmp_path, capsys, ["check", str(plan), "--topology", "ring:4:hosts=3"], "hosts=3 does not divide")


@pytest.mark.skipif(not have(*PLANS), reason=missing(*PLANS))
@pytest.mark.parametrize("rel, nranks", [
    ("more/dsl_mn_allgather_4gpu.json", 4), ("more/dsl_mn_allgather_pkt_4gpu.json", 4),
    ("more/dsl_mn_reducescatter_pkt_4gpu.json", 4), ("more/dsl_mn_reducescatter_2gpu.json", 2),
    ("branches/caiorocha-multi_node_executor_test/test/executor-tests/execution-plans/multi_node_transfer.json", 2),
])
def test_corpus_multi_node_plans(capsys: Capture, rel: str, nranks: int) -> None:
    """The MSCCL++ DSL's multi-node plans put memory channels inside a node and port channels
    between nodes: on 2 hosts no finding; on one host per rank the memory pairs are named."""
    path = str(shared(*PLANS, rel))
    main(["check", path, "--topology", f"complete:{nranks}:hosts=2", "--json"])
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)[0]["findings"]}
    assert not codes & {"memory-channel-across-hosts", "placement-not-judged", "topology-ranks"}
    main(["check", path, "--topology", f"complete:{nranks}", "--json"])
    found = json.loads(capsys.readouterr().out)[0]["findings"]
    across = [f["message"] for f in found if f["code"] == "memory-channel-across-hosts"]
    if nranks == 4:      # ranks 0-1 and 2-3 share memory channels
        assert across and across[0].startswith("rank 0 -> rank 1 cross hosts (host 0 -> host 1)")
    else:                # port channels only
        assert not across
