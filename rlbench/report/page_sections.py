"""The page's own sections, the ones no family owns: the run's answer boxed on top, what the run was, the
sortable summary of every cell, the cells not run here or left out of the plan, and the machine. Each is
drawn from the run's view (rlbench.report.view.RunView); rlbench.report.sections places them on the page."""
import json

from rlbench.report.format import esc, figure, pct, reason_counts, si
from rlbench.report.table import Column, bad_if, table
from rlbench.results.metrics import SESSION_METRICS
from rlbench.results.text import env_label, is_num
from rlbench.workload import kv_label


def headlines_box(lines) -> str:
    """The run's answer on top of the page: a sentence per workload, '' when no family has one."""
    if not lines:
        return ""
    return "<div class='headlines'><ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul></div>"


def about_run(record) -> str:
    """The machine and software in one line and how to read the charts, under the answer: a reader of a
    shared page learns where the numbers come from before reading any."""
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


def not_run(skipped) -> str:
    """The cells this machine could not run, with why; '' when it ran them all."""
    if not skipped:
        return ""
    items = "".join(f"<li>{esc(c.cell_id)}: {esc(c.error)}</li>" for c in skipped)
    return f"<h2>Not run here</h2><ul>{items}</ul>"


def dropped_note(dropped) -> str:
    """The cells the plan left out because they cannot run anywhere (env.json's `dropped`): one collapsed
    line with each reason's count, the cells inside."""
    if not dropped:
        return ""
    summary = "; ".join(f"{reason} (x{n})" for reason, n in reason_counts(d.get("reason", "") for d in dropped).items())
    items = "".join(f"<li>{esc(d.get('cell_id', ''))}: {esc(d.get('reason', ''))}</li>" for d in dropped)
    return (f"<details class='dropped'><summary>{len(dropped)} planned cell{'s' if len(dropped) != 1 else ''} "
            f"left out, as they cannot run on any machine: {esc(summary)}</summary><ul>{items}</ul></details>")


def machine_table(env) -> str:
    """env.json as written, a row per key: the fingerprint a reader compares two machines by."""
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(json.dumps(v) if isinstance(v, (dict, list)) else v)}</td></tr>"
                   for k, v in env.items())
    return f"<h2>Machine and software</h2><table class='meta'>{rows}</table>"


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


def _status(c) -> str:
    """The cell's status with its warning, its error and a link to its py-spy profile where it has them."""
    text = esc(c.status) + (f" <span class='warn'>{esc(c.warning)}</span>" if c.warning else "")
    text += f"<br><small>{esc(c.error)}</small>" if c.error else ""
    return text + (f" <a href='{esc(c.profile)}'>profile</a>" if c.profile else "")


def _floats(fmt):
    """A figure's format for its floats; anything else (a count, a missing figure) as it is."""
    return lambda v: fmt(v) if isinstance(v, float) else ("" if v is None else str(v))


def _column(header, key, fmt) -> Column:
    if key == "status":
        return Column(header, lambda c: c.status, html=_status)
    if key in LABELS:
        return Column(header, LABELS[key])

    def value(c):
        return c.value(key)
    return Column(header, value) if fmt is None else Column(header, value, _floats(fmt))


def summary_table(cells) -> str:
    """Every cell the run tried, a column per figure some cell has, failed cells shaded."""
    columns = [_column(*spec) for spec in summary_view(cells)]
    return ("<h2>Summary (median of repeats; click a header to sort)</h2>"
            + table(columns, cells, bad_if(lambda c: c.status != "ok")))
