"""The ring-cycle check of a topology with switches: a step passes at once when a switch after its first rank
and a switch before its second lie in one strongly connected set of switches (the one reaches the other over
switches), and is searched otherwise.  Large rail fabrics (``a100:512x64``, 32768 GPUs) used to search every
step (140 s); the answer is unchanged: every accepted step has a route, and a step between switches that do
not reach each other is still refused."""

from __future__ import annotations

import pytest

from collc.errors import TopologyError
from collc.topology import Topology, parse_spec


@pytest.mark.parametrize("spec", ["a100:4x8", "dgx-h100:3", "mi300x:2", "a100:64x64", "fattree:8", "bigraph:2x4"])
def test_every_cycle_step_of_a_switch_fabric_has_a_route(spec: str) -> None:
    topo = parse_spec(spec)
    assert topo.cycle is not None
    steps = list(zip(topo.cycle, topo.cycle[1:] + topo.cycle[:1]))
    for a, b in steps[:: max(1, len(steps) // 200)]:
        assert topo.route(a, b) is not None, (spec, a, b)


def test_the_largest_rail_fabric_parses() -> None:
    assert parse_spec("a100:512x64").nranks == 32768


def _two_islands(cycle: list[int]) -> Topology:
    """Ranks 0,1 on switch 4 and ranks 2,3 on switch 5; the switches do not reach each other."""
    links = []
    for r, s in ((0, 4), (1, 4), (2, 5), (3, 5)):
        links += [{"src": r, "dst": s}, {"src": s, "dst": r}]
    links += [{"src": 1, "dst": 2}, {"src": 3, "dst": 0}]     # the only ways between the islands
    return Topology.from_dict({"name": "islands", "nranks": 4, "nswitches": 2, "links": links, "cycle": cycle})


def test_a_step_between_switches_that_do_not_reach_each_other_is_refused() -> None:
    assert _two_islands([0, 1, 2, 3]).cycle == (0, 1, 2, 3)          # 1->2 and 3->0 are links
    with pytest.raises(TopologyError, match="cycle step 0->2 has no link or switch route"):
        _two_islands([0, 2, 1, 3])
