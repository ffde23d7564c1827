"""history-SUITE.html and history-SUITE.csv: a suite's cells over commits, from the history (rlbench.results.history):
the open regressions first (series whose latest change point is a slowdown), then a chart per cell with a line per
machine class, its 95% CI band and the change points marked with their size and significance; the CSV holds
every point the charts draw. Rendered from the points and changes handed in (results in, bytes out) and written by
the one writer."""
from rlbench.report import charts
from rlbench.report.csv_reporter import frame_to_csv
from rlbench.report.format import esc, fixed, rate
from rlbench.report.html import CSS, SORT_JS
from rlbench.report.table import Column, table

POINT_COLUMNS = ("suite", "cell_id", "machine_class", "machine_label", "run_id", "git_commit", "commit_time",
                 "run_started_at", "tag", "n", "median", "ci_low", "ci_high", "cv", "change_ratio", "change_p",
                 "noise_sd", "noise_source")

REGRESSION_COLUMNS = (Column("cell", lambda r: r["cell_id"]), Column("machine", lambda r: r["machine"]),
                      Column("since", lambda r: r["since"]),
                      Column("before steps/s", lambda r: r["before"], rate),
                      Column("now steps/s", lambda r: r["after"], rate),
                      Column("change %", lambda r: 100 * (r["ratio"] - 1), lambda v: fixed(v, "+.1f")),
                      Column("p", lambda r: r["p"], lambda v: fixed(v, ".3g")))


def open_regressions(changes: dict, labels: dict) -> list:
    """Series whose latest significant change is a slowdown: nothing after it brought the level back."""
    out = []
    for (suite, cell, cls), found in sorted(changes.items()):
        if found and found[-1].ratio < 1:
            c = found[-1]
            out.append({"suite": suite, "cell_id": cell, "machine": labels.get(cls, cls),
                        "since": f"{(c.commit or '')[:7]} ({c.run_id})", "before": c.before, "after": c.after,
                        "ratio": c.ratio, "p": c.p_value})
    return out


def export_history(suite: str, pts, changes: dict, noises: dict) -> dict:
    """The suite's page and CSV, as bytes. pts: its points (rlbench.results.changes.points); changes and
    noises: by (suite, cell_id, machine_class)."""
    pts = pts.reset_index(drop=True)
    order = pts.assign(_o=pts["commit_time"].fillna(pts["run_started_at"])) \
        .sort_values(["_o", "run_started_at"])["run_key"].drop_duplicates().tolist()
    place = {k: i for i, k in enumerate(order)}
    labels = dict(zip(pts["machine_class"], pts["machine_label"]))
    rows = []
    for key, series in pts.groupby(["suite", "cell_id", "machine_class"], sort=True):
        starts = {c.index: c for c in changes.get(key, [])}
        nz = noises.get(key)
        for i, (_, p) in enumerate(series.iterrows()):
            c = starts.get(i)
            rows.append({**{k: p.get(k) for k in POINT_COLUMNS if k in p}, "run_key": p["run_key"],
                         "change_ratio": c.ratio if c else None, "change_p": c.p_value if c else None,
                         "noise_sd": nz.sd if nz else None, "noise_source": nz.source if nz else None})
    import pandas as pd
    frame = pd.DataFrame(rows, columns=[*POINT_COLUMNS, "run_key"])
    csv = frame_to_csv(frame[list(POINT_COLUMNS)])
    return {f"history-{suite}.csv": csv.encode(),
            f"history-{suite}.html": page(suite, frame, place, changes, noises, labels).encode()}


def page(suite, frame, place, changes, noises, labels) -> str:
    regressions = open_regressions(changes, labels)
    cells = sorted(frame["cell_id"].unique())
    parts = [f"<h1>rlbench history: {esc(suite)}</h1>",
             f"<p>{len(cells)} cells, {len(place)} runs, {len(labels)} machine class(es): "
             + esc("; ".join(sorted(labels.values()))) + ". A point is one run's median env steps/s over its repeats "
             "(the band: its 95% CI); a dashed line is a change point (red: slower), kept where the segments it "
             "splits differ beyond the machine's run-to-run noise (p shown).</p>",
             "<h2>Open regressions</h2>",
             table(REGRESSION_COLUMNS, regressions) if regressions else "<p>None: no series' latest change is a "
                                                                        "slowdown.</p>",
             "<h2>Cells</h2>"]
    for cell in cells:
        mine = frame[frame["cell_id"] == cell]
        points = [{"x": place[r["run_key"]], "x_label": (r["git_commit"] or r["run_id"] or "")[:7],
                   "label": " ".join(str(v) for v in (r["run_id"], r["tag"]) if v),
                   "series": labels[r["machine_class"]], "median": r["median"], "ci_low": r["ci_low"],
                   "ci_high": r["ci_high"], "n": r["n"], "cv": r["cv"]}
                  for _, r in mine.iterrows()]
        marks, notes = [], []
        for cls in sorted(mine["machine_class"].unique()):
            key = (suite, cell, cls)
            series = mine[mine["machine_class"] == cls].reset_index(drop=True)
            for c in changes.get(key, []):
                marks.append((place[series.iloc[c.index]["run_key"]], f"{100 * (c.ratio - 1):+.1f}% p={c.p_value:.2g}",
                              c.ratio < 1))
            if key in noises:
                notes.append(f"{labels[cls]}: run-to-run noise {noises[key].sd:.1%} ({noises[key].source})")
        fig = charts.history(points, marks)
        parts.append(f"<h3>{esc(cell)}</h3><p class='meta'>{esc('; '.join(notes))}</p>"
                     + charts.to_html(fig, charts.chart_id("history", suite, cell)))
    body = "".join(parts)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>rlbench history: {esc(suite)}</title>"
            f"<style>{CSS}</style>{charts.plotlyjs_for(body)}</head><body>{body}<script>{SORT_JS}</script>"
            "</body></html>")
