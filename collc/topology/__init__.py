"""Network topologies: the :class:`Topology` model, generators and the spec grammar.

>>> from collc.topology import parse_spec
>>> t = parse_spec("torus:4x4")
>>> t.nranks, t.diameter(), t.route(0, 1)
(16, 4, (0, 1))
"""

from __future__ import annotations

from collc.topology.generators import complete, coords, hypercube, mesh, rank_of, ring, switch, torus
from collc.topology.model import Link, Topology
from collc.topology.spec import (FAMILIES, FamilyEntry, dump_json, list_families, load_file, parse_spec,
                                 register_family)
from collc.topology import direct_connect  # noqa: E402,F401  (registers the direct-connect families)

from collc.topology import importers as _importers  # noqa: E402,F401  registers the nccl: family
from collc.topology import fabrics  # noqa: F401,E402  (registers the a100 and mi250 families)

__all__ = [
    "Link", "Topology",
    "ring", "torus", "mesh", "hypercube", "complete", "switch", "coords", "rank_of",
    "FAMILIES", "FamilyEntry", "register_family", "list_families", "parse_spec", "load_file", "dump_json",
]
