"""Process groups (issue 32 items 1 and 2; docs/groups.md): the group grammar, the group's fabric
(members, the switches between them, hosts renumbered), ForestColl's optimum on a data-parallel and
a tensor-parallel group of a100:4x8 derived by hand, and every family building on a group or
refusing with its reason."""

from __future__ import annotations

from fractions import Fraction

import pytest

from collc.errors import TopologyError
from collc.frontends.forestcoll.flow import Network, optimal
from collc.frontends.registry import get
from collc.ir.collective import CollKind
from collc.sim.routing import Router
from collc.topology import Topology, parse_spec
from collc.topology.groups import describe_members, group_topology, parse_group
from tests.frontends.test_applies_agrees import build_what_applies


def _optimum(spec: str) -> Fraction:
    """ForestColl's allgather algbw optimum (GB/s) on ``spec``."""
    net = Network.of(parse_spec(spec))
    return optimal(net).algbw(net)


@pytest.mark.parametrize("text, members", [
    ("0-7", tuple(range(8))),
    ("0,8,16,24", (0, 8, 16, 24)),
    ("24,16,8,0", (24, 16, 8, 0)),              # communicator order is the order written
    ("0-1,9-10", (0, 1, 9, 10)),
    ("stride:8", (0, 8, 16, 24)),
    ("stride:8:3", (3, 11, 19, 27)),
    ("stride:16:5", (5, 21)),
    ("host:3", tuple(range(24, 32))),
    ("rail:2", (2, 10, 18, 26)),
    (" host:0 ", tuple(range(8))),
])
def test_group_grammar(text: str, members: tuple[int, ...]) -> None:
    assert parse_group(text, parse_spec("a100:4x8")) == members


@pytest.mark.parametrize("text, needle", [
    ("0-32", "rank 32 is out of range for a100:4x8 (ranks 0..31)"),
    ("0,1,1", "rank 1 is given twice"),
    ("0-3,2", "rank 2 is given twice"),
    ("", "empty group"),
    ("host:4", "a100:4x8 has no host 4 (hosts 0..3)"),
    ("rail:8", "host 0 of a100:4x8 has 8 ranks, no local index 8"),
    ("stride:0", "the stride must be at least 1"),
    ("stride:8:32", "start rank 32 is out of range"),
    ("stride:32:1", "a group needs at least 2 ranks, got 1"),
    ("5", "a group needs at least 2 ranks, got 1"),
    ("3-1", "runs backwards"),
    ("a-b", "is not a rank or a range"),
    ("box:1", "expected RANKS"),
    ("stride:8:1:2", "expected RANKS"),
    ("host:x", "the host must be a non-negative integer"),
])
def test_bad_groups(text: str, needle: str) -> None:
    with pytest.raises(TopologyError, match=None) as info:
        parse_group(text, parse_spec("a100:4x8"))
    assert needle in str(info.value)


def test_data_parallel_group_fabric() -> None:
    t = parse_spec("a100:4x8@stride:8")
    assert (t.name, t.nranks, t.family, t.hosts_summary()) == ("a100:4x8@stride:8", 4, "group", "4 hosts x 1 rank")
    assert dict(t.params) == {"parent": "a100:4x8", "members": "stride:8"}
    # left: the 4 members' NICs and the rail-0 IB switch; gone: the NVSwitches (one member each, a dead
    # end), the other 28 NICs (dead ends) and the rail-1 IB switch (no member reaches it)
    assert t.nswitches == 5 and t.link_kind_counts() == {"net": 16}
    assert all(t.link(r, 4 + r).bandwidth == 25.0 and t.link(4 + r, 8) is not None for r in range(4))
    assert t.route(0, 3) == (0, 4, 8, 7, 3) and t.cycle == (0, 1, 2, 3)
    assert parse_spec(t.name) == t and Topology.from_dict(t.to_dict()) == t
    assert parse_spec("dgx-a100:4@stride:8").name == "a100:4x8@stride:8"


def test_tensor_parallel_group_fabric() -> None:
    t = parse_spec("a100:4x8@host:2")
    assert t.nranks == 8 and t.hosts_summary() == "1 host x 8 ranks" and t.host_ranks == (tuple(range(8)),)
    # the box's NVSwitch, its 8 NICs and their rail's IB switches (a GPU's NIC reaches a NIC of its box
    # through the IB switch of its rail); NVSwitch links stay nvlink although only one host is left
    assert t.nswitches == 11 and t.link_kind_counts() == {"nvlink": 16, "net": 32}
    assert t.route(0, 1) == (0, 8, 1)


def test_group_keeps_the_kinds_and_renumbers_hosts() -> None:
    t = parse_spec("a100:4x8@8-9,24")
    assert t.host_of == (0, 0, 1) and t.hosts_summary() == "2 hosts (2, 1 ranks)"
    # ring:8:hosts=4,mnnvl=2: hosts of 2 ranks, hosts 0-1 and 2-3 in one NVLink domain each
    assert group_topology(parse_spec("ring:8:hosts=4,mnnvl=2"), (0, 1, 2, 3)).domain_of_host == (0, 0)
    assert group_topology(parse_spec("ring:8:hosts=4,mnnvl=2"), (2, 3, 4, 5)).domain_of_host == (0, 1)
    assert group_topology(parse_spec("ring:8:hosts=4,mnnvl=2"), (4, 5, 6, 7, 0)).domain_of_host == (0, 1, 1)
    assert describe_members((0, 1, 2, 8, 16, 17)) == "0-2,8,16-17"


def test_unreachable_members_are_refused() -> None:
    # rank 0 is on rail 0, rank 9 on rail 1 of another box: only the other GPUs of box 0 or 1 join them
    with pytest.raises(TopologyError, match=r"member 0 \(rank 0\) cannot reach member 1 \(rank 9\)"):
        parse_spec("a100:2x8@0,9")
    with pytest.raises(TopologyError, match="cannot reach"):
        parse_spec("torus:4x4@0,5")        # diagonal neighbours: the path runs through rank 1 or 4
    # a non-member never forwards, but a member may relay: 1 reaches 8 through rank 0's NIC
    assert parse_spec("a100:4x8@0-3,8").nranks == 5


def test_dp_group_optimum_by_hand() -> None:
    """A data-parallel group of a100:4x8 (one GPU per box, all on one rail): a member's only way out
    of its box is its own NIC, 25 GB/s each way, so an allgather, which must bring the (N-1)/N of
    the data it lacks in through that NIC, runs at best at 25 * N / (N - 1) = 100/3 GB/s for N = 4.
    Every one of the 8 groups sees the same fabric (odd GPUs on rail 1, even on rail 0)."""
    expected = Fraction(25) * 4 / 3
    for offset in range(8):
        assert _optimum(f"a100:4x8@stride:8:{offset}") == expected
    # two boxes' worth of DP (stride 16, 2 members): 25 * 2 / 1
    assert _optimum("a100:4x8@stride:16:1") == 50


def test_tp_group_optimum_by_hand() -> None:
    """A tensor-parallel group is one box: on a100:1x8 each GPU brings the 7/8 it lacks in through
    its 300 GB/s NVSwitch link, 300 * 8 / 7 GB/s.  Cut out of a100:4x8 the box keeps its NICs,
    which reach each other through their rail's IB switch: 325 GB/s into each GPU, 325 * 8 / 7."""
    one_box = Fraction(300) * 8 / 7
    assert _optimum("a100:1x8") == one_box == _optimum("a100:1x8@0-7")
    for host in range(4):
        assert _optimum(f"a100:4x8@host:{host}") == Fraction(325) * 8 / 7


def test_group_is_no_generator_family() -> None:
    """A row of a torus cut out is a ring of 4 links, not a torus: no torus routing, no Swing."""
    t = parse_spec("torus:4x4@0-3")
    assert t.family == "group" and t.dims is None and not t.is_routed()
    # a torus row would send half of it each way round
    assert dict(Router(t).shares(0, 2)) == {(0, 1): 1.0, (1, 2): 1.0}
    assert get("swing").refusal_of_kind(t, CollKind.ALLREDUCE) is not None


GROUP_SPECS = ("a100:4x8@stride:8:5", "a100:2x8@host:1", "torus:4x4@0-3", "switch:8@0,2,4,6", "mi300x:2@rail:2")


@pytest.mark.parametrize("spec", GROUP_SPECS)
def test_what_applies_on_a_group_builds(spec: str) -> None:
    """tests/frontends/test_applies_agrees.py's promise on groups: what the registry says applies
    builds and passes its check; the rest refuse with a reason."""
    built, refused = build_what_applies(spec)
    assert built > 0 and refused > 0
