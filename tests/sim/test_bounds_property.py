"""Property: no model ever predicts a time below the lower bounds, on random fabrics."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from collc.driver import compile_xml
from collc.errors import CollcError
from collc.frontends.registry import algorithms
from collc.sim.analysis import lower_bounds
from collc.sim.runner import ModelParams, time_program
from collc.topology import parse_spec

SPECS = st.one_of(
    st.integers(2, 12).map(lambda n: f"ring:{n}"),
    st.tuples(st.integers(2, 4), st.integers(2, 4)).map(lambda d: f"torus:{d[0]}x{d[1]}"),
    st.integers(1, 4).map(lambda d: f"hypercube:{d}"),
    st.integers(2, 12).map(lambda n: f"switch:{n}"),
    st.integers(2, 6).map(lambda n: f"complete:{n}"),
)
CASES = [(a.name, k) for a in algorithms() for k in sorted(a.collectives, key=lambda k: k.value)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(spec=SPECS, case=st.sampled_from(CASES), size=st.sampled_from([1 << 10, 1 << 20, 1 << 26]),
       model=st.sampled_from(["step", "event"]), alpha=st.sampled_from([0.0, 5.0]))
def test_models_never_beat_the_lower_bounds(spec: str, case: tuple[str, object], size: int, model: str,
                                            alpha: float) -> None:
    name, kind = case
    topo = parse_spec(spec)
    try:
        built = compile_xml(topo, name, kind, root=0 if kind.rooted else None)  # type: ignore[attr-defined]
    except CollcError:
        assume(False)
        return
    [t] = time_program(built.program, topo, [size], ModelParams(model=model, alpha_us=alpha))
    bound = lower_bounds(built.program.kind, topo, size, alpha).total_us
    assert t >= bound * (1 - 1e-9), (spec, name, size, model, t, bound)
