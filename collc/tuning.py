"""Compare and tune: build candidate schedules, time them, pick one per size window.

What ``collc compare`` and ``collc tune`` do, as library functions.  They sit above the
driver (they build and check programs) and the simulator (:mod:`collc.sim.runner`
times them), so the timing library never imports the compiler's driver.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collc.limits import Dialect
from collc.compiler.msccl.program import Program, Proto
from collc.driver import compile_xml
from collc.errors import CollcError
from collc.inputs import output_dir
from collc.ir.collective import CollKind
from collc.outputs import discard, new_temp_dir, publish_dir, signals_blocked, write_file, write_into
from collc.sim.plot import busbw_figure, style_busbw_axes, write_figure
from collc.sim.runner import (ModelParams, Row, SimUsageError, bound_busbw, count_multiple, human, rows_for,
                              time_program)
from collc.topology import Topology, parse_spec


# --------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class Candidate:
    algorithm: str
    params: tuple[tuple[str, str], ...] = ()
    chunks: int = 1
    instances: int = 1
    proto: Proto = Proto.SIMPLE
    topology: str = ""    # its own topology spec (same rank count), e.g. a baseline's fabric

    @property
    def label(self) -> str:
        return self._label() + (f"@{self.topology}" if self.topology else "")

    def _label(self) -> str:
        extra = [f"{k}={v}" for k, v in self.params]
        if self.chunks > 1:
            extra.append(f"chunks={self.chunks}")
        if self.instances > 1:
            extra.append(f"instances={self.instances}")
        if self.proto is not Proto.SIMPLE:
            extra.append(self.proto.value)
        return self.algorithm + (f"({','.join(extra)})" if extra else "")


#: Candidates whose predicted busbw at a size is within this fraction of the best are reported as
#: a tie by ``collc compare``: the models are approximations (link sharing, protocol efficiency),
#: so a 0.1% lead is no reason to call one algorithm faster.
TIE_TOLERANCE = 0.01


def model_summary(params: ModelParams, topology: Topology) -> str:
    """The model in words, with the link bandwidth and latency it times with."""
    if params.link_bw is not None:
        bw = f"every link {params.link_bw:g} GB/s"
    else:
        bws = sorted({link.bandwidth for link in topology.links}, reverse=True)
        bw = "links " + "/".join(f"{b:g}" for b in bws[:4]) + ("/..." if len(bws) > 4 else "") + " GB/s"
    hop = f", {params.hop_latency_us:g} us per hop" if params.hop_latency_us else ""
    red = f", reduce {params.reduce_us_per_byte:g} us/B" if params.reduce_us_per_byte else ""
    return f"{params.model} model, {bw}, {params.alpha_us:g} us per message{hop}{red}"


@dataclass
class Comparison:
    topology: str
    kind: CollKind
    sizes: list[int]
    series: dict[str, list[Row]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    bound_busbw: list[float] = field(default_factory=list)
    model: str = ""          # :func:`model_summary` of the model that timed the series
    #: MSCCL++ plans: a candidate counts at a size only where the executor would run it (``Row.selected``:
    #: its buffer alignment divides the size); MSCCL XML candidates count everywhere, as before
    selected_only: bool = False

    def _score(self, label: str, i: int) -> float:
        row = self.series[label][i]
        return row.busbw if row.selected or not self.selected_only else 0.0

    def winners(self) -> list[str]:
        """The best candidate at each size (ties broken by label; :meth:`standings` has the ties)."""
        out = []
        for i in range(len(self.sizes)):
            best = max(self.series, key=lambda lab: (self._score(lab, i), lab))
            out.append(best)
        return out

    def standings(self, tolerance: float = TIE_TOLERANCE) -> list[tuple[str, ...]]:
        """At each size the candidates within ``tolerance`` of the best busbw, best first:
        one label where a candidate wins, several where they tie (none where none can run)."""
        out = []
        for i in range(len(self.sizes)):
            top = max(self._score(lab, i) for lab in self.series)
            near = [lab for lab in self.series if top > 0 and self._score(lab, i) >= top * (1 - tolerance)]
            out.append(tuple(sorted(near, key=lambda lab: (-self._score(lab, i), lab))))
        return out

    def to_json(self) -> dict[str, object]:
        return {"topology": self.topology, "collective": self.kind.value, "sizes": self.sizes,
                "series": {k: [r.to_json() for r in v] for k, v in self.series.items()},
                "winners": self.winners() if self.series else [], "failed": self.failed,
                "ties": [list(t) if len(t) > 1 else [] for t in self.standings()] if self.series else [],
                "tie_tolerance": TIE_TOLERANCE, "model": self.model,
                "bound_busbw_GBps": [round(x, 4) for x in self.bound_busbw]}

    def table(self) -> str:
        """One row per candidate: busbw at the smallest and largest size, its peak, and the size
        windows where it is best (or tied within :data:`TIE_TOLERANCE`)."""
        import textwrap

        labels = list(self.series)
        standing = self.standings()
        lo, hi = human(self.sizes[0]), human(self.sizes[-1])
        width = max([len("upper bound (bandwidth model)")] + [len(x) for x in labels])
        head = f"{'candidate':{width}s} {'@' + lo:>9s} {'@' + hi:>9s} {'peak':>9s} {'at':>6s}  best for"
        lines = [f"{self.kind.value} on {self.topology}: busbw in GB/s, {self.model}" if self.model else
                 f"{self.kind.value} on {self.topology}: busbw in GB/s", head]
        for lab in labels:
            rows = self.series[lab]
            peak = max(rows, key=lambda r: r.busbw)
            won = [i for i, t in enumerate(standing) if t == (lab,)]
            tied = [i for i, t in enumerate(standing) if len(t) > 1 and lab in t]
            best = "; ".join(filter(None, [", ".join(self._runs(won)),
                                           "tie at " + ", ".join(self._runs(tied)) if tied else ""])) or "-"
            lines.append(f"{lab:{width}s} {rows[0].busbw:9.3f} {rows[-1].busbw:9.3f} {peak.busbw:9.3f} "
                         f"{human(peak.size):>6s}  {best}")
        bound = self.bound_busbw
        if bound:
            at = max(range(len(bound)), key=lambda i: bound[i])
            lines.append(f"{'upper bound (bandwidth model)':{width}s} {bound[0]:9.3f} {bound[-1]:9.3f} "
                         f"{bound[at]:9.3f} {human(self.sizes[at]):>6s}")
        groups: list[tuple[tuple[str, ...], list[int]]] = []    # consecutive sizes with the same tied set
        for i, t in enumerate(standing):
            key = tuple(sorted(t))
            if len(t) > 1 and groups and groups[-1][0] == key and groups[-1][1][-1] == i - 1:
                groups[-1][1].append(i)
            elif len(t) > 1:
                groups.append((key, [i]))
        if groups:
            lines += textwrap.wrap(f"tie (within {TIE_TOLERANCE:.0%}): " + "; ".join(
                f"{self._runs(idx)[0]} {' = '.join(key)}" for key, idx in groups), 100, subsequent_indent="  ")
        if self.selected_only:
            picks = [(t[0] if t else "none (no candidate's alignment divides the size)") for t in standing]
            lines.append("pick per size:")
            lines += [f"  {human(size):>8s}  {pick}" for size, pick in zip(self.sizes, picks)]
            unserved = sorted(lab for lab in labels if not any(r.selected for r in self.series[lab]))
            if unserved:
                lines += textwrap.wrap("runs no size given (MSCCL++ needs 16 B per input chunk): " + ", ".join(unserved),
                                       100, subsequent_indent="  ")
        for lab, why in self.failed.items():
            lines += textwrap.wrap(f"not compared: {lab}: {why}", 100, subsequent_indent="  ")
        return "\n".join(lines)

    def _runs(self, idx: list[int]) -> list[str]:
        """Consecutive size indices as ``1KiB..64KiB`` ranges."""
        out: list[str] = []
        start = prev = -2
        for i in idx + [-9]:
            if i != prev + 1:
                if start >= 0:
                    a, b = human(self.sizes[start]), human(self.sizes[prev])
                    out.append(a if start == prev else f"{a}..{b}")
                start = i
            prev = i
        return out


def compare(topology: Topology, kind: CollKind, candidates: Sequence[Candidate], sizes: Sequence[int],
            params: ModelParams, inplace: bool | None = None, root: int | None = None,
            progress: Callable[[str], None] | None = None, dialect: Dialect = Dialect.EXECUTOR,
            timer: Callable[[Program, Topology], list[float]] | None = None,
            backend: str = "msccl") -> Comparison:
    """Build every candidate (checked, for ``dialect``: a candidate over that runtime's limits is not
    compared, with its reason) and simulate it over the sizes (``timer(program, fabric)`` when given:
    ``tune --layout`` times a candidate on every group at once, docs/groups.md); ``backend="mscclpp"``:
    as MSCCL++ execution plans (:func:`compare_plans`)."""
    if backend == "mscclpp":
        return compare_plans(topology, kind, candidates, sizes, params, inplace, root, progress)
    result = Comparison(topology.name, kind, list(sizes))
    for cand in candidates:
        if progress:
            progress(cand.label)
        try:
            own = parse_spec(cand.topology) if cand.topology else topology
            if own.nranks != topology.nranks:
                raise SimUsageError(f"{own.name} has {own.nranks} ranks, {topology.name} {topology.nranks}")
            # only the timing is wanted: from 1024 ranks on, check the program as per-rank
            # files (what such a job must use: one file cannot hold its ranks' XML nodes)
            built = compile_xml(own, cand.algorithm, kind, inplace=inplace, root=root, params=dict(cand.params),
                                chunks=cand.chunks, instances=cand.instances, proto=cand.proto,
                                shard=topology.nranks >= 1024, dialect=dialect, keep_schedule=False)
        except CollcError as exc:
            result.failed[cand.label] = str(exc)
            continue
        if not built.report.ok:
            result.failed[cand.label] = built.report.errors()[0].message
            continue
        times = timer(built.program, own) if timer is not None else time_program(built.program, own, sizes, params)
        result.series[cand.label] = rows_for(built.program, sizes, times)
    if not result.series:
        raise SimUsageError("no candidate could be built: " + "; ".join(f"{k}: {v}" for k, v in result.failed.items()))
    result.bound_busbw = bound_busbw(kind, topology, sizes, params)
    result.model = model_summary(params, topology)
    return result


def _plan_protocol(cand: Candidate) -> Any:
    """The plan protocol of a candidate (MSCCL++ has Simple and LL, no LL128)."""
    from collc.compiler.mscclpp.plan import Protocol

    if cand.proto is Proto.LL128:
        raise CollcError("MSCCL++ plans have no LL128 protocol (Simple or LL)")
    return Protocol(cand.proto.value)


def _build_plan(topology: Topology, kind: CollKind, cand: Candidate, inplace: bool | None, root: int | None,
                check: bool, **window: Any) -> Any:
    """``compile_plan`` of one candidate; a CollcError where the backend refuses it or it fails its check."""
    from collc.driver import compile_plan

    if cand.topology:
        raise CollcError("@SPEC (a candidate on its own topology) is for MSCCL XML; a plan runs on --topology")
    built = compile_plan(topology, cand.algorithm, kind, inplace=inplace, root=root, params=dict(cand.params),
                         chunks=cand.chunks, instances=cand.instances, protocol=_plan_protocol(cand), check=check,
                         **window)
    if built.problems:
        raise CollcError(built.problems[0])
    return built


def plan_rows(plan: Any, sizes: Sequence[int], times: Sequence[float]) -> list[Row]:
    """Rows of a plan's times; ``selected`` where the executor would run it at that size (its window,
    and ``buffer_alignment`` bytes per input chunk: 16 B, docs/mscclpp-backend.md)."""
    from collc.sim.analysis import bus_bandwidth

    kind = CollKind.parse(plan.collective)
    return [Row(size, t, *bus_bandwidth(kind, plan.nranks, size, t), plan.runs_at(size))
            for size, t in zip(sizes, times)]


def compare_plans(topology: Topology, kind: CollKind, candidates: Sequence[Candidate], sizes: Sequence[int],
                  params: ModelParams, inplace: bool | None = None, root: int | None = None,
                  progress: Callable[[str], None] | None = None) -> Comparison:
    """``compare`` for MSCCL++: lower every candidate to an execution plan (checked on every release
    collc models, with the placement rules of ``topology``'s hosts), time it with the one-sided event
    model (:mod:`collc.sim.plan_event`: port channels through the proxy, docs/simulation.md) and keep,
    at each size, only the plans the executor would run there."""
    from collc.check.plan.placement import check_placement
    from collc.check.plan.report import PlanReport
    from collc.sim.plan_event import time_plan, timing_refusal

    if params.model != "event":
        raise SimUsageError("--model step is for MSCCL XML; plans are timed with the event model")
    result = Comparison(topology.name, kind, list(sizes), selected_only=True)
    for cand in candidates:
        if progress:
            progress(cand.label)
        try:
            plan = _build_plan(topology, kind, cand, inplace, root, check=True).plan
            placed = PlanReport(cand.label)
            check_placement(plan, topology, placed)
            if placed.errors():
                raise CollcError(placed.errors()[0].message)
            why = timing_refusal(plan)
            if why is not None:
                raise CollcError(why)
        except CollcError as exc:
            result.failed[cand.label] = str(exc)
            continue
        times = time_plan(plan, topology, sizes, alpha_us=params.alpha_us, link_bw=params.link_bw,
                          hop_latency_us=params.hop_latency_us, reduce_us_per_byte=params.reduce_us_per_byte,
                          proxy_us=params.proxy_us)
        result.series[cand.label] = plan_rows(plan, sizes, times)
    if not result.series:
        raise SimUsageError("no candidate could be built: " + "; ".join(f"{k}: {v}" for k, v in result.failed.items()))
    result.bound_busbw = bound_busbw(kind, topology, sizes, params)
    result.model = "one-sided plan " + model_summary(params, topology) + f", proxy {params.proxy_us:g} us per request"
    return result


#: Markers cycled with the colours; 9 is coprime with tab20's 20 colours, so no two of the first
#: 180 series share both.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", "*")


def plot_busbw(comparison: Comparison, path: str | Path) -> None:
    """busbw against message size, log-x, one line per candidate (its own colour and marker),
    like the papers' figures, with the bandwidth model's upper bound; written atomically."""
    fig, _ = comparison_figure(comparison)
    write_figure(fig, path)


def comparison_figure(comparison: Comparison) -> tuple[Any, Any]:
    """The (figure, axes) :func:`plot_busbw` writes."""
    import matplotlib

    fig, ax = busbw_figure()
    cmap = matplotlib.colormaps["tab20"]
    # the dark tab20 shades first, then the light ones
    colours = [cmap(i) for i in range(0, 20, 2)] + [cmap(i) for i in range(1, 20, 2)]
    for n, (label, rows) in enumerate(comparison.series.items()):
        ax.plot([r.size for r in rows], [r.busbw for r in rows], marker=MARKERS[n % len(MARKERS)], markersize=4,
                color=colours[n % len(colours)], label=label)
    # the time lower bound makes an upper bound on busbw
    ax.plot(comparison.sizes, comparison.bound_busbw, linestyle="--", color="black", alpha=0.6,
            label="upper bound (bandwidth model)")
    title = f"{comparison.kind.value} on {comparison.topology}"
    style_busbw_axes(fig, ax, title + (f"\n{comparison.model}" if comparison.model else ""),
                     title_size=9 if comparison.model else None, legend_outside=len(comparison.series) > 5)
    return fig, ax


# --------------------------------------------------------------------------- tune
@dataclass(frozen=True)
class Window:
    candidate: str
    min_bytes: int
    max_bytes: int          # 0: no upper limit
    sizes: tuple[int, ...]
    busbw: tuple[float, ...]
    file: str
    count_multiple: int = 1   # the call's element count must be a multiple of this for the runtime to pick it


COUNT_MULTIPLE_NOTE = ("the runtime picks a file only for calls whose element count (sendcount for allgather, "
                       "recvcount for reducescatter) is a multiple of its count_multiple; other counts run NCCL's "
                       "own algorithm without a word (docs/runtime-model.md)")
#: The model schedules/ was tuned with (scripts/build_schedules.py): another model or other links
#: move the crossovers, so `collc tune` says so when its own differs.
PREBUILT_MODEL = ModelParams("step", 5.0)


def windows_from(comparison: Comparison) -> list[tuple[str, int, int, list[int]]]:
    """Runs of consecutive sizes with the same winner, tiling [0, inf) without overlap."""
    return windows_of(comparison.sizes, comparison.winners())


def windows_of(sizes: Sequence[int], winners: Sequence[str]) -> list[tuple[str, int, int, list[int]]]:
    """``(winner, lo, hi, sizes)`` for each run of consecutive ``sizes`` with the same winner, as
    inclusive ``[lo, hi]`` windows tiling [0, inf): the first starts at 0, ``hi`` 0 is open."""
    runs: list[tuple[str, list[int]]] = []
    for size, win in zip(sizes, winners):
        if runs and runs[-1][0] == win:
            runs[-1][1].append(size)
        else:
            runs.append((win, [size]))
    out = []
    for i, (win, sizes) in enumerate(runs):
        lo = 0 if i == 0 else sizes[0]
        hi = 0 if i == len(runs) - 1 else runs[i + 1][1][0] - 1
        out.append((win, lo, hi, sizes))
    return out


def tune(topology: Topology, kind: CollKind, candidates: Sequence[Candidate], sizes: Sequence[int],
         params: ModelParams, out: Path, dialect: Dialect = Dialect.EXECUTOR, inplace: bool | None = None,
         root: int | None = None, progress: Callable[[str], None] | None = None,
         on_compare: Callable[[Comparison], None] | None = None,
         timer: Callable[[Program, Topology], list[float]] | None = None) -> list[Window]:
    """Pick the best candidate per size, write one checked XML per window and a manifest
    (``on_compare`` gets the comparison the windows come from, e.g. for ``--html``).

    ``out/msccl-algorithms/`` holds only the XMLs (point MSCCL_ALGO_DIR there);
    ``out/MANIFEST.json`` lists the windows and the predicted busbw.
    """
    comparison = compare(topology, kind, candidates, sizes, params, inplace, root, progress, dialect, timer)
    if on_compare is not None:
        on_compare(comparison)
    by_label = {c.label: c for c in candidates}
    algo_dir = out / "msccl-algorithms"
    if algo_dir.exists() and any(p.suffix != ".xml" for p in algo_dir.iterdir()):
        raise SimUsageError(f"{algo_dir} holds files other than XML; choose another -o")
    texts: dict[str, str] = {}
    windows: list[Window] = []
    for n, (label, lo, hi, run) in enumerate(windows_from(comparison)):
        cand = by_label[label]
        built = compile_xml(topology, cand.algorithm, kind, inplace=inplace, root=root, params=dict(cand.params),
                            chunks=cand.chunks, instances=cand.instances, proto=cand.proto, dialect=dialect,
                            min_bytes=lo, max_bytes=hi, name=f"{cand.algorithm}-w{n}", keep_schedule=False)
        if not built.report.ok:
            raise SimUsageError(f"window {human(lo)}..{human(hi) if hi else 'inf'} ({label}) fails its check at "
                                f"its largest size: {built.report.errors()[0].message}")
        fname = _window_file(n, kind, label, ".xml")
        texts[fname] = built.text
        rows = comparison.series[label]
        busbw = tuple(r.busbw for r in rows if r.size in run)
        windows.append(Window(label, lo, hi, tuple(run), busbw, fname, count_multiple(built.program)))
    manifest = {"topology": topology.name, "collective": kind.value, "model": params.model,
                "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw,
                "model_summary": model_summary(params, topology), "count_multiple_note": COUNT_MULTIPLE_NOTE,
                "windows": [{"file": f"msccl-algorithms/{w.file}", "candidate": w.candidate,
                             "minBytes": w.min_bytes, "maxBytes": w.max_bytes, "sizes": list(w.sizes),
                             "count_multiple": w.count_multiple,
                             "predicted_busbw_GBps": [round(x, 4) for x in w.busbw]} for w in windows],
                "not_compared": comparison.failed}
    _write_tuned(out, texts, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return windows


def _window_file(n: int, kind: CollKind, label: str, suffix: str) -> str:
    """The file of window ``n``: its number, collective and candidate, in characters any file system keeps."""
    return f"{n:02d}-{kind.value}-{re.sub(r'[^A-Za-z0-9_.=-]+', '_', label)}{suffix}"


def _write_tuned(out: Path, texts: dict[str, str], manifest: str, subdir: str = "msccl-algorithms",
                 beside: dict[str, str] | None = None) -> None:
    """``out/SUBDIR/*`` and ``out/MANIFEST.json`` (and the ``beside`` files next to it), each set
    replaced as a whole: the new directory is built under a hidden name and swapped in (``collc.outputs``)."""
    output_dir(out)
    tops = {"MANIFEST.json": manifest, **(beside or {})}
    if not out.exists():
        tmp = new_temp_dir(out)
        try:
            os.mkdir(tmp / subdir, 0o777)
            for fname, text in texts.items():
                write_into(tmp / subdir, fname, text)
            for fname, text in tops.items():
                write_into(tmp, fname, text)
        except BaseException:
            discard(tmp)
            raise
        publish_dir(tmp, out, replace=False)
        return
    algo_dir = out / subdir
    tmp = new_temp_dir(algo_dir)
    try:
        for fname, text in texts.items():
            write_into(tmp, fname, text)
    except BaseException:
        discard(tmp)
        raise
    with signals_blocked():     # the files and their manifest change together
        publish_dir(tmp, algo_dir, replace=True)
        for fname, text in tops.items():
            write_file(out / fname, text)


#: ``collc tune --backend mscclpp``: the plans' directory under ``-o`` (one ``MSCCLPP_EXECUTION_PLAN_DIR``)
#: and the registration module beside it (MSCCL++ v0.9+; outside the directory, whose every file the
#: v0.8 NCCL shim reads as a plan)
PLAN_SUBDIR = "mscclpp-plans"
PLAN_MODULE = "collc_plans"


def tune_plans(topology: Topology, kind: CollKind, candidates: Sequence[Candidate], sizes: Sequence[int],
               params: ModelParams, out: Path, inplace: bool | None = None, root: int | None = None,
               progress: Callable[[str], None] | None = None,
               on_compare: Callable[[Comparison], None] | None = None) -> list[Window]:
    """``tune`` for MSCCL++: the best plan per size window (:func:`compare_plans`), each built with its
    window as ``min_message_size``/``max_message_size`` and checked; writes ``out/mscclpp-plans/*.json``,
    the registration module ``out/collc_plans.py`` and ``out/MANIFEST.json`` (docs/mscclpp-backend.md)."""
    from collc.backends.mscclpp_loader import PlanEntry, register_snippet

    comparison = compare_plans(topology, kind, candidates, sizes, params, inplace, root, progress)
    if on_compare is not None:
        on_compare(comparison)
    for size, t in zip(comparison.sizes, comparison.standings()):
        if not t:
            raise SimUsageError(f"no candidate plan runs {human(size)} (MSCCL++ needs 16 B per input chunk and "
                                f"rank); give sizes the candidates divide")
    by_label = {c.label: c for c in candidates}
    plan_dir = out / PLAN_SUBDIR
    if plan_dir.exists() and any(p.suffix != ".json" for p in plan_dir.iterdir()):
        raise SimUsageError(f"{plan_dir} holds files other than JSON plans; choose another -o")
    texts: dict[str, str] = {}
    windows: list[Window] = []
    entries: list[PlanEntry] = []
    bounds: list[tuple[int, int]] = []       # each plan's own message-size window (the last: the offset limit)
    for n, (label, lo, hi, run) in enumerate(windows_from(comparison)):
        name = f"collc-{kind.value}-w{n}"
        try:
            built = _build_plan(topology, kind, by_label[label], inplace, root, check=True, min_bytes=lo,
                                max_bytes=hi, name=name)
        except CollcError as exc:
            raise SimUsageError(f"window {human(lo)}..{human(hi) if hi else 'inf'} ({label}) fails: {exc}") from None
        fname = _window_file(n, kind, label, ".json")
        texts[fname] = built.text
        entries.append(PlanEntry(fname, built.plan.name, built.plan.collective, built.plan.nranks))
        rows = comparison.series[label]
        busbw = tuple(r.busbw for r in rows if r.size in run)
        windows.append(Window(label, lo, hi, tuple(run), busbw, fname))
        bounds.append((built.plan.min_message_size, built.plan.max_message_size))
    manifest = {"topology": topology.name, "collective": kind.value, "backend": "mscclpp", "model": "event-plan",
                "alpha_us": params.alpha_us, "link_bw_GBps": params.link_bw, "proxy_us": params.proxy_us,
                "model_summary": comparison.model, "register_module": f"{PLAN_MODULE}.py",
                "windows": [{"file": f"{PLAN_SUBDIR}/{w.file}", "candidate": w.candidate,
                             "min_message_size": lo, "max_message_size": hi, "sizes": list(w.sizes),
                             "predicted_busbw_GBps": [round(x, 4) for x in w.busbw]}
                            for w, (lo, hi) in zip(windows, bounds)],
                "not_compared": comparison.failed}
    _write_tuned(out, texts, json.dumps(manifest, indent=2, sort_keys=True) + "\n", PLAN_SUBDIR,
                 {f"{PLAN_MODULE}.py": register_snippet(PLAN_SUBDIR, entries, PLAN_MODULE)})
    return windows
