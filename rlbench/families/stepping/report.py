"""The env-stepping section: env steps/s vs num_envs per env (log-log, a line per strategy, 95% CI),
steps/s vs workers where a strategy's worker count is swept, the fastest strategy per workload with its
speedup over the one-process loop, and the latency of one unit; and the run's headline, a sentence per
workload naming its fastest cell, its speedup over the loop and how clear its lead is."""
from rlbench.report import charts
from rlbench.report.format import data_v, fixed, is_num, pct, rate, sig, speedup, with_ci
from rlbench.report.format import esc as _e
from rlbench.report.points import STAT_COLUMNS, env_label, group_by, series_label, stat_points
from rlbench.results.stats import ratio_ci
from rlbench.workload import kv_label


def stepping_section(results, kinds) -> str:
    rows = [r for r in results.summary_rows() if r.get("kind") in kinds]
    if not rows:
        return ""
    parts = ["<h2>Env stepping: vector envs, samplers, Ray, JAX</h2>"]
    for label, env_rows in group_by(rows, env_label).items():
        parts.append(f"<h3>{_e(label)}: env steps/s vs num_envs</h3>")
        parts.append(throughput_chart(env_rows, charts.chart_id("throughput", label)))
        parts.append(winners_table(env_rows, results))
        scaling = workers_chart(env_rows, charts.chart_id("workers", label))
        if scaling:
            parts.append(f"<h3>{_e(label)}: env steps/s vs workers at a fixed num_envs "
                         f"(dashed: linear scaling from the fewest workers)</h3>{scaling}")
        parts.append(f"<h3>{_e(label)}: latency of one unit (p50 solid, p99 dashed) vs num_envs</h3>")
        parts.append(latency_chart(env_rows, charts.chart_id("latency", label), results))
    return "".join(parts)


WORKER_OPTIONS = ("workers", "num_threads")  # options that set a cell's worker count at a fixed num_envs


def throughput_figure(rows):
    """env steps/s vs num_envs, log-log, a line per strategy with its 95% CI; None without a measured cell."""
    points = stat_points(rows, "steps_per_s")
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
    for name, group in group_by(ok, _workers_series).items():
        if len({r["workers"] for r in group}) > 1:
            base = min(group, key=lambda r: r["workers"])
            points += stat_points(group, "steps_per_s", x=lambda r: r["workers"], series=_workers_series)
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
    points = (stat_points(rows, "latency_p50_ms", results, variant="p50")
              + stat_points(rows, "latency_p99_ms", results, variant="p99"))
    if not points:
        return None
    return charts.scaling(points, **STAT_COLUMNS, dashes={"p99": "dash"}, x_title="num_envs",
                          y_title="ms per unit", y_fmt=lambda v: fixed(v, ".3g"), y_ticks="plain")


def latency_chart(rows, div_id: str, results=None) -> str:
    fig = latency_figure(rows, results)
    return charts.to_html(fig, div_id) if fig else ""


BASELINES = ("serial", "rlpyt-serial")  # the one-process loops a speedup is measured against
LEADS = {True: "clear", False: "within the CIs of the runner-up", None: "no CI to tell (fewer than 2 repeats)"}


def competing(rows) -> list:
    """The cells whose env steps/s compete, fastest first (ties in the order given): vector envs measured at
    a positive rate. Runners also train, so theirs do not."""
    rows = [r for r in rows if r.get("kind", "vector_env") == "vector_env" and r["n"] and r["steps_per_s_median"] > 0]
    return sorted(rows, key=lambda r: -r["steps_per_s_median"])


def baseline(ranked):
    """The fastest one-process loop of these cells (fastest first), or None."""
    return next((r for r in ranked if r["adapter"] in BASELINES), None)


def speedup_over(win, base, results=None) -> tuple:
    """(ratio of medians, CI low, CI high) of cell `win` over the loop `base`: the loop itself is exactly 1x
    (no bootstrap of a cell against itself); given the ResultSet, a bootstrap 95% CI from both cells'
    repeats (rlbench.results.stats.ratio_ci), else NaN bounds. (None, NaN, NaN) without a loop."""
    nan = float("nan")
    if base is None:
        return None, nan, nan
    ratio = win["steps_per_s_median"] / base["steps_per_s_median"]
    if base is win or results is None:
        return ratio, nan, nan
    _, low, high = ratio_ci(_repeats(results, win), _repeats(results, base))
    return ratio, low, high


def lead(win, runner):
    """Whether the winner's lead over the runner-up is clear: True when its 95% CI lies wholly above the
    runner-up's, False when they overlap (within the noise), None when either has no CI (n < 2)."""
    low, high = win["steps_per_s_ci_low"], runner["steps_per_s_ci_high"]
    if not (is_num(low) and is_num(high)):
        return None
    return low > high


def winners(rows, results=None) -> list:
    """Per workload (num_envs x policy): the fastest strategy, its speedup over the one-process loop on
    the same workload, its parallel efficiency (speedup / the cores it had: 1.0 = every core ran as fast
    as the loop alone), and whether its lead is clear (its CI above the runner-up's) or within the noise.
    Runners also train, so their env steps/s do not compete here. Given the ResultSet, the speedup has a
    bootstrap 95% CI from both cells' repeats (rlbench.results.stats.ratio_ci; NaN bounds without it), and
    the efficiency the same CI over the cores."""
    out = []
    ranked = competing(rows)
    for n, policy in sorted({(r["num_envs"], r["policy"]) for r in ranked}):
        at = [r for r in ranked if (r["num_envs"], r["policy"]) == (n, policy)]
        win, runner = at[0], (at[1] if len(at) > 1 else None)
        ratio, low, high = speedup_over(win, baseline(at), results)
        cpus = win.get("cpus") if ratio else None
        out.append({"num_envs": n, "policy": policy, "winner": series_label(win),
                    "steps_per_s": win["steps_per_s_median"], "speedup_over_serial": ratio,
                    "speedup_ci_low": low, "speedup_ci_high": high,
                    # the ideal: every core of the cell running the one-process loop's rate
                    "efficiency": ratio / cpus if cpus else None,
                    "efficiency_ci_low": low / cpus if cpus else None,
                    "efficiency_ci_high": high / cpus if cpus else None,
                    "runner_up": series_label(runner) if runner else "",
                    "lead": LEADS[lead(win, runner) if runner else True]})
    return out


def strategy(row) -> tuple:
    """What a strategy is: the adapter and the options it was given (num_envs is the workload's size)."""
    return row["adapter"], kv_label(row.get("options"))


def cell_text(row) -> str:
    """`envpool-async (num_envs=16, batch_size=8)`: the adapter, num_envs, the options given, and a batch
    size below num_envs (the adapter's default resolved) when no option set it."""
    options = row.get("options") or {}
    parts = [f"num_envs={row['num_envs']}", *(kv_label({k: options[k]}) for k in sorted(options))]
    batch = row.get("batch_size")
    if "batch_size" not in options and is_num(batch) and batch != row["num_envs"]:
        parts.append(f"batch_size={batch}")
    return f"{row['adapter']} ({', '.join(parts)})"


def headlines(results) -> list:
    """One sentence per workload (env, its arguments, policy; in suite order), hyperfine's "X ran 1.52 ±
    0.03 times faster than Y": the fastest cell at any num_envs with its median env steps/s, its speedup
    over the fastest one-process loop of that workload with the bootstrap 95% CI, and the runner-up (the
    fastest cell of another strategy: adapter and options) as a fraction of it with the same bootstrap CI,
    and whether the lead is significant (that CI wholly below 1x). A workload with no measured cell has none."""
    rows = [r for r in results.summary_rows() if r.get("kind", "vector_env") == "vector_env"]
    out = []
    for (label, policy), group in group_by(rows, lambda r: (env_label(r), r["policy"])).items():
        ranked = competing(group)
        if ranked:
            out.append(f"{label} · {policy}: " + _verdict(ranked, results))
    return out


def _verdict(ranked, results) -> str:
    win, base = ranked[0], baseline(ranked)
    text = f"{cell_text(win)} is fastest at {sig(win['steps_per_s_median'])} env steps/s"
    if base is None:
        text += ", no serial loop measured to compare with"
    elif base is win:
        text += ", the serial loop itself"
    else:
        ratio, low, high = speedup_over(win, base, results)
        text += f", {speedup(ratio, low, high)} the serial loop ({base['adapter']}, num_envs={base['num_envs']})"
    runner = next((r for r in ranked if strategy(r) != strategy(win)), None)
    if runner is None:
        return text + "; the only strategy measured"
    ratio, low, high = speedup_over(win, runner, results)  # the winner over the runner-up; shown the other way
    share = speedup(1 / ratio, 1 / high, 1 / low)
    verdict = ("lead untested (fewer than 2 repeats)" if not is_num(low)
               else "lead significant" if low > 1 else "lead not significant (the 95% CI includes 1x)")
    return text + f"; runner-up {cell_text(runner)} at {share} of it, {verdict}"


def _repeats(results, row) -> list:
    """A cell's steps/s, one per successful repeat (the values its median and CI come from)."""
    return [r["steps_per_s"] for r in results.benchmarks[row["cell_id"]].ok_runs]


def _whole_pct(v) -> str:
    return pct(v, 0)


def winners_table(rows, results=None) -> str:
    body = "".join(
        f"<tr><td>{w['num_envs']}</td><td>{_e(w['policy'])}</td><td>{_e(w['winner'])}</td>"
        f"<td data-v='{data_v(w['steps_per_s'])}'>{rate(w['steps_per_s'])}</td>"
        f"<td data-v='{data_v(w['speedup_over_serial'])}'>"
        f"{speedup(w['speedup_over_serial'], w['speedup_ci_low'], w['speedup_ci_high'])}</td>"
        f"<td data-v='{data_v(w['efficiency'])}'>"
        f"{with_ci(w['efficiency'], w['efficiency_ci_low'], w['efficiency_ci_high'], fmt=_whole_pct)}</td>"
        f"<td>{_e(w['runner_up'])}</td><td>{_e(w['lead'])}</td></tr>" for w in winners(rows, results))
    head = "".join(f"<th>{h}</th>" for h in ("num_envs", "policy", "fastest", "steps/s",
                                             "speedup over serial [95% CI]",
                                             "parallel efficiency (speedup / cores) [95% CI]",
                                             "runner-up", "lead"))
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if body else ""
