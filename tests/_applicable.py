"""Cases drawn from the registry: every (algorithm, collective, topology) that the
registration says applies (``Algorithm.refusal`` is None).  ``tests/frontends/test_frontends.py``
proves that rule exact (every refusal is one the frontend itself would hit), so tests built
on these cases never need to skip."""

from __future__ import annotations

from collections.abc import Iterable

from collc.frontends.registry import algorithms
from collc.ir.collective import CollKind
from collc.topology import parse_spec


def applicable(specs: Iterable[str], inplace: bool = False, root: int = 0,
               kinds: Iterable[CollKind] | None = None,
               names: Iterable[str] | None = None) -> list[tuple[str, CollKind, str]]:
    wanted = set(kinds) if kinds is not None else None
    only = set(names) if names is not None else None
    out = []
    for spec in specs:
        topo = parse_spec(spec)
        for alg in algorithms():
            if only is not None and alg.name not in only:
                continue
            for kind in sorted(alg.collectives, key=lambda k: k.value):
                if wanted is not None and kind not in wanted:
                    continue
                if alg.refusal_of_kind(topo, kind, inplace, root) is None:
                    out.append((alg.name, kind, spec))
    return out
