"""Builds near every runtime limit are either refused naming the limit, or load.

Hypothesis draws algorithm, topology, collective, chunks, instances, protocol and
dialect where the lowering lands near a limit: steps per threadblock (more chunks),
channels (more instances), threadblocks per channel and per GPU (all-pairs exchange
on up to 66 ranks), ``cnt`` and parser nodes.  A build either raises a
``LoweringError`` whose message names the limit it would break, or it writes a file
that an independent count over the XML text (lxml, not the checker) finds within
every limit of the dialect.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from lxml import etree

from collc.limits import LIMITS, Dialect, Limits
from collc.compiler.msccl.program import Proto
from collc.driver import compile_xml
from collc.errors import LoweringError
from collc.ir.collective import CollKind
from collc.topology import parse_spec

#: Words by which each limit is named in the lowering's refusals.
LIMIT_WORDS = ("per tb", "per GPU", "channels exceed", "per channel", "parser nodes", "cnt", "int16 offset",
               "peers per channel", "<gpu> elements", "dependency targets tb id above 127", "XML nodes")

CASES = [
    ("direct", "switch:{n}", (CollKind.ALLTOALL, CollKind.ALLGATHER, CollKind.REDUCESCATTER)),
    ("ring", "ring:{n}", (CollKind.ALLREDUCE, CollKind.ALLGATHER)),
    ("recursive-halving-doubling", "hypercube:{d}", (CollKind.ALLREDUCE,)),
    ("multitree", "torus:{s}x{s}", (CollKind.ALLREDUCE, CollKind.ALLGATHER)),
]


def _count(text: str, lim: Limits, ngpus: int) -> list[str]:
    """Every limit the file breaks, counted from the XML alone."""
    root = etree.fromstring(text.encode())
    broken = []
    nchannels = int(root.get("nchannels"))
    if nchannels > lim.max_channels:
        broken.append("channels")
    gpus = root.findall("gpu")
    for g in gpus:
        tbs = g.findall("tb")
        steps = [len(t.findall("step")) for t in tbs]
        if len(tbs) > lim.max_tbs_per_gpu:
            broken.append("tbs per gpu")
        if max(steps, default=0) > lim.max_steps_per_tb:
            broken.append("steps per tb")
        if 1 + len(gpus) + len(tbs) + sum(steps) > lim.max_nodes_per_rank:
            broken.append("nodes")
        per_chan: Counter[tuple[str, str]] = Counter()
        for t in tbs:
            if int(t.get("chan")) >= nchannels:
                broken.append("chan")
            for role in ("send", "recv"):
                if int(t.get(role)) >= 0:
                    per_chan[(t.get("chan"), role)] += 1
            if any(int(s.get("cnt")) > lim.max_cnt for s in t.findall("step")):
                broken.append("cnt")
        if max(per_chan.values(), default=0) > lim.max_tbs_per_channel:
            broken.append("tbs per channel")
    assert len(gpus) == ngpus
    return broken


@st.composite
def near_limits(draw: st.DrawFn) -> tuple[str, str, CollKind, int, int, Proto, Dialect]:
    alg, pattern, kinds = draw(st.sampled_from(CASES))
    if alg == "direct":
        spec = pattern.format(n=draw(st.sampled_from([31, 32, 33, 34, 63, 64, 65, 66])))
    elif alg == "ring":
        spec = pattern.format(n=draw(st.integers(2, 16)))
    elif alg == "multitree":
        spec = pattern.format(s=draw(st.integers(2, 4)))
    else:
        spec = pattern.format(d=draw(st.integers(1, 5)))
    kind = draw(st.sampled_from(kinds))
    chunks = draw(st.sampled_from([1, 2, 4, 8, 16, 31, 32, 33, 64, 65]))
    instances = draw(st.sampled_from([1, 2, 4, 8, 16, 31, 32, 33]))
    # about n^2 transfers for all-pairs, n log n or n otherwise: keep a case under ~2 s
    n = parse_spec(spec).nranks
    work = (n * n if alg in ("direct", "multitree") else 4 * n * n) * chunks * instances
    assume(work <= 20_000)
    proto = draw(st.sampled_from(list(Proto)))
    dialect = draw(st.sampled_from(list(Dialect)))
    return alg, spec, kind, chunks, instances, proto, dialect


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_limits())
def test_near_a_limit_a_build_is_refused_by_name_or_loads(case: tuple[str, str, CollKind, int, int, Proto,
                                                                      Dialect]) -> None:
    alg, spec, kind, chunks, instances, proto, dialect = case
    topo = parse_spec(spec)
    try:
        built = compile_xml(topo, alg, kind, chunks=chunks, instances=instances, proto=proto, dialect=dialect)
    except LoweringError as exc:
        assert any(word in str(exc) for word in LIMIT_WORDS), str(exc)
        event(f"refused: {next(w for w in LIMIT_WORDS if w in str(exc))}")
        return
    event("built")
    assert built.report.ok, [f.message for f in built.report.errors()][:3]
    assert _count(built.text, LIMITS[dialect], topo.nranks) == []


@pytest.mark.parametrize("kind", [CollKind.ALLTOALL, CollKind.ALLGATHER])
def test_direct_on_64_ranks_spreads_peers_over_two_channels(kind: CollKind) -> None:
    built = compile_xml(parse_spec("switch:64"), "direct", kind)
    assert built.report.ok
    assert built.program.nchannels == 2
    assert _count(built.text, LIMITS[Dialect.EXECUTOR], 64) == []
    for g in built.program.gpus:
        sends = Counter(t.chan for t in g.tbs if t.send >= 0)
        assert sorted(sends.values()) == [31, 32]     # 63 peers: distances 1..32 and 33..63


def test_direct_on_64_ranks_is_refused_by_rccl_for_its_64_tbs_per_gpu() -> None:
    with pytest.raises(LoweringError, match=r"tbs exceed the rccl limit of 64 per GPU"):
        compile_xml(parse_spec("switch:64"), "direct", CollKind.ALLTOALL, dialect=Dialect.RCCL)
