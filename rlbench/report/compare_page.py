"""compare.csv and compare.html: one row per cell, base vs new, with the verdict, the ratio new/base with its
bootstrap 95% CI, and why; both rendered from one CompareView (rlbench.report.view) and written by the one
writer."""
import os

from rlbench.report.csv_reporter import frame_to_csv
from rlbench.report.format import esc, fixed, rate
from rlbench.report.html import CSS, SORT_JS
from rlbench.report.table import Column, table
from rlbench.report.view import CompareView
from rlbench.report.writer import write_files
from rlbench.results.compare import Comparison
from rlbench.results.text import speedup

COLOURS = {"slower": "#fbe3e3", "faster": "#e3f4e3", "not comparable": "#eeeeee", "uncertain": "#fff6dd",
           "failed": "#fbe3e3"}


def write(comparison: Comparison, base_dir: str, new_dir: str, out_dir: str, base=None, new=None) -> list:
    """compare.csv and compare.html into out_dir, through the one writer; the paths."""
    return write_view(CompareView(comparison, base_dir, new_dir, base, new), out_dir)


def write_view(view: CompareView, out_dir: str) -> list:
    os.makedirs(out_dir, exist_ok=True)
    return write_files(out_dir, export_compare(view))


def export_compare(view: CompareView) -> dict:
    """compare.csv (compare's COLUMNS, one row per cell) and compare.html, as bytes."""
    return {"compare.csv": frame_to_csv(view.rows).encode(), "compare.html": page(view).encode()}


def _ratio(c) -> str:
    return esc(speedup(c.ratio, c.ratio_low, c.ratio_high))


def _shade(colour: str) -> str:
    return f"style='background:{colour}'"


# a row: a compared cell's CellChange (rlbench.results.gate), shaded by its verdict
CELL_COLUMNS = (Column("cell", lambda c: c.cell_id), Column("verdict", lambda c: c.verdict),
                Column("base steps/s", lambda c: c.base, rate),
                Column("new steps/s", lambda c: c.new, rate),
                Column("change %", lambda c: c.change_pct, lambda v: fixed(v, "+.1f")),
                Column("new/base [95% CI]", lambda c: c.ratio, html=_ratio),
                Column("p", lambda c: c.p_value, lambda v: fixed(v, ".3g")),
                Column("n base / new", lambda c: f"{c.base_n or 0} / {c.new_n or 0}"),
                Column("reason", lambda c: c.reason or ""))

# a row: (workload, base verdict, new verdict, whether the winner changed), as CompareView.winners gives it
WINNER_COLUMNS = (Column("workload", lambda w: w[0]), Column("base", lambda w: w[1].sentence() if w[1] else "-"),
                  Column("new", lambda w: w[2].sentence() if w[2] else "-"),
                  Column("winner changed", lambda w: "yes" if w[3] else ""))


def _changed(winner) -> str:
    """A workload whose fastest strategy changed stands out."""
    return _shade(COLOURS["uncertain"] if winner[3] else "none")


def winners_table(view: CompareView) -> str:
    """Each workload's verdict in base and in new (the runs' own headlines), the change of winner marked."""
    if not view.winners:
        return ""
    return "<h2>Fastest per workload</h2>" + table(WINNER_COLUMNS, view.winners, _changed, cls="")


def page(view: CompareView) -> str:
    c = view.comparison
    cells = table(CELL_COLUMNS, view.changes, lambda c: _shade(COLOURS.get(c.verdict, "none")))
    machines = "".join(f"<tr><td>{esc(k)}</td><td>{esc(b)}</td><td>{esc(n)}</td></tr>" for k, b, n in view.machines)
    verdict = (f"<p><b>{len(c.regressions)} regression(s)</b>: slower by more than {fixed(c.threshold, '.0%')} "
               f"and significant at alpha {fixed(c.alpha, 'g')}, beyond a run-to-run noise of "
               f"{fixed(c.run_sd, '.1%')}.</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>rlbench compare</title><style>{CSS}</style>"
            f"</head><body><h1>rlbench compare</h1><p>base: {esc(view.base_dir)}<br>new: {esc(view.new_dir)}</p>"
            f"{verdict}<p>{esc(c.counts_label)}</p>"
            f"{cells}{winners_table(view)}"
            f"<h2>Machines</h2><table class='meta'><tr><th>key</th><th>base</th><th>new</th></tr>{machines}</table>"
            f"<script>{SORT_JS}</script></body></html>")
