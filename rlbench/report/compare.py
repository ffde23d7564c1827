"""compare.csv and compare.html: one row per cell, base vs new, with the verdict, the ratio new/base with its
bootstrap 95% CI, and why."""
import math
import os

from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import esc as _e
from rlbench.report.format import rate as fmt_rate
from rlbench.report.format import speedup
from rlbench.report.html import CSS, SORT_JS
from rlbench.report.writer import write_files
from rlbench.results.compare import COLUMNS, Comparison

COLOURS = {"slower": "#fbe3e3", "faster": "#e3f4e3", "not comparable": "#eeeeee", "uncertain": "#fff6dd",
           "failed": "#fbe3e3"}


def write(comparison: Comparison, base_dir: str, new_dir: str, out_dir: str) -> list:
    """compare.csv and compare.html into out_dir, through the one writer; the paths."""
    os.makedirs(out_dir, exist_ok=True)
    return write_files(out_dir, {"compare.csv": to_csv(comparison.rows, COLUMNS),
                                 "compare.html": page(comparison, base_dir, new_dir)})


def _num(v, fmt) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt(v)


def page(c: Comparison, base_dir: str, new_dir: str) -> str:
    head = ("<tr><th>cell</th><th>verdict</th><th>base steps/s</th><th>new steps/s</th><th>change %</th>"
            "<th>new/base [95% CI]</th><th>p</th><th>n base / new</th><th>reason</th></tr>")
    body = "".join(
        f"<tr style='background:{COLOURS.get(r['verdict'], 'none')}'><td>{_e(r['cell_id'])}</td>"
        f"<td>{_e(r['verdict'])}</td>"
        f"<td data-v='{_num(r['base_median'], str)}'>{_num(r['base_median'], fmt_rate)}</td>"
        f"<td data-v='{_num(r['new_median'], str)}'>{_num(r['new_median'], fmt_rate)}</td>"
        f"<td>{_num(r['change_pct'], lambda v: f'{v:+.1f}')}</td>"
        f"<td data-v='{_num(r['ratio'], str)}'>{_e(speedup(r['ratio'], r['ratio_ci_low'], r['ratio_ci_high']))}</td>"
        f"<td>{_num(r['p_value'], lambda v: f'{v:.3g}')}</td><td>{r['base_n'] or 0} / {r['new_n'] or 0}</td>"
        f"<td>{_e(r['reason'] or '')}</td></tr>" for r in c.rows)
    machines = "".join(f"<tr><td>{_e(k)}</td><td>{_e(c.base_machine[k])}</td><td>{_e(c.new_machine[k])}</td></tr>"
                       for k in c.base_machine)
    verdict = (f"<p><b>{len(c.regressions)} regression(s)</b>: slower by more than {c.threshold:.0%} and "
               f"significant at alpha {c.alpha:g}.</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>rlbench compare</title><style>{CSS}</style>"
            f"</head><body><h1>rlbench compare</h1><p>base: {_e(base_dir)}<br>new: {_e(new_dir)}</p>{verdict}"
            f"<p>{_e(c.counts_label)}</p>"
            f"<table class='sortable'><thead>{head}</thead><tbody>{body}</tbody></table>"
            f"<h2>Machines</h2><table class='meta'><tr><th>key</th><th>base</th><th>new</th></tr>{machines}</table>"
            f"<script>{SORT_JS}</script></body></html>")
