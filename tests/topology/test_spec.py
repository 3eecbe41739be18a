from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from collc.errors import TopologyError
from collc.topology import (FAMILIES, Link, Topology, complete, dump_json, hypercube, list_families, load_file,
                            mesh, parse_spec, register_family, ring, switch, torus)

property_settings = settings(database=None, deadline=None, max_examples=40)

EXAMPLES = ["ring:8", "ring:8:uni", "torus:8x8", "torus:4x4x4", "mesh:4x4", "hypercube:4", "complete:8",
            "switch:8", "ring:8:uni,bw=25,lat=0.7", "torus:2x3:bw=12.5", "mesh:3x2:lat=2", "switch:4:lat=0.25"]


# ---------------------------------------------------------------------- grammar
@pytest.mark.parametrize("spec, expected", [
    ("ring:8", ring(8)),
    ("ring:8:uni", ring(8, bidirectional=False)),
    ("torus:8x8", torus([8, 8])),
    ("torus:4x4x4", torus([4, 4, 4])),
    ("mesh:4x4", mesh([4, 4])),
    ("hypercube:4", hypercube(4)),
    ("complete:8", complete(8)),
    ("switch:8", switch(8)),
    (" ring:4 ", ring(4)),
    ("ring:4:bw=25,uni,lat=0.7", ring(4, False, 25.0, 0.7)),
    ("torus:4x4:lat=1e-3", torus([4, 4], latency=0.001)),
])
def test_parse(spec: str, expected: Topology) -> None:
    assert parse_spec(spec) == expected


@pytest.mark.parametrize("spec", EXAMPLES)
def test_name_is_canonical_spec(spec: str) -> None:
    t = parse_spec(spec)
    assert t.name == spec
    assert parse_spec(t.name) == t


@property_settings
@given(st.sampled_from(["ring", "complete", "switch"]), st.integers(2, 12), st.booleans(),
       st.floats(0.001, 1000.0, allow_nan=False), st.floats(0.0, 100.0, allow_nan=False))
def test_generated_names_parse_back(family: str, n: int, uni: bool, bw: float, lat: float) -> None:
    if family == "ring":
        t = ring(n, not uni, bw, lat)
    elif family == "complete":
        t = complete(n, bw, lat)
    else:
        t = switch(n, bw, lat)
    assert parse_spec(t.name) == t


def test_options_set_link_attributes() -> None:
    t = parse_spec("ring:4:uni,bw=25,lat=0.7")
    assert set(t.links) == {Link(i, (i + 1) % 4, 25.0, 0.7) for i in range(4)}


@pytest.mark.parametrize("spec, message", [
    ("torus:0x8", r"bad topology spec 'torus:0x8': torus dimensions must each be >= 2, got 0x8"),
    ("ring:1", r"bad topology spec 'ring:1': ring size must be >= 2, got 1"),
    ("foo:3", r"unknown topology family 'foo' in spec 'foo:3'; see `collc list topologies`"),
    ("toru:4x4", r"unknown topology family 'toru' in spec 'toru:4x4'; did you mean 'torus'"),
    ("torus:4xq", r"bad topology spec 'torus:4xq': torus dimensions must be sizes separated by 'x'"),
    ("torus:4x", "torus dimensions"),
    ("ring:-3", "ring size must be a positive integer"),
    ("ring:8.0", "ring size must be a positive integer"),
    ("ring", r"has no arguments \(example: ring:8:uni\)"),
    ("ring:", "has no arguments"),
    ("", "empty topology spec"),
    ("torus:4x4:uni", r"unknown option 'uni' \(allowed: bw=<number>, lat=<number>\)"),
    ("ring:4:uni=1", "unknown option 'uni=1'"),
    ("ring:4:bw", "unknown option 'bw'"),
    ("ring:4:bw=0", "bw must be a positive number"),
    ("ring:4:bw=abc", "bw must be a positive number"),
    ("ring:4:bw=inf", "bw must be a positive number"),
    ("ring:4:lat=-1", "lat must be a number of microseconds >= 0"),
    ("ring:4:bw=1,bw=2", "given twice"),
    ("ring:4:", "unknown option ''"),
    ("ring:4:uni:x", "unknown option 'uni:x'"),
    ("hypercube:30", "hypercube dimension must be <="),
])
def test_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message) as info:
        parse_spec(spec)
    assert "\n" not in str(info.value)


def test_non_string_spec() -> None:
    with pytest.raises(TopologyError, match="must be a string"):
        parse_spec(8)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- registry
def test_list_families() -> None:
    families = list_families()
    names = [f[0] for f in families]
    # the generators' own families first, in registration order; families of other modules after
    assert names[:11] == ["ring", "torus", "mesh", "hypercube", "complete", "switch", "fattree", "bigraph", "dgx2",
                          "hammingmesh", "hyperx"]
    assert len(set(names)) == len(names) and {"kautz", "dfc", "dragonfly", "nccl", "a100", "mi250"} <= set(names)
    for name, description, example in families:
        assert description and "\n" not in description
        assert example.startswith(name + ":")
        if name == "nccl":   # its argument is a file (tests/topology/test_importers.py)
            continue
        assert parse_spec(example).name == example


def test_register_family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collc.topology.spec.FAMILIES", dict(FAMILIES))
    from collc.topology import spec as spec_module

    def parse_line(args: str, options: str | None) -> Topology:
        n = int(args)
        pairs = [(i, i + 1) for i in range(n - 1)]
        return Topology(f"line:{n}", n, tuple(Link(a, b) for a, b in pairs + [(b, a) for a, b in pairs]))

    spec_module.register_family("line", parse_line, "a line of N ranks", "line:4")
    assert parse_spec("line:3").nranks == 3
    assert ("line", "a line of N ranks", "line:4") in spec_module.list_families()
    with pytest.raises(TopologyError, match="already registered"):
        spec_module.register_family("line", parse_line, "again", "line:4")
    with pytest.raises(TopologyError, match="bad topology family name"):
        spec_module.register_family("Bad Name", parse_line, "x", "x")
    assert "line" not in FAMILIES  # the global registry is untouched by this test


def test_register_family_is_exported() -> None:
    assert callable(register_family)


# ---------------------------------------------------------------------- files
def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("spec", EXAMPLES[:8] + ["ring:4:uni,bw=25,lat=0.7"])
def test_json_file_round_trip(spec: str, tmp_path: Path) -> None:
    t = parse_spec(spec)
    path = tmp_path / "topo.json"
    path.write_text(dump_json(t), encoding="utf-8")
    assert parse_spec(str(path)) == t


@pytest.mark.parametrize("spec", EXAMPLES[:8] + ["switch:4:lat=0.25"])
def test_yaml_file_round_trip(spec: str, tmp_path: Path) -> None:
    t = parse_spec(spec)
    for suffix in (".yaml", ".yml"):
        path = write_yaml(tmp_path / f"topo{suffix}", t.to_dict())
        assert parse_spec(str(path)) == t
        assert load_file(path) == t


DOC_EXAMPLE = """\
name: my-topo          # optional
nranks: 4
nswitches: 0           # optional, default 0
defaults: {bandwidth: 25.0, latency: 0.7}   # optional, GB/s and us
links:                 # directed unless bidirectional: true
  - {src: 0, dst: 1, bandwidth: 25.0, latency: 0.7, multiplicity: 1, bidirectional: true}
  - {src: 1, dst: 2, bidirectional: true}
  - {src: 2, dst: 3, multiplicity: 2, bidirectional: true}
  - {src: 3, dst: 0, bandwidth: 50}
  - {src: 0, dst: 3, bandwidth: 50}
cycle: [0, 1, 2, 3]    # optional Hamiltonian cycle over ranks
"""


def test_documented_example_file(tmp_path: Path) -> None:
    path = tmp_path / "example.yaml"
    path.write_text(DOC_EXAMPLE, encoding="utf-8")
    t = parse_spec(str(path))
    assert t.name == "my-topo" and t.nranks == 4 and t.nswitches == 0
    assert len(t.links) == 8 and t.is_bidirectional()
    assert t.link(2, 1) == Link(2, 1, 25.0, 0.7)
    assert t.link(3, 2) == Link(3, 2, 25.0, 0.7, 2)
    assert t.link(3, 0) == Link(3, 0, 50.0, 0.7)
    assert t.hamiltonian_cycle() == (0, 1, 2, 3)
    again = tmp_path / "again.json"
    again.write_text(dump_json(t), encoding="utf-8")
    assert parse_spec(str(again)) == t


def test_file_name_defaults_to_stem(tmp_path: Path) -> None:
    path = tmp_path / "pair.json"
    path.write_text(json.dumps({"nranks": 2, "links": [{"src": 0, "dst": 1, "bidirectional": True}]}))
    t = parse_spec(str(path))
    assert t.name == "pair" and t.cycle is None and t.hamiltonian_cycle() == (0, 1)


@pytest.mark.parametrize("content, message", [
    ("links: []\n", "missing required key 'nranks'"),
    ("nranks: 2\nlinks:\n  - {src: 0, dst: 7}\n", "names node 7"),
    ("nranks: 2\nlinks:\n  - {src: 0, dst: 1, bandwidth: fast}\n", r"links\[0\].bandwidth must be a finite number"),
    ("nranks: two\n", "nranks must be an integer"),
    ("nranks: 2\nlinks:\n  - {src: 0, dst: 1}\n  - {src: 0, dst: 1}\n", "duplicate link 0->1"),
    ("nranks: 3\nlinks:\n  - {src: 0, dst: 1, bidirectional: true}\ncycle: [0, 1, 2]\n", "cycle step"),
    ("- 1\n- 2\n", "expected a mapping at the top level, got list"),
    ("nranks: [\n", "invalid YAML"),
])
def test_yaml_file_errors(content: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TopologyError, match=message) as info:
        parse_spec(str(path))
    text = str(info.value)
    assert text.startswith(f"topology file {path}: ")
    assert "\n" not in text


def test_json_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(TopologyError, match=f"topology file {path}: invalid JSON"):
        parse_spec(str(path))
    path.write_text('{"nranks": 2, "links": [{"src": 0, "dst": 1, "latency": NaN}]}', encoding="utf-8")
    with pytest.raises(TopologyError, match="latency must be a finite number"):
        parse_spec(str(path))


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(TopologyError, match=f"cannot read topology file {missing}: No such file"):
        parse_spec(str(missing))
    directory = tmp_path / "dir.json"
    directory.mkdir()
    with pytest.raises(TopologyError, match=f"cannot read topology file {directory}"):
        parse_spec(str(directory))
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TopologyError, match=f"cannot read topology file {binary}"):
        parse_spec(str(binary))
    other = tmp_path / "topo.txt"
    other.write_text("nranks: 2\n")
    with pytest.raises(TopologyError, match="unsupported extension '.txt'"):
        parse_spec(str(other))


# ---------------------------------------------------------------------- dump_json
def test_dump_json_is_deterministic_and_ordered() -> None:
    t = parse_spec("switch:2:bw=25")
    text = dump_json(t)
    assert text == dump_json(parse_spec("switch:2:bw=25"))
    assert text.startswith('{\n  "name": "switch:2:bw=25",\n  "nranks": 2,\n  "nswitches": 1,\n')
    data = json.loads(text)
    assert list(data) == ["name", "nranks", "nswitches", "hosts", "params", "links", "cycle"]
    assert data["hosts"] == [0, 0]      # one crossbar: one host
    assert list(data["links"][0]) == ["src", "dst", "bandwidth", "latency", "multiplicity", "kind"]
    assert data["params"] == {"n": "2", "bandwidth": "25"}
    assert Topology.from_dict(data) == t
