"""Self-contained HTML pages of a schedule (``collc show``) and of ``compare``/``tune``/``bench report``
(``--html``): the fabric with its load per step, the threadblock timeline, the per-size view and the
facts (docs/show.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collc.limits import Dialect
from collc.show.data import (AGGREGATE_RANKS, MAX_BARS, SAMPLED_RANKS, Loaded, ShowError, SizeView, load, size_view,
                             step_loads, timeline)
from collc.show.page import Page, aggregate_figure, fabric_figure, render, size_figure
from collc.sim.runner import ModelParams, human
from collc.topology import Topology

if TYPE_CHECKING:
    from collc.tuning import Comparison, Window

__all__ = ["ShowError", "load", "schedule_page", "comparison_page", "report_page", "AGGREGATE_RANKS"]


def schedule_page(loaded: Loaded, topology: Topology, size: int, sizes: Sequence[int], params: ModelParams,
                  others: bool = True, command: str = "") -> str:
    """The ``collc show`` page of a checked schedule on ``topology``."""
    if topology.nranks != loaded.nranks:
        raise ShowError(f"{Path(loaded.path).name} has {loaded.nranks} ranks but {topology.name} has "
                        f"{topology.nranks}; pass the --topology it was built for")
    aggregate = topology.nranks > AGGREGATE_RANKS
    notes: list[str] = []
    if not loaded.ok:
        notes.append("This schedule fails its check (see the facts): the load and the timeline show what the "
                     "models make of it, which the runtime may not do.")
    loads = step_loads(loaded, topology, size)
    if aggregate:
        fabric = aggregate_figure(topology, loads)
        notes.append(f"{topology.nranks} ranks (more than {AGGREGATE_RANKS}): the fabric is drawn as aggregates per "
                     f"{'torus dimension and direction' if topology.family in ('torus', 'mesh') else 'link class'} "
                     f"and the timeline shows {SAMPLED_RANKS} sampled ranks (and the one that finishes last).")
    else:
        from collc.show.layout import geometry
        fabric = fabric_figure(topology, geometry(topology), loads)
    tl = None
    why_no_timeline = ""
    try:
        tl = timeline(loaded, topology, size, params)
    except Exception as exc:       # a model that cannot time this schedule: say so, draw the rest
        from collc.errors import CollcError
        if not isinstance(exc, CollcError):
            raise
        why_no_timeline = str(exc)
        notes.append(f"No timeline: {exc}")
    if tl is not None and tl.bars_dropped:
        notes.append(f"The timeline keeps the {MAX_BARS} longest bars; {tl.bars_dropped} shorter ones are left out.")
    view = None
    try:
        view = size_view(loaded, topology, sizes, params, others=others)
    except Exception as exc:
        from collc.errors import CollcError
        if not isinstance(exc, CollcError):
            raise
        notes.append(f"No per-size view: {exc}")
    facts = [("command", command or "(not known)"), ("file", loaded.path),
             ("form", {"xml": "MSCCL XML", "shards": "MSCCL XML, one file per rank", "plan": "MSCCL++ plan"}
              [loaded.form]), ("name", loaded.name), ("collective", loaded.kind.value),
             ("ranks", str(loaded.nranks)), ("dialect", loaded.dialect), ("topology", topology.name),
             ("size shown", f"{human(size)} (link load and timeline)")]
    facts += loaded.limits_used()
    facts.append(("steps", f"{len(loads.steps)} ({'lockstep rounds of the program' if loaded.program is not None else 'rounds of the plan'})"))
    if view is not None:
        facts.append(("per-size model", view.model))
        if view.others_note:
            facts.append(("other algorithms", view.others_note))
    if why_no_timeline:
        facts.append(("timeline", why_no_timeline))
    facts.append(("check", ("passed" if loaded.ok else "FAILED") + f" ({len(loaded.findings)} finding(s))"))
    facts += [(f"reader: {k}", v) for k, v in loaded.info]
    page = Page(title=f"{loaded.kind.value} on {topology.name}: {Path(loaded.path).name}", facts=facts,
                findings=[(f.severity, f.code, f.message) for f in loaded.findings], notes=notes, fabric=fabric,
                timeline=tl, sizes=size_figure(view) if view is not None else None, nlinks=len(topology.links),
                nsteps=len(loads.steps), aggregate=aggregate)
    return render(page)


def comparison_page(comparison: Comparison, command: str = "", windows: Sequence[Window] = ()) -> str:
    """The per-size view of ``collc compare`` (and ``collc tune``: its windows in the facts)."""
    from collc.tuning import TIE_TOLERANCE

    first = next(iter(comparison.series))
    view = SizeView(comparison.sizes, first, comparison.series[first], comparison.bound_busbw, comparison.model,
                    {k: v for k, v in comparison.series.items() if k != first})
    facts = [("command", command or "(not known)"), ("topology", comparison.topology),
             ("collective", comparison.kind.value), ("model", comparison.model),
             ("sizes", f"{human(comparison.sizes[0])} .. {human(comparison.sizes[-1])}"),
             ("ties", f"within {TIE_TOLERANCE:.0%} of the best busbw")]
    for label, why in comparison.failed.items():
        facts.append((f"not compared: {label}", why))
    for w in windows:
        hi = human(w.max_bytes + 1) if w.max_bytes else "inf"
        facts.append((f"window {human(w.min_bytes)} .. {hi}", f"{w.candidate} -> {w.file}"))
    fig = size_figure(view)
    fig.data[0].name = first      # the first candidate is no more "this schedule" than the others
    for tr in fig.data[:3]:
        tr.name = first
    page = Page(title=f"{comparison.kind.value} on {comparison.topology}: "
                      f"{'tune' if windows else 'compare'} ({len(comparison.series)} candidates)",
                facts=facts, sizes=fig)
    return render(page)


def report_page(rows: Sequence[Any], title: str, facts: list[tuple[str, str]], topology: Topology | None,
                kind_name: str, nranks: int) -> str:
    """``collc bench report --html``: measured busbw beside the prediction, per placement (``rows`` are
    ``collc.runtime_tests.report.ReportRow``s: size, placement, path, busbw, baseline and predicted busbw)."""
    from collc.ir.collective import CollKind
    from collc.sim.runner import Row

    sizes = sorted({r.size for r in rows})
    measured: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r.busbw is not None:
            measured.setdefault(f"measured ({r.placement}, {r.path})", []).append((r.size, r.busbw))
        if r.baseline_busbw is not None:
            measured.setdefault(f"NCCL baseline ({r.placement})", []).append((r.size, r.baseline_busbw))
    pred: dict[int, float] = {}
    for r in sorted(rows, key=lambda x: x.placement != "out-of-place"):   # out-of-place first
        if r.predicted_busbw is not None:
            pred.setdefault(r.size, r.predicted_busbw)
    pred_rows = []
    kind = CollKind.parse(kind_name)
    from collc.sim.analysis import bus_bandwidth
    for s in sorted(pred):
        busbw = pred[s]
        factor = bus_bandwidth(kind, max(nranks, 1), s, 1.0)
        algbw = busbw * factor[0] / factor[1] if factor[1] else busbw
        t = s / (algbw * 1e3) if algbw > 0 else 0.0
        pred_rows.append(Row(s, t, algbw, busbw, True))
    bound: list[float] = []
    if topology is not None:
        from collc.sim.runner import bound_busbw
        bound = bound_busbw(kind, topology, sizes, ModelParams("step", 5.0))
    view = SizeView(sizes if bound else [r.size for r in pred_rows], "collc prediction", pred_rows, bound, "",
                    measured=measured)
    fig = size_figure(view)
    notes = [] if pred_rows else ["No prediction: pass --topology (and --xml) to bench report for one."]
    return render(Page(title=title, facts=facts, sizes=fig, notes=notes))


def show_file(path: str | Path, topology: Topology, size: int, sizes: Sequence[int], params: ModelParams,
              dialect: Dialect = Dialect.EXECUTOR, others: bool = True, command: str = "") -> str:
    """``collc show``: read, check and draw a schedule."""
    return schedule_page(load(path, dialect), topology, size, sizes, params, others, command)
