"""index.html: one self-contained file (inline SVG and JS, no network) with throughput vs num_envs
(and vs workers where swept) per env, confidence bars, a section per family, a sortable summary table
and the machine fingerprint."""
import html
import json
import math
import os

from rlbench import SCHEMA_VERSION
from rlbench.plan import kv_label
from rlbench.report.writer import Reporter, write_atomic
from rlbench.report.console import fmt_rate
from rlbench.report.learners import learners_section
from rlbench.report.profiles import profiles_section
from rlbench.report.replay import replay_section
from rlbench.results import SESSION_METRICS
from rlbench.validate import validation_rows

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 360, 70, 230, 20, 45

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin-top:22px}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}th:after{content:' \\2195';color:#aaa}
tr.bad td{background:#fff3f3}.warn{color:#b35900}svg text{font-size:11px;font-family:sans-serif}
.meta td{text-align:left}"""

SORT_JS = """document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var rows=Array.from(t.tBodies[0].rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,y=b.cells[i].dataset.v||b.cells[i].textContent;
   var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
  rows.forEach(function(r){t.tBodies[0].appendChild(r);});});});});"""


class HtmlReporter(Reporter):
    def report(self, results, out_dir):
        rows = results.summary_rows()
        parts = [f"<h1>rlbench report: {_e(_suite_name(rows))}</h1>", _headline(results.env)]
        stepping = [r for r in rows if r.get("kind") in ("vector_env", "runner")]
        if stepping:
            parts.append("<h2>Env stepping: vector envs, samplers, Ray, JAX</h2>")
        for env_label, env_rows in _group(stepping, _env_label).items():
            parts.append(f"<h3>{_e(env_label)}: env steps/s vs num_envs</h3>")
            parts.append(throughput_chart(env_rows))
            parts.append(winners_table(env_rows))
            scaling = workers_chart(env_rows)
            if scaling:
                parts.append(f"<h3>{_e(env_label)}: env steps/s vs workers at a fixed num_envs "
                             f"(dashed: linear scaling from the fewest workers)</h3>{scaling}")
            parts.append(f"<h3>{_e(env_label)}: latency of one unit (p50 solid, p99 dashed) vs num_envs</h3>")
            parts.append(latency_chart(env_rows))
        parts.append(jax_section(results, rows))
        parts.append(learners_section(results))
        parts.append(replay_section(results))
        parts.append(profiles_section(results, out_dir))
        ran = [r for r in rows if r["n"] or r["status"] not in ("unsupported",)]
        skipped = [r for r in rows if r not in ran]
        validation = validation_rows(results)
        if validation:
            parts += ["<h2>Validation: measured vs published</h2>", validation_table(validation)]
        parts += ["<h2>Summary (median of repeats; click a header to sort)</h2>", summary_table(ran)]
        if skipped:
            parts += ["<h2>Not run here</h2><ul>"] + [f"<li>{_e(r['cell_id'])}: {_e(r['error'])}</li>"
                                                      for r in skipped] + ["</ul>"]
        parts += ["<h2>Machine and software</h2>", _fingerprint_table(results.env)]
        doc = (f"<!doctype html><html><head><meta charset='utf-8'><meta name='rlbench-schema' content='{SCHEMA_VERSION}'>"
               f"<title>rlbench report</title>"
               f"<style>{CSS}</style></head><body>{''.join(parts)}<script>{SORT_JS}</script></body></html>")
        return [write_atomic(os.path.join(out_dir, "index.html"), doc)]


def _e(s) -> str:
    return html.escape(str(s))


def _suite_name(rows) -> str:
    return rows[0]["suite"] if rows else "(no results)"


def _env_label(row) -> str:
    kw = row.get("env_kwargs") or {}
    return row["env"] + (f" ({kv_label(kw)})" if kw else "")


def _series_label(row) -> str:
    return f"{row['adapter']} {row['policy']} {kv_label(row.get('options'))}".strip()


def _group(rows, key) -> dict:
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def _headline(env) -> str:
    cpu = env.get("cpu_model", "?")
    cores = f"{env.get('cpu_physical_cores', '?')} physical / {env.get('cpu_logical_cores', '?')} logical cores"
    gpus = ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "no GPU"
    git = env.get("git") or {}
    commit = (git.get("commit") or "?")[:10] + (" (dirty)" if git.get("dirty") else "")
    return (f"<p>{_e(cpu)}, {_e(cores)}, {_e(gpus)}; Python {_e(env.get('python', '?'))}; "
            f"rlbench {_e(env.get('rlbench_version', '?'))} at {_e(commit)}; "
            f"{_e(env.get('started_at', '?'))} to {_e(env.get('ended_at', '?'))}.</p>"
            "<p>Bars show the 95% confidence interval of each cell's repeats; each repeat ran in a fresh process.</p>")


def _log_ticks(lo: float, hi: float) -> list:
    return [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _tick(v: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def throughput_chart(rows) -> str:
    return log_chart(rows, [("steps_per_s_median", "", True)], "env steps/s (log scale)", "No successful cells for this env.")


WORKER_OPTIONS = ("workers", "num_threads")  # options that set a cell's worker count at a fixed num_envs


def workers_chart(rows) -> str:
    """Strong scaling: steps/s vs workers for each strategy swept over its worker count at one num_envs,
    beside the ideal (its rate at the fewest workers, times workers / those workers)."""
    def series(r):
        options = {k: v for k, v in (r.get("options") or {}).items() if k not in WORKER_OPTIONS}
        return " ".join(filter(None, (r["adapter"], r["policy"], kv_label(options), f"n={r['num_envs']}")))
    ok = [r for r in rows if r["n"] and r.get("workers") and r["steps_per_s_median"] > 0]
    swept = []
    for group in _group(ok, series).values():
        if len({r["workers"] for r in group}) > 1:
            base = min(group, key=lambda r: r["workers"])
            swept += [{**r, "ideal_steps_per_s": base["steps_per_s_median"] * r["workers"] / base["workers"]}
                      for r in group]
    if not swept:
        return ""
    return log_chart(swept, [("steps_per_s_median", "", True), ("ideal_steps_per_s", "3,4", False)],
                     "env steps/s (log scale)", "", x=lambda r: r["workers"], x_label="workers", series_label=series,
                     unlabelled=("ideal_steps_per_s",))


def latency_chart(rows) -> str:
    return log_chart(rows, [("latency_p50_ms_median", "", False), ("latency_p99_ms_median", "6,4", False)],
                     "ms per unit (log scale)", "")


def log_chart(rows, metrics, y_label: str, empty: str, x=lambda r: r["num_envs"], x_label="num_envs",
              series_label=None, unlabelled=()) -> str:
    """Log-log chart of metrics vs x (num_envs unless told), one colour per strategy, every measured point
    labelled with its value (not the metrics named in unlabelled: reference lines); metrics: [(summary key,
    SVG dash pattern, whether to draw its 95% CI as a band and bars)]."""
    def val(r, key):
        v = r.get(key)
        return v if isinstance(v, (int, float)) and v == v and v > 0 else None
    ok = [r for r in rows if r["n"] and any(val(r, k) for k, _, _ in metrics)]
    if not ok:
        return f"<p>{empty}</p>" if empty else ""
    xs = sorted({x(r) for r in ok})
    ys = [v for r in ok for k, _, ci in metrics
          for v in ((val(r, k),) + ((val(r, "steps_per_s_ci_low"), val(r, "steps_per_s_ci_high")) if ci else ()))
          if v]
    y_ticks = _log_ticks(min(ys), max(ys))
    ly0, ly1 = math.log10(y_ticks[0]), math.log10(y_ticks[-1])
    lx0, lx1 = math.log2(xs[0]), math.log2(xs[-1]) if len(xs) > 1 else math.log2(xs[0]) + 1
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def px(n):
        return PAD_L + (math.log2(n) - lx0) / (lx1 - lx0) * pw if len(xs) > 1 else PAD_L + pw / 2

    def py(v):
        return PAD_T + ph - (math.log10(max(v, y_ticks[0])) - ly0) / max(ly1 - ly0, 1e-9) * ph

    svg = [f"<svg width='{W}' height='{H}' role='img' class='chart' xmlns='http://www.w3.org/2000/svg'>",
           f"<rect x='{PAD_L}' y='{PAD_T}' width='{pw}' height='{ph}' fill='none' stroke='#999'/>"]
    for t in y_ticks:
        svg.append(f"<line x1='{PAD_L}' x2='{PAD_L + pw}' y1='{py(t):.1f}' y2='{py(t):.1f}' stroke='#eee'/>"
                   f"<text x='{PAD_L - 6}' y='{py(t) + 4:.1f}' text-anchor='end'>{_tick(t)}</text>")
    for n in xs:
        svg.append(f"<text x='{px(n):.1f}' y='{PAD_T + ph + 16}' text-anchor='middle'>{n}</text>")
    svg.append(f"<text x='{PAD_L + pw / 2}' y='{H - 6}' text-anchor='middle'>{_e(x_label)} (log scale)</text>"
               f"<text transform='translate(14,{PAD_T + ph / 2}) rotate(-90)' text-anchor='middle'>"
               f"{_e(y_label)}</text>")
    for i, (label, series) in enumerate(sorted(_group(ok, series_label or _series_label).items())):
        color = PALETTE[i % len(PALETTE)]
        series = sorted(series, key=x)
        for key, dash, ci in metrics:
            pts = [r for r in series if val(r, key)]
            if not pts:
                continue
            if ci:
                band = [r for r in pts if val(r, "steps_per_s_ci_low") and val(r, "steps_per_s_ci_high")]
                if len(band) > 1:
                    poly = [f"{px(x(r)):.1f},{py(r['steps_per_s_ci_high']):.1f}" for r in band]
                    poly += [f"{px(x(r)):.1f},{py(r['steps_per_s_ci_low']):.1f}" for r in reversed(band)]
                    svg.append(f"<polygon points='{' '.join(poly)}' fill='{color}' fill-opacity='0.12' stroke='none'/>")
            points = " ".join(f"{px(x(r)):.1f},{py(r[key]):.1f}" for r in pts)
            svg.append(f"<polyline points='{points}' fill='none' stroke='{color}' stroke-width='2'"
                       + (f" stroke-dasharray='{dash}'" if dash else "") + "/>")
            for r in pts:
                cx, cy = px(x(r)), py(r[key])
                lo, hi = val(r, "steps_per_s_ci_low"), val(r, "steps_per_s_ci_high")
                if ci and lo and hi:
                    svg.append(f"<line x1='{cx:.1f}' x2='{cx:.1f}' y1='{py(lo):.1f}' y2='{py(hi):.1f}' "
                               f"stroke='{color}' stroke-width='1.5'/>")
                if key in unlabelled:
                    continue
                shown = fmt_rate(r[key]) if r[key] >= 1000 else f"{r[key]:.3g}"
                svg.append(f"<circle cx='{cx:.1f}' cy='{cy:.1f}' r='3.5' fill='{color}'>"
                           f"<title>{_e(r['cell_id'])}: {shown}</title></circle>"
                           f"<text x='{cx + 5:.1f}' y='{cy - 5:.1f}' fill='{color}' class='value'>{shown}</text>")
        ly = PAD_T + 12 + i * 16
        svg.append(f"<rect x='{W - PAD_R + 12}' y='{ly - 8}' width='12' height='3' fill='{color}'/>"
                   f"<text x='{W - PAD_R + 30}' y='{ly - 3}'>{_e(label)}</text>")
    svg.append("</svg>")
    return "".join(svg)


def jax_section(results, rows) -> str:
    """Compilation apart from every rate, and aggregate env steps/s against agents trained at once."""
    compiled = [(r, results.benchmarks[r["cell_id"]].stat("compile_s")) for r in rows if r["n"]]
    compiled = [(r, c) for r, c in compiled if c.n]
    if not compiled:
        return ""
    def num(v, spec):
        return format(v, spec) if _finite(v) else "-"
    body = "".join(f"<tr><td>{_e(r['cell_id'])}</td><td data-v='{r['steps_per_s_median']}'>"
                   f"{fmt_rate(r['steps_per_s_median'])}</td><td>{c.median:.2f}</td>"
                   f"<td>{results.benchmarks[r['cell_id']].stat('setup_s').median:.2f}</td>"
                   f"<td>{num(r.get('state_gb_per_s_median'), '.3g')}</td>"
                   f"<td>{num(r.get('device_copy_gbps_median'), '.3g')}</td>"
                   f"<td>{num(r.get('state_bw_frac_median'), '.1%')}</td></tr>" for r, c in compiled)
    agents = [r for r, _ in compiled if "num_agents" in (r.get("options") or {})]
    chart = log_chart(agents, [("steps_per_s_median", "", True)], "aggregate env steps/s (log scale)", "",
                      x=lambda r: int(r["options"]["num_agents"]), x_label="num_agents",
                      series_label=lambda r: f"{r['adapter']} {_env_label(r)} n={r['num_envs']}") if agents else ""
    return ("<h2>Compiled programs (JAX): compile time apart from the rate</h2>"
            "<p>compile_s is the ahead-of-time lowering and compilation inside setup; no rate includes it. "
            "state GB/s: the compiled loop's carry (env state, obs, keys, returns) read and written once per "
            "step, the least memory traffic it can make, against the same devices' own copy rate measured "
            "in the cell (x + 1 over a buffer past the caches).</p>"
            "<table class='sortable'><thead><tr><th>cell</th><th>env steps/s</th><th>compile s</th><th>setup s</th>"
            "<th>state GB/s</th><th>device copy GB/s</th><th>of device copy</th>"
            f"</tr></thead><tbody>{body}</tbody></table>"
            + (f"<h3>Agents trained at once: aggregate env steps/s vs num_agents</h3>{chart}" if chart else ""))


BASELINES = ("serial", "rlpyt-serial")  # the one-process loops a speedup is measured against


def winners(rows) -> list:
    """Per workload (num_envs x policy): the fastest strategy, its speedup over the one-process loop on
    the same workload, its parallel efficiency (speedup / the cores it had: 1.0 = every core ran as fast
    as the loop alone), and whether its lead is clear (its CI above the runner-up's) or within the noise.
    Runners also train, so their env steps/s do not compete here."""
    out = []
    rows = [r for r in rows if r.get("kind", "vector_env") == "vector_env"]
    for n, policy in sorted({(r["num_envs"], r["policy"]) for r in rows}):
        at = sorted((r for r in rows if (r["num_envs"], r["policy"]) == (n, policy) and r["n"]
                     and r["steps_per_s_median"] > 0), key=lambda r: -r["steps_per_s_median"])
        if not at:
            continue
        win, runner = at[0], (at[1] if len(at) > 1 else None)
        serial = next((r for b in BASELINES for r in at if r["adapter"] == b), None)
        clear = runner is None or not (win["steps_per_s_ci_low"] <= runner["steps_per_s_ci_high"])
        speedup = win["steps_per_s_median"] / serial["steps_per_s_median"] if serial else None
        out.append({"num_envs": n, "policy": policy, "winner": _series_label(win),
                    "steps_per_s": win["steps_per_s_median"], "speedup_over_serial": speedup,
                    # the ideal: every core of the cell running the one-process loop's rate
                    "efficiency": speedup / win["cpus"] if speedup and win.get("cpus") else None,
                    "runner_up": _series_label(runner) if runner else "",
                    "lead": "clear" if clear else "within the CIs of the runner-up"})
    return out


def winners_table(rows) -> str:
    body = "".join(
        f"<tr><td>{w['num_envs']}</td><td>{_e(w['policy'])}</td><td>{_e(w['winner'])}</td>"
        f"<td>{fmt_rate(w['steps_per_s'])}</td>"
        f"<td>{'-' if w['speedup_over_serial'] is None else format(w['speedup_over_serial'], '.2f') + 'x'}</td>"
        f"<td>{'-' if w['efficiency'] is None else format(w['efficiency'], '.0%')}</td>"
        f"<td>{_e(w['runner_up'])}</td><td>{_e(w['lead'])}</td></tr>" for w in winners(rows))
    head = "".join(f"<th>{h}</th>" for h in ("num_envs", "policy", "fastest", "steps/s", "speedup over serial",
                                             "parallel efficiency (speedup / cores)",
                                             "runner-up", "lead"))
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if body else ""


SUMMARY_VIEW = (("adapter", "adapter"), ("env", "env_label"), ("num_envs", "num_envs"), ("workers", "workers"),
                ("policy", "policy"), ("options", "options_label"), ("n", "n"), ("steps/s median", "steps_per_s_median"),
                ("CI low", "steps_per_s_ci_low"), ("CI high", "steps_per_s_ci_high"), ("CV", "steps_per_s_cv"),
                ("frames/s", "frames_per_s_median"), ("p50 ms", "latency_p50_ms_median"),
                ("p99 ms", "latency_p99_ms_median"), ("policy share", "policy_frac_median"),
                ("CPU cores busy", "cpu_util_median"), ("peak RSS MB", "peak_rss_mb_max"), ("status", "status"))


def summary_view(rows) -> tuple:
    """The fixed columns, plus a column per session metric (updates/s, lag, time split) some cell reported."""
    reported = tuple((m.replace("_", " "), f"{m}_median") for m in SESSION_METRICS
                     if any(_finite(r.get(f"{m}_median")) for r in rows))
    return SUMMARY_VIEW[:-1] + reported + SUMMARY_VIEW[-1:]


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and v == v


def summary_table(rows) -> str:
    view = summary_view(rows)
    head = "".join(f"<th>{_e(h)}</th>" for h, _ in view)
    body = []
    for r in rows:
        r = {**r, "env_label": _env_label(r), "options_label": kv_label(r.get("options"))}
        cells = []
        for _, key in view:
            v = r.get(key)
            if key == "status":
                text = _e(v) + (f" <span class='warn'>{_e(r['warning'])}</span>" if r["warning"] else "")
                text += f"<br><small>{_e(r['error'])}</small>" if r["error"] else ""
                text += f" <a href='{_e(r['profile'])}'>profile</a>" if r.get("profile") else ""
                cells.append(f"<td>{text}</td>")
            elif isinstance(v, float):
                shown = "-" if v != v else (f"{v:.1%}" if key == "steps_per_s_cv" or key.endswith("frac_median")
                                            else fmt_rate(v) if v >= 1000 else f"{v:.3g}")
                cells.append(f"<td data-v='{'' if v != v else v}'>{shown}</td>")
            else:
                cells.append(f"<td>{_e('' if v is None else v)}</td>")
        cls = "" if r["status"] == "ok" else " class='bad'"
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def validation_table(rows) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("check", "env", "workers", "quantity", "measured", "published",
                                               "measured / published", "verdict", "conditions"))
    body = []
    for r in rows:
        bad = "outside" in r["verdict"] or "opposite" in r["verdict"]
        nums = [r["measured"], r["published"], r["measured_over_published"]]
        cells = [_e(r["check"]), _e(r["env"]), _e(r["workers"]), _e(r["quantity"])]
        cells += ["-" if v is None or v != v else (fmt_rate(v) if v >= 1000 else f"{v:.3g}") for v in nums]
        cells += [_e(r["verdict"]), f"<small>{_e(r['conditions'])}</small>"]
        body.append(f"<tr{' class=bad' if bad else ''}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _fingerprint_table(env) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(json.dumps(v) if isinstance(v, (dict, list)) else v)}</td></tr>"
                   for k, v in env.items())
    return f"<table class='meta'>{rows}</table>"
