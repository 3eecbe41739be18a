"""The algorithm registry and the input validation every frontend shares (collc.frontends.registry)."""

from __future__ import annotations

import shlex

import pytest

from collc.errors import CollcError, ScheduleError
from collc.frontends.registry import REGISTRY, Algorithm, Param, algorithms, build_schedule, get, register
from collc.ir.collective import CollKind
from collc.topology import parse_spec

ALGOS = algorithms()
NAMES = [a.name for a in ALGOS]


def _home(alg: Algorithm) -> str:
    """The topology of the registration's own example command (where it must apply)."""
    words = shlex.split(alg.example)
    return words[words.index("--topology") + 1]


# a topology on which each algorithm applies (used by the invalid-input tests): its example's
HOME = {a.name: _home(a) for a in ALGOS}


# ---------------------------------------------------------------------- registrations
def test_registry_lists_algorithms_sorted_and_unique() -> None:
    assert NAMES == sorted(NAMES) and len(set(NAMES)) == len(NAMES)
    assert all(a.collectives and a.collectives <= set(CollKind) for a in ALGOS)


@pytest.mark.parametrize("alg", ALGOS, ids=NAMES)
def test_the_example_topology_is_one_where_it_applies(alg: Algorithm) -> None:
    topo = parse_spec(HOME[alg.name])
    kind = CollKind.parse(shlex.split(alg.example)[shlex.split(alg.example).index("--collective") + 1])
    assert alg.refusal_of_kind(topo, kind) is None


@pytest.mark.parametrize("alg", ALGOS, ids=NAMES)
def test_registration_is_documented(alg: Algorithm) -> None:
    assert alg.collectives
    assert alg.summary and alg.reference and alg.topologies
    assert alg.example.startswith("collc build ") and f"--algorithm {alg.name}" in alg.example
    assert alg.build.__module__.startswith("collc.frontends.")
    for p in alg.params:
        assert p.doc and p.name.isidentifier()


@pytest.mark.parametrize("alg", ALGOS, ids=NAMES)
def test_frontend_module_docstring_states_an_example(alg: Algorithm) -> None:
    import importlib
    doc = importlib.import_module(alg.build.__module__).__doc__ or ""
    assert ">>>" in doc and "build_schedule" in doc


def test_get_returns_the_registration() -> None:
    assert get("ring") is REGISTRY["ring"]


def test_get_unknown_names_the_nearest_and_the_listing() -> None:
    # the whole list (over 60 names) no longer fits one 300-character error line: the nearest
    # names and the command that lists them all instead
    with pytest.raises(ScheduleError, match="unknown algorithm 'forestcol'; did you mean 'forestcoll'") as info:
        get("forestcol")
    assert "see `collc list algorithms`" in str(info.value) and len(str(info.value)) <= 300
    with pytest.raises(ScheduleError, match="unknown algorithm 'nope'; see `collc list algorithms`"):
        get("nope")


def test_registering_a_name_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register(REGISTRY["ring"])


# ---------------------------------------------------------------------- parameters
def test_param_parsing() -> None:
    b = Param("flag", bool, False, "a flag")
    assert [b.parse(x) for x in ("1", "true", "Yes", "on", "0", "false", "NO", "off")] == [True] * 4 + [False] * 4
    with pytest.raises(ScheduleError, match="not a boolean"):
        b.parse("maybe")
    i = Param("n", int, 1, "a count")
    assert i.parse("12") == 12
    with pytest.raises(ScheduleError, match="not an integer"):
        i.parse("twelve")
    c = Param("mode", str, "a", "a mode", choices=("a", "b"))
    assert c.parse("b") == "b"
    with pytest.raises(ScheduleError, match="choose one of a, b"):
        c.parse("z")


# ---------------------------------------------------------------------- invalid inputs, the same for every frontend
@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter(name: str) -> None:
    alg = get(name)
    kind = sorted(alg.collectives, key=lambda k: k.value)[0]
    with pytest.raises(ScheduleError, match=f"algorithm {name} has no parameter 'bogus'"):
        build_schedule(name, parse_spec(HOME[name]), kind, params={"bogus": "1"})


UNSUPPORTED = [(a.name, k) for a in ALGOS for k in CollKind if k not in a.collectives]


@pytest.mark.parametrize("name, kind", UNSUPPORTED, ids=[f"{n}-{k.value}" for n, k in UNSUPPORTED])
def test_unsupported_collective(name: str, kind: CollKind) -> None:
    with pytest.raises(ScheduleError, match=f"algorithm {name} does not implement {kind.value} \\(it implements "):
        build_schedule(name, parse_spec(HOME[name]), kind)


UNROOTED = [a.name for a in ALGOS if any(not k.rooted for k in a.collectives)]
ROOTED = [a.name for a in ALGOS if any(k.rooted for k in a.collectives)]


@pytest.mark.parametrize("name", UNROOTED)
def test_root_given_to_an_unrooted_collective(name: str) -> None:
    unrooted = sorted((k for k in get(name).collectives if not k.rooted), key=lambda k: k.value)
    with pytest.raises(ScheduleError, match="takes no root"):
        build_schedule(name, parse_spec(HOME[name]), unrooted[0], root=1)


@pytest.mark.parametrize("name", ROOTED)
@pytest.mark.parametrize("root", [-1, 8])
def test_root_outside_the_ranks(name: str, root: int) -> None:
    rooted = sorted((k for k in get(name).collectives if k.rooted), key=lambda k: k.value)
    topo = parse_spec(HOME[name])
    root = root if root < 0 else topo.nranks
    with pytest.raises(ScheduleError, match=f"root {root} is outside 0..{topo.nranks - 1}"):
        build_schedule(name, topo, rooted[0], root=root)


@pytest.mark.parametrize("name", NAMES)
def test_errors_are_collc_errors(name: str) -> None:
    """Every invalid request raises a CollcError (the CLI turns it into exit code 2), never another type."""
    alg = get(name)
    for kind in alg.collectives:
        for spec in ("ring:3", "switch:6", "mesh:3x3", "ring:4:uni", "hypercube:1"):
            try:
                build_schedule(name, parse_spec(spec), kind)
            except CollcError:
                pass


@pytest.mark.parametrize("name", ["recursive-doubling", "recursive-halving-doubling"])
@pytest.mark.parametrize("spec", ["switch:6", "ring:6", "complete:6"])
def test_recursive_doubling_folds_any_rank_count(name: str, spec: str) -> None:
    """Every collective folds the ranks above a power of two (MPICH) where the partners have
    routes (not on a ring)."""
    for kind in get(name).collectives:
        if spec.startswith("ring"):
            with pytest.raises(ScheduleError, match="no link or switch route"):
                build_schedule(name, parse_spec(spec), kind)
        else:
            assert build_schedule(name, parse_spec(spec), kind).collective.nranks == 6


def test_ring_cycle_parameter_is_validated() -> None:
    topo = parse_spec("ring:4")
    with pytest.raises(ScheduleError, match="must list every rank"):
        build_schedule("ring", topo, CollKind.ALLREDUCE, params={"cycle": "0,1,2"})
    with pytest.raises(ScheduleError, match="comma-separated"):
        build_schedule("ring", topo, CollKind.ALLREDUCE, params={"cycle": "0;1;2;3"})
    with pytest.raises(ScheduleError, match="no link or switch route 1 -> 3"):
        build_schedule("ring", topo, CollKind.ALLREDUCE, params={"cycle": "0,1,3,2"})


def test_ring_without_a_hamiltonian_cycle() -> None:
    with pytest.raises(ScheduleError, match="no Hamiltonian cycle"):
        build_schedule("ring", parse_spec("mesh:3x3"), CollKind.ALLREDUCE)


def test_bidirectional_ring_needs_reverse_links() -> None:
    with pytest.raises(ScheduleError, match="reverse link"):
        build_schedule("ring", parse_spec("ring:4:uni"), CollKind.ALLREDUCE, params={"bidirectional": "true"})


def test_rooted_collective_defaults_to_root_zero() -> None:
    s = build_schedule("binomial-tree", parse_spec("switch:4"), CollKind.BROADCAST)
    assert s.collective.root == 0


def test_provenance_records_algorithm_params_and_topology() -> None:
    s = build_schedule("ring", parse_spec("ring:4"), CollKind.ALLREDUCE, params={"bidirectional": "yes"})
    assert s.provenance.algorithm == "ring"
    assert s.provenance.topology == "ring:4"
    assert ("bidirectional", "True") in s.provenance.params
    assert s.provenance.reference


# ---------------------------------------------------------------------- discovery
def test_every_frontend_module_registers_an_algorithm() -> None:
    """A module under collc/frontends/ is found without any list to edit, and registers."""
    from collc.frontends.registry import frontend_modules
    modules = {a.build.__module__.rsplit(".", 1)[1] for a in ALGOS}
    assert set(frontend_modules()) == modules


def test_the_registry_imports_no_frontend() -> None:
    import ast
    import inspect

    import collc.frontends.registry as registry
    tree = ast.parse(inspect.getsource(registry))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m.startswith("collc.frontends")}, imported
