"""index.html: one self-contained file (plotly.js inlined once, no network): a section per family (each
family draws its own, rlbench.registry.families), a sortable summary table and the machine fingerprint.
Charts come from rlbench.report.charts, numbers from rlbench.report.format."""
import json

from rlbench import SCHEMA_VERSION
from rlbench.report import charts
from rlbench.report.format import data_v, esc, figure, is_num, pct, reason_counts, si
from rlbench.report.points import env_label
from rlbench.report.recommendation import recommendation_section
from rlbench.report.view import run_view
from rlbench.results.metrics import SESSION_METRICS
from rlbench.workload import kv_label

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin-top:22px}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}th:after{content:' \\2195';color:#aaa}
tr.bad td{background:#fff3f3}.warn{color:#b35900}.chart{margin:6px 0 12px}
.meta td{text-align:left}.headlines{border:1px solid #9bc;background:#f3f8fc;padding:6px 14px;margin:12px 0}
.headlines li{margin:4px 0}details.dropped{margin:10px 0;font-size:13px}"""

SORT_JS = """document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var rows=Array.from(t.tBodies[0].rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,
   y=b.cells[i].dataset.v||b.cells[i].textContent;
   var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
  rows.forEach(function(r){t.tBodies[0].appendChild(r);});});});});"""


def export_html(view) -> dict:
    """index.html of a RunView (rlbench.report.view): a headline, each family's section in its order (the
    py-spy profiles' before validation), the summary table, the cells not run here and the machine."""
    return {"index.html": page(view).encode()}


def page(view) -> str:
    parts = [f"<h1>rlbench report: {esc(view.suite)}</h1>", recommendation_section(view.record.tune),
             headlines_box(view.headlines), _headline(view.record)]
    parts += [draw() for _, _, draw in view.sections()]
    parts += ["<h2>Summary (median of repeats; click a header to sort)</h2>", summary_table(view.ran)]
    if view.skipped:
        parts += ["<h2>Not run here</h2><ul>"] + [f"<li>{esc(c.cell_id)}: {esc(c.error)}</li>"
                                                  for c in view.skipped] + ["</ul>"]
    parts.append(dropped_note(view.dropped))
    parts += ["<h2>Machine and software</h2>", _fingerprint_table(view.env)]
    body = "".join(parts)
    return (f"<!doctype html><html><head><meta charset='utf-8'>"
            f"<meta name='rlbench-schema' content='{SCHEMA_VERSION}'><title>rlbench report</title>"
            f"<style>{CSS}</style>{charts.plotlyjs_for(body)}</head>"
            f"<body>{body}<script>{SORT_JS}</script></body></html>")


def headlines(source) -> list:
    """Every family's headline sentences, in family order (rlbench.contract.Family.headlines), of a ResultSet
    or its view."""
    return run_view(source).headlines


def headlines_box(lines) -> str:
    """The run's answer on top of the page: a sentence per workload, '' when no family has one."""
    if not lines:
        return ""
    return "<div class='headlines'><ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul></div>"


def dropped_note(dropped) -> str:
    """The cells the plan left out because they cannot run anywhere (env.json's `dropped`): one collapsed
    line with each reason's count, the cells inside."""
    if not dropped:
        return ""
    summary = "; ".join(f"{reason} (x{n})" for reason, n in reason_counts(d.get("reason", "") for d in dropped).items())
    items = "".join(f"<li>{esc(d.get('cell_id', ''))}: {esc(d.get('reason', ''))}</li>" for d in dropped)
    return (f"<details class='dropped'><summary>{len(dropped)} planned cell{'s' if len(dropped) != 1 else ''} "
            f"left out, as they cannot run on any machine: {esc(summary)}</summary><ul>{items}</ul></details>")


def _headline(record) -> str:
    env = record.machine
    cpu = env.get("cpu_model", "?")
    cores = f"{env.get('cpu_physical_cores', '?')} physical / {env.get('cpu_logical_cores', '?')} logical cores"
    gpus = ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "no GPU"
    git = env.get("git") or {}
    commit = (git.get("commit") or "?")[:10] + (" (dirty)" if git.get("dirty") else "")
    return (f"<p>{esc(cpu)}, {esc(cores)}, {esc(gpus)}; Python {esc(env.get('python', '?'))}; "
            f"rlbench {esc(env.get('rlbench_version', '?'))} at {esc(commit)}; "
            f"{esc(env.get('started_at', '?'))} to {esc(record.ended_at or '?')}.</p>"
            "<p>Bars and shaded bands show the 95% confidence interval of each cell's median over its repeats; "
            "each repeat ran in a fresh process. Charts are interactive: hover a point for its cell, median, CI, "
            "n and CV; click a legend entry to hide or show its line (double-click to show it alone); drag to "
            "zoom, double-click to reset.</p>")


# (header, summary.csv column or a label below, its format): a text column (format None), or a figure whose
# registered label and format win where rlbench.results.metrics has them (rlbench.report.format.figure)
LABELS = {"env_label": env_label, "options_label": lambda c: kv_label(c.options)}
SUMMARY_VIEW = (("adapter", "adapter", None), ("env", "env_label", None), ("num_envs", "num_envs", None),
                ("workers", "workers", None), ("policy", "policy", None), ("options", "options_label", None),
                ("n", "n", None), ("steps/s median", "steps_per_s_median", si), ("CI low", "steps_per_s_ci_low", si),
                ("CI high", "steps_per_s_ci_high", si), ("CV", "steps_per_s_cv", pct),
                ("frames/s", "frames_per_s_median", si), ("p50 ms", "latency_p50_ms_median", si),
                ("p99 ms", "latency_p99_ms_median", si), ("policy share", "policy_frac_median", pct),
                ("CPU cores busy", "cpu_util_median", si), ("peak RSS MB", "peak_rss_mb_max", si),
                ("status", "status", None))


def summary_view(cells) -> tuple:
    """(header, key, format or None for text) of each column: the fixed ones, plus one per session metric
    (updates/s, lag, time split) some cell reported."""
    spec = SUMMARY_VIEW[:-1] + tuple(
        (m.replace("_", " "), f"{m}_median", si) for m in SESSION_METRICS
        if any(m in c.stats and is_num(c.stat(m).median) for c in cells)) + SUMMARY_VIEW[-1:]
    out = []
    for header, key, fmt in spec:
        if fmt is not None:
            header, fmt = figure(key, header, fmt)
        out.append((header, key, fmt))
    return tuple(out)


def summary_table(cells) -> str:
    view = summary_view(cells)
    head = "".join(f"<th>{esc(h)}</th>" for h, _, _ in view)
    body = []
    for c in cells:
        tds = []
        for _, key, fmt in view:
            v = LABELS[key](c) if key in LABELS else c.value(key)
            if key == "status":
                text = esc(v) + (f" <span class='warn'>{esc(c.warning)}</span>" if c.warning else "")
                text += f"<br><small>{esc(c.error)}</small>" if c.error else ""
                text += f" <a href='{esc(c.profile)}'>profile</a>" if c.profile else ""
                tds.append(f"<td>{text}</td>")
            elif fmt is not None and isinstance(v, float):
                tds.append(f"<td data-v='{data_v(v)}'>{esc(fmt(v))}</td>")
            else:
                tds.append(f"<td>{esc('' if v is None else v)}</td>")
        cls = "" if c.status == "ok" else " class='bad'"
        body.append(f"<tr{cls}>{''.join(tds)}</tr>")
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _fingerprint_table(env) -> str:
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(json.dumps(v) if isinstance(v, (dict, list)) else v)}</td></tr>"
                   for k, v in env.items())
    return f"<table class='meta'>{rows}</table>"
