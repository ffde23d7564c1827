"""index.html: one self-contained file (plotly.js inlined once, no network) with interactive log-log charts
of throughput vs num_envs (and vs workers where swept) per env with 95% CI bars and bands, a section per
family, a sortable summary table and the machine fingerprint. Charts come from rlbench.report.charts,
numbers from rlbench.report.format."""
import json
import os

from rlbench import SCHEMA_VERSION
from rlbench.families.validation.checks import validation_rows
from rlbench.planning.plan import kv_label
from rlbench.report import charts
from rlbench.report.format import esc as _e
from rlbench.report.format import fixed, is_num, pct, rate, si, speedup
from rlbench.report.learners import learners_section
from rlbench.report.profiles import profiles_section
from rlbench.report.replay import replay_section
from rlbench.report.writer import Reporter, write_atomic
from rlbench.results.metrics import SESSION_METRICS
from rlbench.results.stats import ratio_ci

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin-top:22px}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}th:after{content:' \\2195';color:#aaa}
tr.bad td{background:#fff3f3}.warn{color:#b35900}.chart{margin:6px 0 12px}
.meta td{text-align:left}"""

SORT_JS = """document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var rows=Array.from(t.tBodies[0].rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,
   y=b.cells[i].dataset.v||b.cells[i].textContent;
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
            parts.append(throughput_chart(env_rows, charts.chart_id("throughput", env_label)))
            parts.append(winners_table(env_rows, results))
            scaling = workers_chart(env_rows, charts.chart_id("workers", env_label))
            if scaling:
                parts.append(f"<h3>{_e(env_label)}: env steps/s vs workers at a fixed num_envs "
                             f"(dashed: linear scaling from the fewest workers)</h3>{scaling}")
            parts.append(f"<h3>{_e(env_label)}: latency of one unit (p50 solid, p99 dashed) vs num_envs</h3>")
            parts.append(latency_chart(env_rows, charts.chart_id("latency", env_label), results))
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
        body = "".join(parts)
        doc = (f"<!doctype html><html><head><meta charset='utf-8'>"
               f"<meta name='rlbench-schema' content='{SCHEMA_VERSION}'><title>rlbench report</title>"
               f"<style>{CSS}</style>{charts.plotlyjs_for(body)}</head>"
               f"<body>{body}<script>{SORT_JS}</script></body></html>")
        return [write_atomic(os.path.join(out_dir, "index.html"), doc)]


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
            "<p>Bars and shaded bands show the 95% confidence interval of each cell's median over its repeats; "
            "each repeat ran in a fresh process. Charts are interactive: hover a point for its cell, median, CI, "
            "n and CV; click a legend entry to hide or show its line (double-click to show it alone); drag to "
            "zoom, double-click to reset.</p>")


WORKER_OPTIONS = ("workers", "num_threads")  # options that set a cell's worker count at a fixed num_envs


def _stat_rows(rows, key: str, results=None, x=lambda r: r["num_envs"], series=None, variant: str = "") -> list:
    """One chart row per cell with a positive `key` (steps_per_s, latency_p50_ms, ...): its median, 95% CI,
    n and CV. steps/s come from the summary rows; other metrics from each cell's repeats when `results` is
    given (the same summary the CSV's medians come from), else their medians alone."""
    out = []
    for r in rows:
        if not r["n"]:
            continue
        if key == "steps_per_s":
            median, lo, hi, n, cv = (r["steps_per_s_median"], r["steps_per_s_ci_low"], r["steps_per_s_ci_high"],
                                     r["n"], r["steps_per_s_cv"])
        elif results is not None and r["cell_id"] in results.benchmarks:
            s = results.benchmarks[r["cell_id"]].stat(key)
            median, lo, hi, n, cv = s.median, s.ci_low, s.ci_high, s.n, s.cv
        else:
            median, lo, hi, n, cv = r.get(f"{key}_median"), None, None, r["n"], None
        if is_num(median) and median > 0:
            out.append({"series": (series or _series_label)(r), "variant": variant, "x": x(r), "y": median,
                        "lo": lo, "hi": hi, "n": n, "cv": cv, "label": r["cell_id"]})
    return out


STAT_COLUMNS = dict(x="x", y="y", series="series", lo="lo", hi="hi", n="n", cv="cv", label="label", variant="variant")


def throughput_figure(rows):
    """env steps/s vs num_envs, log-log, a line per strategy with its 95% CI; None without a measured cell."""
    points = _stat_rows(rows, "steps_per_s")
    return charts.scaling(points, **STAT_COLUMNS, x_title="num_envs", y_title="env steps/s") if points else None


def throughput_chart(rows, div_id: str) -> str:
    fig = throughput_figure(rows)
    return charts.to_html(fig, div_id) if fig else "<p>No successful cells for this env.</p>"


def _workers_series(r) -> str:
    options = {k: v for k, v in (r.get("options") or {}).items() if k not in WORKER_OPTIONS}
    return " ".join(filter(None, (r["adapter"], r["policy"], kv_label(options), f"n={r['num_envs']}")))


def workers_figure(rows):
    """Strong scaling: steps/s vs workers for each strategy swept over its worker count at one num_envs,
    beside the ideal (its rate at the fewest workers, times workers / those workers), dashed; None when no
    strategy was swept."""
    ok = [r for r in rows if r["n"] and r.get("workers") and r["steps_per_s_median"] > 0]
    points = []
    for name, group in _group(ok, _workers_series).items():
        if len({r["workers"] for r in group}) > 1:
            base = min(group, key=lambda r: r["workers"])
            points += _stat_rows(group, "steps_per_s", x=lambda r: r["workers"], series=_workers_series)
            points += [{"series": name, "variant": "ideal", "x": r["workers"],
                        "y": base["steps_per_s_median"] * r["workers"] / base["workers"],
                        "label": f"ideal: linear scaling from {base['workers']} worker(s)"} for r in group]
    if not points:
        return None
    return charts.scaling(points, **STAT_COLUMNS, dashes={"ideal": "dash"}, x_title="workers",
                          y_title="env steps/s")


def workers_chart(rows, div_id: str) -> str:
    fig = workers_figure(rows)
    return charts.to_html(fig, div_id) if fig else ""


def latency_figure(rows, results=None):
    """ms per unit vs num_envs: p50 solid, p99 dashed, each with the 95% CI of its median over the repeats."""
    points = (_stat_rows(rows, "latency_p50_ms", results, variant="p50")
              + _stat_rows(rows, "latency_p99_ms", results, variant="p99"))
    if not points:
        return None
    return charts.scaling(points, **STAT_COLUMNS, dashes={"p99": "dash"}, x_title="num_envs",
                          y_title="ms per unit", y_fmt=lambda v: fixed(v, ".3g"), y_ticks="plain")


def latency_chart(rows, div_id: str, results=None) -> str:
    fig = latency_figure(rows, results)
    return charts.to_html(fig, div_id) if fig else ""


def agents_figure(rows):
    """Aggregate env steps/s vs num_agents (agents trained at once by one compiled program)."""
    points = _stat_rows([r for r in rows if "num_agents" in (r.get("options") or {})], "steps_per_s",
                        x=lambda r: int(r["options"]["num_agents"]),
                        series=lambda r: f"{r['adapter']} {_env_label(r)} n={r['num_envs']}")
    return charts.scaling(points, **STAT_COLUMNS, x_title="num_agents",
                          y_title="aggregate env steps/s") if points else None


def jax_section(results, rows) -> str:
    """Compilation apart from every rate, and aggregate env steps/s against agents trained at once."""
    compiled = [(r, results.benchmarks[r["cell_id"]].stat("compile_s")) for r in rows if r["n"]]
    compiled = [(r, c) for r, c in compiled if c.n]
    if not compiled:
        return ""
    body = "".join(f"<tr><td>{_e(r['cell_id'])}</td><td data-v='{r['steps_per_s_median']}'>"
                   f"{rate(r['steps_per_s_median'])}</td><td>{c.median:.2f}</td>"
                   f"<td>{results.benchmarks[r['cell_id']].stat('setup_s').median:.2f}</td>"
                   f"<td>{fixed(r.get('state_gb_per_s_median'), '.3g')}</td>"
                   f"<td>{fixed(r.get('device_copy_gbps_median'), '.3g')}</td>"
                   f"<td>{pct(r.get('state_bw_frac_median'))}</td></tr>" for r, c in compiled)
    fig = agents_figure([r for r, _ in compiled])
    chart = charts.to_html(fig, charts.chart_id("jax", "agents")) if fig else ""
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


def winners(rows, results=None) -> list:
    """Per workload (num_envs x policy): the fastest strategy, its speedup over the one-process loop on
    the same workload, its parallel efficiency (speedup / the cores it had: 1.0 = every core ran as fast
    as the loop alone), and whether its lead is clear (its CI above the runner-up's) or within the noise.
    Runners also train, so their env steps/s do not compete here. Given the ResultSet, the speedup has a
    bootstrap 95% CI from both cells' repeats (rlbench.results.stats.ratio_ci; NaN bounds without it)."""
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
        ratio = win["steps_per_s_median"] / serial["steps_per_s_median"] if serial else None
        low = high = float("nan")
        if serial and results is not None:
            _, low, high = ratio_ci(_repeats(results, win), _repeats(results, serial))
        out.append({"num_envs": n, "policy": policy, "winner": _series_label(win),
                    "steps_per_s": win["steps_per_s_median"], "speedup_over_serial": ratio,
                    "speedup_ci_low": low, "speedup_ci_high": high,
                    # the ideal: every core of the cell running the one-process loop's rate
                    "efficiency": ratio / win["cpus"] if ratio and win.get("cpus") else None,
                    "runner_up": _series_label(runner) if runner else "",
                    "lead": "clear" if clear else "within the CIs of the runner-up"})
    return out


def _repeats(results, row) -> list:
    """A cell's steps/s, one per successful repeat (the values its median and CI come from)."""
    return [r["steps_per_s"] for r in results.benchmarks[row["cell_id"]].ok_runs]


def winners_table(rows, results=None) -> str:
    body = "".join(
        f"<tr><td>{w['num_envs']}</td><td>{_e(w['policy'])}</td><td>{_e(w['winner'])}</td>"
        f"<td data-v='{w['steps_per_s']}'>{rate(w['steps_per_s'])}</td>"
        f"<td data-v='{'' if w['speedup_over_serial'] is None else w['speedup_over_serial']}'>"
        f"{speedup(w['speedup_over_serial'], w['speedup_ci_low'], w['speedup_ci_high'])}</td>"
        f"<td>{pct(w['efficiency'], 0)}</td>"
        f"<td>{_e(w['runner_up'])}</td><td>{_e(w['lead'])}</td></tr>" for w in winners(rows, results))
    head = "".join(f"<th>{h}</th>" for h in ("num_envs", "policy", "fastest", "steps/s",
                                             "speedup over serial [95% CI]",
                                             "parallel efficiency (speedup / cores)",
                                             "runner-up", "lead"))
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if body else ""


SUMMARY_VIEW = (("adapter", "adapter"), ("env", "env_label"), ("num_envs", "num_envs"), ("workers", "workers"),
                ("policy", "policy"), ("options", "options_label"), ("n", "n"),
                ("steps/s median", "steps_per_s_median"),
                ("CI low", "steps_per_s_ci_low"), ("CI high", "steps_per_s_ci_high"), ("CV", "steps_per_s_cv"),
                ("frames/s", "frames_per_s_median"), ("p50 ms", "latency_p50_ms_median"),
                ("p99 ms", "latency_p99_ms_median"), ("policy share", "policy_frac_median"),
                ("CPU cores busy", "cpu_util_median"), ("peak RSS MB", "peak_rss_mb_max"), ("status", "status"))


def summary_view(rows) -> tuple:
    """The fixed columns, plus a column per session metric (updates/s, lag, time split) some cell reported."""
    reported = tuple((m.replace("_", " "), f"{m}_median") for m in SESSION_METRICS
                     if any(is_num(r.get(f"{m}_median")) for r in rows))
    return SUMMARY_VIEW[:-1] + reported + SUMMARY_VIEW[-1:]


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
                shown = pct(v) if key == "steps_per_s_cv" or key.endswith("frac_median") else si(v)
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
        cells += [si(v) for v in nums]
        cells += [_e(r["verdict"]), f"<small>{_e(r['conditions'])}</small>"]
        body.append(f"<tr{' class=bad' if bad else ''}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _fingerprint_table(env) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(json.dumps(v) if isinstance(v, (dict, list)) else v)}</td></tr>"
                   for k, v in env.items())
    return f"<table class='meta'>{rows}</table>"
