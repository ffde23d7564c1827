"""The report's one chart module: plotly figures for every section (env stepping, JAX, learners, replay,
profiles), one palette, and the HTML that embeds them. plotly.js is inlined once in the page's head
(`plotlyjs_for`), so a report opens offline as one file; div ids are given by the caller, so rebuilding a report
from the same results gives the same bytes.
"""
from __future__ import annotations  # the type hints name plotly's classes, which may be missing

import hashlib
import math
import re

try:
    import plotly.graph_objects as go
except ModuleNotFoundError as exc:  # the tables need no plotly; the page does (rlbench.report.exporters)
    if exc.name != "plotly":
        raise
    go = None

from rlbench.report.format import ci, esc, pct, si
from rlbench.results.text import is_num


def available() -> bool:
    """Whether plotly (the report extra) is installed here: the page needs it."""
    return go is not None


# One palette for every chart: series take its colours in order (sorted series names).
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22", "#393b79", "#637939")
# Stages of a time split (learners' session metrics, py-spy profiles), the same colour wherever they appear.
STAGE_COLOURS = {"env": PALETTE[2], "inference": PALETTE[0], "learn": PALETTE[4], "transfer": PALETTE[3],
                 "sync": PALETTE[5], "wait": PALETTE[1], "ipc": PALETTE[1], "harness": PALETTE[8],
                 "other": "#c7c7c7", "setup": "#eeeeee"}
# Reference lines (machine limits): greys and a brown, dashed, apart from the series' colours.
REFERENCE_COLOURS = ("#444444", "#888888", "#b35900")

# No plotly logo and no "share chart" button (both lead off the page); a PNG download at twice the size.
CONFIG = {"displaylogo": False, "showSendToCloud": False, "responsive": True,
          "modeBarButtonsToRemove": ["select2d", "lasso2d", "sendChartToCloud"],
          "toImageButtonOptions": {"format": "png", "scale": 2}}
MARKER = "plotly-graph-div"  # the class plotly gives every chart's div
DASHES = {"": "solid", "solid": "solid", "dash": "dash", "dot": "dot", "dashdot": "dashdot"}


def _records(data) -> list:
    """Plain dicts from a list of dicts or a pandas DataFrame."""
    if hasattr(data, "to_dict"):
        return data.to_dict("records")
    return list(data)


def _positive(v) -> bool:
    return is_num(v) and v > 0


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _layout(fig, height: int, **kw):
    layout = dict(template="plotly_white", height=height, margin=dict(l=70, r=20, t=20, b=50), hovermode="closest",
                  font=dict(size=12), legend=dict(font=dict(size=11)), hoverlabel=dict(align="left"))
    fig.update_layout(**{**layout, **kw})


def scaling(data, x, y, series, *, lo=None, hi=None, n=None, cv=None, label=None, variant=None, dashes=None,
            x_title: str, y_title: str, y_fmt=si, x_fmt=str, y_ticks: str = "si", hlines=(),
            height: int = 420) -> go.Figure:
    """A log-log chart of y vs x, one colour per series, lines through each series' points.

    data: rows (dicts or a DataFrame); x, y, series, lo, hi, n, cv, label, variant: the names of their
    columns. lo/hi: the 95% CI of y, drawn as error bars and a shaded band; n, cv: the repeats and their
    coefficient of variation, shown on hover with the median and CI; label: what a point is (its cell id).
    variant: a column splitting a series into lines of the same colour (p50 / p99, measured / ideal), styled
    by dashes {variant: 'solid' | 'dash' | 'dot'}; the empty variant is the series itself. hlines:
    [(name, y, colour)] reference lines across the chart (machine limits). Points with no positive y are
    left out (a log axis). y_ticks: 'si' (1k, 10M) or 'plain' (0.1, 1, 10)."""
    rows = [r for r in _records(data) if _positive(r.get(y)) and _positive(r.get(x))]
    fig = go.Figure()
    by_series = {}
    for r in rows:
        by_series.setdefault(str(r[series]), []).append(r)
    for i, (name, pts) in enumerate(sorted(by_series.items())):
        colour = PALETTE[i % len(PALETTE)]
        variants = {}
        for r in pts:
            variants.setdefault(str(r.get(variant) or "") if variant else "", []).append(r)
        for v, line in variants.items():
            line = sorted(line, key=lambda r: r[x])
            _line(fig, line, f"{name} {v}".strip(), colour, DASHES.get((dashes or {}).get(v, ""), "solid"),
                  x=x, y=y, lo=lo, hi=hi, n=n, cv=cv, label=label, x_title=x_title, y_fmt=y_fmt, x_fmt=x_fmt)
    xs = sorted({r[x] for r in rows})
    for k, (name, value, colour) in enumerate(hlines):
        if not (_positive(value) and xs):
            continue
        fig.add_trace(go.Scatter(
            x=[xs[0], xs[-1]], y=[value, value], mode="lines", name=esc(name), legendgroup=f"ref {k}",
            line=dict(color=colour, dash="dash", width=1.5),
            hovertemplate=(esc(name) if y_fmt(value) in name else f"{esc(name)}: {esc(y_fmt(value))}")
            + "<extra></extra>"))
    xaxis = dict(type="log", title=dict(text=esc(f"{x_title} (log scale)")), showline=True, linecolor="#999",
                 mirror=True)
    ticks = _spaced(xs)
    if ticks:  # ticks at measured x, as the reader knows them (4, 16, 10 MB), apart enough not to collide
        xaxis.update(tickmode="array", tickvals=ticks, ticktext=[esc(x_fmt(v)) for v in ticks])
    yaxis = dict(type="log", title=dict(text=esc(f"{y_title} (log scale)")), showline=True, linecolor="#999",
                 mirror=True, exponentformat="SI" if y_ticks == "si" else "none")
    entries = sum(1 for t in fig.data if t.showlegend is not False)
    _layout(fig, max(height, 90 + 30 * entries), xaxis=xaxis, yaxis=yaxis)  # room for the whole legend
    return fig


def _spaced(xs, most: int = 12) -> list:
    """Of the measured x (sorted, positive), those at least 1/most of the log range after the last kept
    one."""
    if len(xs) < 2:
        return list(xs)
    gap = (math.log10(xs[-1]) - math.log10(xs[0])) / most
    kept = [xs[0]]
    for v in xs[1:]:
        if math.log10(v) - math.log10(kept[-1]) >= gap:
            kept.append(v)
    return kept


def _line(fig, pts, name, colour, dash, *, x, y, lo, hi, n, cv, label, x_title, y_fmt, x_fmt):
    """One series (or variant) as a band trace (its CI, when 2+ points have one) and a line-and-markers
    trace with error bars; the band shares the line's legend entry, so one click hides both."""
    def bound(r, key):
        return r.get(key) if key and _positive(r.get(key)) else None
    has_ci = [bound(r, lo) is not None and bound(r, hi) is not None for r in pts]
    group = name
    band = [r for r, ok in zip(pts, has_ci) if ok]
    if len(band) > 1:
        fig.add_trace(go.Scatter(
            x=[r[x] for r in band] + [r[x] for r in reversed(band)],
            y=[r[hi] for r in band] + [r[lo] for r in reversed(band)],
            fill="toself", fillcolor=_rgba(colour, 0.12), line=dict(width=0), mode="lines", hoverinfo="skip",
            showlegend=False, legendgroup=group, name=esc(f"{name} 95% CI")))
    stats = bool(n) and any(is_num(r.get(n)) for r in pts)
    custom = [[esc(r.get(label, "") if label else name), esc(x_fmt(r[x])), esc(y_fmt(r[y])),
               esc(ci(bound(r, lo), bound(r, hi), y_fmt)), esc(r.get(n) if n and is_num(r.get(n)) else "-"),
               esc(pct(r.get(cv)) if cv else "-")] for r in pts]
    if stats:
        hover = (f"<b>%{{customdata[0]}}</b><br>{esc(x_title)}: %{{customdata[1]}}<br>median: %{{customdata[2]}}"
                 "<br>95% CI: %{customdata[3]}<br>n: %{customdata[4]}, CV: %{customdata[5]}"
                 "<extra>%{fullData.name}</extra>")
    else:  # a derived line (the ideal): its value only
        hover = (f"<b>%{{customdata[0]}}</b><br>{esc(x_title)}: %{{customdata[1]}}<br>value: %{{customdata[2]}}"
                 "<extra>%{fullData.name}</extra>")
    error = None
    if any(has_ci):
        error = dict(type="data", symmetric=False, color=colour, thickness=1.5, width=4,
                     array=[r[hi] - r[y] if ok else None for r, ok in zip(pts, has_ci)],
                     arrayminus=[r[y] - r[lo] if ok else None for r, ok in zip(pts, has_ci)])
    fig.add_trace(go.Scatter(
        x=[r[x] for r in pts], y=[r[y] for r in pts], mode="lines+markers", name=esc(name), legendgroup=group,
        line=dict(color=colour, dash=dash, width=2), marker=dict(color=colour, size=7 if stats else 5),
        error_y=error, customdata=custom, hovertemplate=hover))


def stacked_bars(items, parts, *, x_title: str = "share of the time", height: int = None) -> go.Figure:
    """items: [(label, {part: share})] or [(label, {part: share}, hover note)]; parts: [(key, legend text,
    colour)]. One horizontal bar per item, top to bottom, its segments in `parts` order, one trace (legend
    entry) per part. A segment shows its share inside, level, only where it fits (never rotated, never
    overlapping); hovering shows the item, the part, the share and the item's note."""
    labels = [item[0] for item in items]
    notes = [esc(item[2]) if len(item) > 2 and item[2] else "" for item in items]
    fig = go.Figure()
    for key, text, colour in parts:
        shares = [item[1].get(key) for item in items]
        shares = [s if _positive(s) else None for s in shares]
        if not any(shares):
            continue
        fig.add_trace(go.Bar(
            y=labels, x=shares, orientation="h", name=esc(text), marker=dict(color=colour),
            text=[pct(s, 0) if s else "" for s in shares], textposition="inside", insidetextanchor="middle",
            textangle=0, textfont=dict(color="#fff"), customdata=[[pct(s, 1), note] for s, note in zip(shares, notes)],
            hovertemplate=f"<b>%{{y}}</b><br>{esc(text)}: %{{customdata[0]}}<br>%{{customdata[1]}}<extra></extra>"))
    short = [esc(label if len(label) <= 52 else label[:51] + "\u2026") for label in labels]
    _layout(fig, height or 90 + 30 * len(items), barmode="stack", uniformtext=dict(minsize=10, mode="hide"),
            xaxis=dict(range=[0, 1], tickformat=".0%", title=dict(text=esc(x_title))),
            yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels, ticktext=short, automargin=True),
            legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", traceorder="normal", font=dict(size=11)),
            margin=dict(l=10, r=20, t=40, b=45))
    return fig


def history(points, changes=(), *, y_title: str = "env steps/s", height: int = 340) -> go.Figure:
    """One cell's series over runs: a line per machine class through each run's median with its 95% CI (band
    and bars; hover: median, CI, n, CV), and each change point a dashed line labelled with its size and
    significance (red: slower). points: rows with x (the run's place among every run shown), x_label (its
    commit), label (what the run is), series (the machine class's label), median, ci_low, ci_high, n, cv;
    changes: [(x, text, slower)]."""
    rows = [r for r in _records(points) if _positive(r.get("median"))]
    fig = go.Figure()
    names = {r["x"]: r["x_label"] for r in rows}
    by_series = {}
    for r in rows:
        by_series.setdefault(str(r["series"]), []).append(r)
    for i, (name, pts) in enumerate(sorted(by_series.items())):
        _line(fig, sorted(pts, key=lambda r: r["x"]), name, PALETTE[i % len(PALETTE)], "solid", x="x", y="median",
              lo="ci_low", hi="ci_high", n="n", cv="cv", label="label", x_title="commit", y_fmt=si,
              x_fmt=lambda v: names.get(v, str(v)))
    for x, text, slower in changes:
        fig.add_vline(x=x - 0.5, line=dict(color=PALETTE[1] if slower else PALETTE[2], dash="dash", width=1.5),
                      annotation=dict(text=esc(text), font=dict(size=11), textangle=0),
                      annotation_position="top left")
    ticks = sorted(names.items())
    ticks = ticks[::max(1, math.ceil(len(ticks) / 16))]   # at most 16 commit labels under a long series
    _layout(fig, height, showlegend=True,
            xaxis=dict(title=dict(text="runs, in commit order"), tickmode="array", showline=True, linecolor="#999",
                       tickvals=[x for x, _ in ticks], ticktext=[esc(t) for _, t in ticks], mirror=True),
            yaxis=dict(title=dict(text=esc(y_title)), exponentformat="SI", showline=True, linecolor="#999",
                       mirror=True, rangemode="tozero"),
            legend=dict(orientation="h", x=0, y=-0.25, yanchor="top"), margin=dict(l=70, r=20, t=30, b=90))
    return fig


def to_html(fig, div_id: str) -> str:
    """The chart's <div> and the script that draws it (plotly.js itself comes once per page, from
    plotlyjs_for); data-traces holds how many traces it should draw (scripts/check_report.py counts them)."""
    div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG,
                      default_width="100%", default_height=f"{fig.layout.height or 420}px")
    return f"<div class='chart' data-traces='{len(fig.data)}'>{div}</div>"


def plotlyjs_for(body: str) -> str:
    """plotly.js inlined in a <script>, when the page's body holds a chart; else nothing."""
    if MARKER not in body:
        return ""
    from plotly.offline import get_plotlyjs
    return f"<script type='text/javascript'>{get_plotlyjs()}</script>"


def chart_id(*parts) -> str:
    """A stable, unique-looking div id from what the chart shows (section, env label, metric)."""
    text = "-".join(str(p) for p in parts)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48]
    return f"chart-{slug}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"
