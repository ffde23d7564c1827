"""compare.csv and compare.html: one row per cell, base vs new, with the verdict, the ratio new/base with its
bootstrap 95% CI, and why; both rendered from one CompareView (rlbench.report.view) and written by the one
writer."""
import os

from rlbench.report.csv_reporter import frame_to_csv
from rlbench.report.format import data_v, esc, fixed, rate, speedup
from rlbench.report.html import CSS, SORT_JS
from rlbench.report.view import CompareView
from rlbench.report.writer import write_files
from rlbench.results.compare import Comparison

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


def _row(r) -> str:
    return (f"<tr style='background:{COLOURS.get(r['verdict'], 'none')}'><td>{esc(r['cell_id'])}</td>"
            f"<td>{esc(r['verdict'])}</td>"
            f"<td data-v='{data_v(r['base_median'])}'>{rate(r['base_median'])}</td>"
            f"<td data-v='{data_v(r['new_median'])}'>{rate(r['new_median'])}</td>"
            f"<td data-v='{data_v(r['change_pct'])}'>{fixed(r['change_pct'], '+.1f')}</td>"
            f"<td data-v='{data_v(r['ratio'])}'>{esc(speedup(r['ratio'], r['ratio_ci_low'], r['ratio_ci_high']))}</td>"
            f"<td data-v='{data_v(r['p_value'])}'>{fixed(r['p_value'], '.3g')}</td>"
            f"<td>{r['base_n'] or 0} / {r['new_n'] or 0}</td><td>{esc(r['reason'] or '')}</td></tr>")


def winners_table(view: CompareView) -> str:
    """Each workload's verdict in base and in new (the runs' own headlines), the change of winner marked."""
    rows = "".join(f"<tr style='background:{COLOURS['uncertain'] if changed else 'none'}'><td>{esc(label)}</td>"
                   f"<td>{esc(b.sentence() if b else '-')}</td><td>{esc(n.sentence() if n else '-')}</td>"
                   f"<td>{'yes' if changed else ''}</td></tr>" for label, b, n, changed in view.winners)
    if not rows:
        return ""
    return ("<h2>Fastest per workload</h2><table><thead><tr><th>workload</th><th>base</th><th>new</th>"
            f"<th>winner changed</th></tr></thead><tbody>{rows}</tbody></table>")


def page(view: CompareView) -> str:
    c = view.comparison
    head = ("<tr><th>cell</th><th>verdict</th><th>base steps/s</th><th>new steps/s</th><th>change %</th>"
            "<th>new/base [95% CI]</th><th>p</th><th>n base / new</th><th>reason</th></tr>")
    body = "".join(_row(r) for r in view.records)
    machines = "".join(f"<tr><td>{esc(k)}</td><td>{esc(b)}</td><td>{esc(n)}</td></tr>" for k, b, n in view.machines)
    verdict = (f"<p><b>{len(c.regressions)} regression(s)</b>: slower by more than {fixed(c.threshold, '.0%')} "
               f"and significant at alpha {fixed(c.alpha, 'g')}.</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>rlbench compare</title><style>{CSS}</style>"
            f"</head><body><h1>rlbench compare</h1><p>base: {esc(view.base_dir)}<br>new: {esc(view.new_dir)}</p>"
            f"{verdict}<p>{esc(c.counts_label)}</p>"
            f"<table class='sortable'><thead>{head}</thead><tbody>{body}</tbody></table>{winners_table(view)}"
            f"<h2>Machines</h2><table class='meta'><tr><th>key</th><th>base</th><th>new</th></tr>{machines}</table>"
            f"<script>{SORT_JS}</script></body></html>")
