"""One self-contained HTML page from ``collc.show.data``'s values, drawn with Plotly (docs/show.md).

Plotly's JavaScript is inlined once (``plotly.offline.get_plotlyjs``), so the page works from
``file://`` with no network.  Every figure is a Plotly figure built here; the only script of
our own is the glue that filters the timeline by rank.  The page carries what tests and
readers need as data attributes on ``<body>``: ``data-links`` (directed links drawn),
``data-steps``, ``data-timeline-rows`` and ``data-aggregate``.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collc.sim.routing import Link, Router
from collc.sim.runner import Row, human
from collc.show.data import KINDS, SizeView, StepLoads, Timeline
from collc.show.layout import Geometry
from collc.topology import Topology
from collc.topology.generators import coords

#: Colour bins of the link load (0 bytes is its own, grey).
NBINS = 8
KIND_COLOURS = {"send": "#1f77b4", "receive": "#2ca02c", "reduce": "#9467bd", "wait": "#ff7f0e"}
CONFIG = {"displaylogo": False, "responsive": True}


def _mib(nbytes: float) -> str:
    if nbytes >= 1 << 30:
        return f"{nbytes / (1 << 30):.3g} GiB"
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.3g} MiB"
    if nbytes >= 1 << 10:
        return f"{nbytes / (1 << 10):.3g} KiB"
    return f"{nbytes:.3g} B"


def _r(x: float) -> float:
    """Rounded for the page (4 significant digits keep it small)."""
    return float(f"{x:.4g}") if math.isfinite(x) else 0.0


# --------------------------------------------------------------------------- fabric
def _frames_of(loads: StepLoads) -> list[tuple[str, str, dict[Link, float]]]:
    """(frame name, slider label, loads) per step, then the sum over all steps."""
    out = [(f"step {i}", f"{i}", s) for i, s in enumerate(loads.steps)]
    out.append(("all steps", "all", loads.total()))
    return out


def fabric_figure(topology: Topology, geo: Geometry, loads: StepLoads) -> Any:
    """Every directed link coloured by its bytes, a slider over the steps, the busiest link haloed."""
    import plotly.colors as pc  # type: ignore[import-untyped]
    import plotly.graph_objects as go  # type: ignore[import-untyped]

    router = Router(topology)
    links = sorted(geo.segments)
    index = {lk: i for i, lk in enumerate(links)}
    frames = _frames_of(loads)
    top = max((max(s.values(), default=0.0) for _, _, s in frames[:-1]), default=0.0) or 1.0
    colours = pc.sample_colorscale("YlOrRd", [0.3 + 0.7 * i / (NBINS - 1) for i in range(NBINS)])

    def line_xy(sel: Sequence[Link]) -> tuple[list[float | None], list[float | None]]:
        xs: list[float | None] = []
        ys: list[float | None] = []
        for lk in sel:
            for (x0, y0), (x1, y1) in geo.segments[lk]:
                xs += [_r(x0), _r(x1), None]
                ys += [_r(y0), _r(y1), None]
        return xs, ys

    mids = [geo.segments[lk][0] for lk in links]
    mx = [_r((a[0] + b[0]) / 2) for a, b in mids]
    my = [_r((a[1] + b[1]) / 2) for a, b in mids]

    def traces(step_loads: dict[Link, float], name: str) -> list[Any]:
        busiest = (max(sorted(step_loads), key=lambda lk: step_loads[lk] / router.capacity(lk))
                   if step_loads else None)
        bins: list[list[Link]] = [[] for _ in range(NBINS + 1)]
        for lk in links:
            b = step_loads.get(lk, 0.0)
            bins[0 if b <= 0 else min(NBINS, max(1, math.ceil(b / top * NBINS)))].append(lk)
        out = []
        hx, hy = line_xy([busiest] if busiest else [])
        out.append(go.Scatter(x=hx, y=hy, mode="lines", line={"color": "rgba(220,20,60,0.35)", "width": 12},
                              hoverinfo="skip", name="busiest", showlegend=False,
                              customdata=[index[busiest]] if busiest else []))
        for i, sel in enumerate(bins):
            x, y = line_xy(sel)
            out.append(go.Scatter(x=x, y=y, mode="lines", hoverinfo="skip", showlegend=False, name=f"bin {i}",
                                  line={"color": "#d0d0d0" if i == 0 else colours[i - 1],
                                        "width": 1.0 if i == 0 else 1.6 + 0.3 * i}))
        vals = [_r(step_loads.get(lk, 0.0)) for lk in links]
        text = [f"{a} → {b}: {_mib(v)}{'  (busiest)' if (a, b) == busiest else ''}" for (a, b), v in
                zip(links, vals)]
        out.append(go.Scatter(x=mx, y=my, mode="markers", name="links", showlegend=False, hovertext=text,
                              hoverinfo="text", customdata=list(range(len(links))),
                              marker={"size": 5, "color": vals, "cmin": 0, "cmax": _r(top),
                                      "colorscale": [[0, "#d0d0d0"], [1e-9, colours[0]], [1, colours[-1]]],
                                      "colorbar": {"title": {"text": "bytes"}, "thickness": 12}}))
        return out

    first = traces(frames[0][2], frames[0][0])
    n = topology.nranks
    rx = [geo.pos[r][0] for r in range(n)]
    ry = [geo.pos[r][1] for r in range(n)]
    size = 14 if n <= 64 else (9 if n <= 256 else 5)
    nodes = [go.Scatter(x=rx, y=ry, mode="markers+text" if n <= 64 else "markers", name="ranks", showlegend=False,
                        text=[str(r) for r in range(n)], textfont={"size": 8, "color": "white"},
                        hovertext=[geo.labels[r] for r in range(n)], hoverinfo="text",
                        marker={"size": size, "color": "#34495e", "line": {"width": 0}})]
    shapes = []
    if topology.nswitches:
        sw = list(topology.switches)
        nodes.append(go.Scatter(x=[geo.pos[s][0] for s in sw], y=[geo.pos[s][1] for s in sw], mode="markers",
                                name="switches", showlegend=False, hovertext=[geo.labels[s] for s in sw],
                                hoverinfo="text", marker={"symbol": "square", "size": 22, "color": "#7f8c8d"}))
        if len(sw) == 1:    # the switch fabric as a box around its switch and ranks
            xs = [p[0] for p in geo.pos.values()]
            ys = [p[1] for p in geo.pos.values()]
            shapes.append({"type": "rect", "x0": min(xs) - 0.15, "x1": max(xs) + 0.15, "y0": min(ys) - 0.15,
                           "y1": max(ys) + 0.15, "line": {"color": "#7f8c8d", "dash": "dot"}, "layer": "below"})
    fig = go.Figure(data=first + nodes)
    ntr = len(first)
    fig.frames = [go.Frame(name=name, data=traces(s, name), traces=list(range(ntr)),
                           layout={"title.text": _fabric_title(topology, loads, s, label, router)})
                  for name, label, s in frames]
    steps = [{"method": "animate", "label": label,
              "args": [[name], {"mode": "immediate", "frame": {"duration": 0, "redraw": True},
                                "transition": {"duration": 0}}]} for name, label, _ in frames]
    fig.update_layout(
        title={"text": _fabric_title(topology, loads, frames[0][2], frames[0][1], router), "font": {"size": 13}},
        sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": "step "}, "pad": {"t": 30}}],
        xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": "x"}, shapes=shapes,
        plot_bgcolor="white", margin={"l": 10, "r": 10, "t": 50, "b": 10},
        height=max(460, min(900, 120 + 70 * _rows_of(geo))), hovermode="closest")
    return fig


def _rows_of(geo: Geometry) -> int:
    ys = {round(p[1], 3) for p in geo.pos.values()}
    return min(len(ys), 14) if geo.style == "grid" else 12


def _fabric_title(topology: Topology, loads: StepLoads, step_loads: dict[Link, float], label: str,
                  router: Router) -> str:
    busiest = (max(sorted(step_loads), key=lambda lk: step_loads[lk] / router.capacity(lk)) if step_loads else None)
    which = "all steps" if label == "all" else f"step {label} of {len(loads.steps)}"
    used = sum(1 for v in step_loads.values() if v > 0)
    tail = (f"busiest {busiest[0]} → {busiest[1]}: {_mib(step_loads[busiest])}" if busiest else "no traffic")
    return (f"{topology.name} at {human(loads.size_bytes)}, {which}: {used} of {len(topology.links)} links busy, "
            f"{tail}")


def link_classes(topology: Topology) -> dict[Link, str]:
    """The class of each directed link for the aggregate view: torus/mesh dimension and direction, else
    rank/switch ends."""
    n = topology.nranks
    dims = topology.dims if topology.family in ("torus", "mesh") else None
    out: dict[Link, str] = {}
    for lk in topology.links:
        if dims is not None:
            ca, cb = coords(lk.src, dims), coords(lk.dst, dims)
            d = next((i for i in range(len(dims)) if ca[i] != cb[i]), 0)
            step = (cb[d] - ca[d]) % dims[d]
            out[(lk.src, lk.dst)] = f"dim {d} {'+' if step == 1 else '-'}"
        else:
            ends = ("rank" if lk.src < n else "switch", "rank" if lk.dst < n else "switch")
            out[(lk.src, lk.dst)] = f"{ends[0]} → {ends[1]}"
    return out


def aggregate_figure(topology: Topology, loads: StepLoads) -> Any:
    """Above the aggregate threshold: per link class the most and the mean bytes of a link, per step."""
    import plotly.graph_objects as go

    router = Router(topology)
    classes = link_classes(topology)
    names = sorted(set(classes.values()))
    members = {c: [lk for lk, k in classes.items() if k == c] for c in names}
    link_ids = {lk: i for i, lk in enumerate(sorted(classes))}
    frames = _frames_of(loads)

    def traces(step_loads: dict[Link, float]) -> list[Any]:
        most = [_r(max((step_loads.get(lk, 0.0) for lk in members[c]), default=0.0)) for c in names]
        mean = [_r(sum(step_loads.get(lk, 0.0) for lk in members[c]) / max(1, len(members[c]))) for c in names]
        busy = [sum(1 for lk in members[c] if step_loads.get(lk, 0.0) > 0) for c in names]
        busiest = (max(sorted(step_loads), key=lambda lk: step_loads[lk] / router.capacity(lk))
                   if step_loads else None)
        return [go.Bar(x=names, y=most, name="busiest link of the class", marker={"color": "#d62728"},
                       hovertext=[f"{c}: {b} of {len(members[c])} links busy" for c, b in zip(names, busy)]),
                go.Bar(x=names, y=mean, name="mean over the class's links", marker={"color": "#1f77b4"}),
                go.Scatter(x=[classes[busiest]] if busiest else [], y=[_r(step_loads[busiest])] if busiest else [],
                           mode="markers+text", name="busiest", text=[f"{busiest[0]} → {busiest[1]}"] if busiest
                           else [], textposition="top center", customdata=[link_ids[busiest]] if busiest else [],
                           marker={"symbol": "star", "size": 14, "color": "black"})]

    fig = go.Figure(data=traces(frames[0][2]))
    fig.frames = [go.Frame(name=name, data=traces(s), traces=[0, 1, 2],
                           layout={"title.text": _fabric_title(topology, loads, s, label, router)})
                  for name, label, s in frames]
    steps = [{"method": "animate", "label": label,
              "args": [[name], {"mode": "immediate", "frame": {"duration": 0, "redraw": True},
                                "transition": {"duration": 0}}]} for name, label, _ in frames]
    fig.update_layout(title={"text": _fabric_title(topology, loads, frames[0][2], "0", router), "font": {"size": 13}},
                      sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": "step "}, "pad": {"t": 40}}],
                      barmode="group", yaxis={"title": {"text": "bytes on a link"}}, height=460,
                      margin={"l": 60, "r": 10, "t": 50, "b": 10}, plot_bgcolor="white")
    return fig


# --------------------------------------------------------------------------- timeline
def timeline_payload(tl: Timeline) -> dict[str, Any]:
    """Columnar bars for the rank filter's glue: per kind rank, tb, start, duration, peer, bytes."""
    cols: dict[str, dict[str, list[Any]]] = {k: {"rank": [], "tb": [], "start": [], "dur": [], "peer": [],
                                                 "bytes": []} for k in KINDS}
    for b in tl.bars:
        c = cols[b.kind]
        c["rank"].append(b.rank)
        c["tb"].append(b.tb)
        c["start"].append(_r(b.start_us))
        c["dur"].append(_r(b.end_us - b.start_us))
        c["peer"].append(b.peer)
        c["bytes"].append(_r(b.nbytes))
    return {"kinds": list(KINDS), "colours": KIND_COLOURS, "bars": cols, "rows": [list(r) for r in tl.rows],
            "time_us": _r(tl.time_us)}


def timeline_figure(tl: Timeline) -> Any:
    """An empty timeline (axes, colours, legend); the glue fills it for the chosen rank."""
    import plotly.graph_objects as go

    fig = go.Figure(data=[go.Bar(x=[], y=[], base=[], orientation="h", name=k, marker={"color": KIND_COLOURS[k]},
                                 hoverinfo="text") for k in KINDS])
    fig.update_layout(barmode="overlay", bargap=0.15, height=420, xaxis={"title": {"text": "time (us)"}},
                      yaxis={"autorange": "reversed", "type": "category", "tickfont": {"size": 9}},
                      margin={"l": 80, "r": 10, "t": 30, "b": 40}, legend={"orientation": "h", "y": 1.08},
                      plot_bgcolor="white")
    return fig


# --------------------------------------------------------------------------- per size
def size_figure(view: SizeView) -> Any:
    """Time, algbw and busbw over sizes: this schedule, the other algorithms, the bound, measurements."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots  # type: ignore[import-untyped]

    fig = make_subplots(rows=1, cols=3, subplot_titles=("time (us)", "algbw (GB/s)", "busbw (GB/s)"),
                        horizontal_spacing=0.07)

    def add(label: str, rows: Sequence[Row], style: dict[str, Any], show: bool | str = True) -> None:
        xs = [r.size for r in rows]
        for col, ys in ((1, [r.time_us for r in rows]), (2, [r.algbw for r in rows]), (3, [r.busbw for r in rows])):
            fig.add_trace(go.Scatter(x=xs, y=[_r(y) for y in ys], name=label, legendgroup=label,
                                     showlegend=col == 1, visible=show, hovertemplate=f"{label}<br>%{{x}} B: %{{y}}"
                                     "<extra></extra>", **style), row=1, col=col)

    add(view.label + " (this schedule)", view.rows, {"mode": "lines+markers", "line": {"width": 3.5,
                                                                                     "color": "#d62728"}})
    bound = [_r(b) for b in view.bound_busbw]
    fig.add_trace(go.Scatter(x=view.sizes, y=bound, name="upper bound (bandwidth model)", legendgroup="bound",
                             mode="lines", line={"dash": "dash", "color": "black"}), row=1, col=3)
    for label, rows in view.others.items():
        add(label, rows, {"mode": "lines", "line": {"width": 1.3}}, "legendonly" if len(view.others) > 8 else True)
    for label, pts in view.measured.items():
        fig.add_trace(go.Scatter(x=[s for s, _ in pts], y=[_r(b) for _, b in pts], name=label, mode="markers",
                                 marker={"size": 8, "symbol": "diamond"}), row=1, col=3)
    for col in (1, 2, 3):
        fig.update_xaxes(type="log", title={"text": "message size (bytes)"}, row=1, col=col)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_layout(height=430, margin={"l": 50, "r": 10, "t": 40, "b": 40}, legend={"font": {"size": 10}},
                      plot_bgcolor="white")
    return fig


# --------------------------------------------------------------------------- the page
@dataclass
class Page:
    title: str
    facts: list[tuple[str, str]]
    findings: list[tuple[str, str, str]] = field(default_factory=list)    # (severity, code, message)
    notes: list[str] = field(default_factory=list)
    fabric: Any = None
    timeline: Timeline | None = None
    sizes: Any = None
    nlinks: int = 0
    nsteps: int = 0
    aggregate: bool = False
    extra: dict[str, str] = field(default_factory=dict)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1280px;padding:12px 20px;
color:#222;background:#fff}
h1{font-size:20px;margin:8px 0 4px}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
table.facts{border-collapse:collapse;font-size:13px}table.facts td{padding:2px 10px 2px 0;vertical-align:top}
table.facts td:first-child{color:#666;white-space:nowrap}.note{background:#fff6e0;border-left:4px solid #f0a500;
padding:6px 10px;font-size:13px;margin:6px 0}.ok{color:#1a7f37;font-weight:600}.bad{color:#c0392b;font-weight:600}
code{background:#f4f4f4;padding:1px 4px;border-radius:3px;font-size:12px}.how{font-size:12.5px;color:#555}
select{font-size:13px}
"""

_GLUE = """
(function () {
  var T = JSON.parse(document.getElementById('timeline-data').textContent);
  var gd = document.getElementById('timeline');
  var sel = document.getElementById('rank-filter');
  function draw(which) {
    var rows = T.rows.filter(function (r) { return which === 'all' || String(r[0]) === which; });
    var keep = {}; rows.forEach(function (r) { keep[r[0] + ':' + r[1]] = true; });
    var upd = {x: [], y: [], base: [], hovertext: []};
    T.kinds.forEach(function (k) {
      var c = T.bars[k], x = [], y = [], base = [], text = [];
      for (var i = 0; i < c.rank.length; i++) {
        if (!keep[c.rank[i] + ':' + c.tb[i]]) continue;
        x.push(c.dur[i]); base.push(c.start[i]); y.push('r' + c.rank[i] + ' tb' + c.tb[i]);
        text.push(k + ' ' + c.start[i] + '..' + (c.start[i] + c.dur[i]).toPrecision(5) + ' us' +
                  (c.peer[i] >= 0 ? (k === 'send' ? ' to ' : ' from ') + c.peer[i] : '') +
                  (c.bytes[i] > 0 ? ', ' + c.bytes[i] + ' B' : ''));
      }
      upd.x.push(x); upd.y.push(y); upd.base.push(base); upd.hovertext.push(text);
    });
    var labels = rows.map(function (r) { return 'r' + r[0] + ' tb' + r[1]; });
    Plotly.restyle(gd, upd);
    Plotly.relayout(gd, {'height': Math.max(260, Math.min(4000, 70 + 13 * rows.length)),
                         'yaxis.categoryarray': labels, 'yaxis.categoryorder': 'array'});
    document.body.setAttribute('data-timeline-shown', String(rows.length));
  }
  sel.addEventListener('change', function () { draw(sel.value); });
  draw(sel.value);
})();
"""


def render(page: Page) -> str:
    """The whole HTML document (deterministic for the same input)."""
    import plotly.offline  # type: ignore[import-untyped]

    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{html.escape(page.title)}</title><style>{_CSS}</style>",
             f"<script type=\"text/javascript\">{plotly.offline.get_plotlyjs()}</script></head>"]
    attrs = {"data-links": str(page.nlinks), "data-steps": str(page.nsteps),
             "data-timeline-rows": str(len(page.timeline.rows) if page.timeline else 0),
             "data-aggregate": "1" if page.aggregate else "0", **page.extra}
    parts.append("<body " + " ".join(f'{k}="{html.escape(v)}"' for k, v in attrs.items()) + ">")
    parts.append(f"<h1>{html.escape(page.title)}</h1>")
    for note in page.notes:
        parts.append(f"<div class=\"note\">{html.escape(note)}</div>")
    if page.fabric is not None:
        parts.append("<h2>The fabric and its load</h2>")
        parts.append("<p class=\"how\">" + html.escape(
            "Each directed link is coloured by the bytes it carries in the chosen step (grey: idle; the two "
            "directions of a link are drawn side by side). The slider walks the schedule's steps; 'all' sums "
            "them. The busiest link of the step (longest bytes / bandwidth) has a red halo and is named above. "
            "Hover a link's dot for its bytes." if not page.aggregate else
            "Too many links to draw one by one: per link class (torus dimension and direction, or the ends of "
            "the link) the busiest and the mean link's bytes in the chosen step; the star names the busiest "
            "link of the step.") + "</p>")
        parts.append(_div(page.fabric, "fabric"))
    if page.timeline is not None:
        tl = page.timeline
        ranks = sorted({r for r, _ in tl.rows})
        opts = "".join(f"<option value=\"{r}\">rank {r}</option>" for r in ranks)
        parts.append("<h2>Threadblock timeline</h2>")
        parts.append("<p class=\"how\">" + html.escape(
            f"The event model at {human(tl.size_bytes)}: one row per (rank, threadblock). send: the tb puts a "
            f"piece on the wire (the message's latency included); receive: it waits for an incoming piece; "
            f"reduce: it reduces; wait: it waits for a dependency or for FIFO space (a stall). Finishes at "
            f"{tl.time_us:.4g} us.") + "</p>")
        parts.append("<label>rank: <select id=\"rank-filter\">" + opts +
                     ("<option value=\"all\">all shown ranks</option>" if len(ranks) > 1 else "") +
                     "</select></label>")
        parts.append(_div(timeline_figure(tl), "timeline"))
        payload = json.dumps(timeline_payload(tl), separators=(",", ":")).replace("</", "<\\/")
        parts.append(f"<script type=\"application/json\" id=\"timeline-data\">{payload}</script>")
        parts.append(f"<script type=\"text/javascript\">{_GLUE}</script>")
    if page.sizes is not None:
        parts.append("<h2>Per message size</h2>")
        parts.append(_div(page.sizes, "sizes"))
    parts.append("<h2>The facts</h2><table class=\"facts\">")
    for k, v in page.facts:
        cls = ""
        if k == "check":
            cls = " class=\"ok\"" if v.startswith("passed") else " class=\"bad\""
        parts.append(f"<tr><td>{html.escape(k)}</td><td{cls}>{html.escape(v)}</td></tr>")
    parts.append("</table>")
    if page.findings:
        parts.append("<h2>Findings</h2><ul>" + "".join(
            f"<li><b>{html.escape(sev)}</b> [{html.escape(code)}] {html.escape(msg)}</li>"
            for sev, code, msg in page.findings[:200]) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _div(fig: Any, div_id: str) -> str:
    out: str = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG,
                           auto_play=False)
    return out
