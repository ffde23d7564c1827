"""The Recommendation section on top of a `rlbench tune` run's page: the decision env.json keeps (as
rlbench.tuning.decide made it, its verdict in rlbench.report.ranking's words) and the search drawn as it
went; nothing is recomputed here."""
import math

from rlbench.report import charts
from rlbench.report.format import data_v, esc, rate, with_ci

MEASURED, PREDICTED = "measured", "predicted at most (pruned)"


def recommendation_section(tune) -> str:
    """tune: the decision env.json keeps (RunRecord.tune), None for a run that is not a tune."""
    if not tune:
        return ""
    win = tune.get("winner")
    parts = [f"<h2>Recommendation: {esc(tune.get('label', ''))}</h2>"]
    if not win:
        return "".join(parts) + f"<p>No answer: {esc(tune.get('why_none', ''))}</p>"
    parts.append(f"<p><b>{esc(win['config'])}</b>: {rate(win['steps_per_s'])} env steps/s "
                 f"[95% CI {rate(win['ci_low'])}, {rate(win['ci_high'])}], n={win['n']}.</p>")
    if tune.get("verdict"):
        parts.append(f"<p>{esc(tune['verdict'])}.</p>")
    if tune.get("search"):
        parts.append(f"<p>Search: {esc(tune['search'])}.</p>")
    fig = search_figure(tune)
    if fig is not None:
        parts.append("<h3>The search: env steps/s vs num_envs of every configuration tried (dotted: the "
                     "prediction of one pruned unmeasured; the line across: the winner)</h3>")
        parts.append(charts.to_html(fig, charts.chart_id("tune-search", tune.get("label", ""))))
    if tune.get("note"):
        parts.append(f"<p>Note: {esc(tune['note'])}.</p>")
    code = "\n".join(filter(None, [win.get("snippet"), win.get("command")]))
    parts.append(f"<pre>{esc(code)}</pre>")
    rows = "".join(
        f"<tr><td>{esc(s['adapter'])}</td><td>{esc(s.get('config', ''))}</td>"
        f"<td data-v='{data_v(s.get('steps_per_s'))}'>{rate(s['steps_per_s']) if s.get('steps_per_s') else ''}</td>"
        f"<td data-v='{data_v(s.get('ratio_to_winner'))}'>{of_winner(s)}</td>"
        f"<td>{esc(s['why'])}</td></tr>" for s in tune.get("strategies", []))
    head = "".join(f"<th>{h}</th>" for h in ("strategy", "its best configuration", "env steps/s",
                                             "of the winner [95% CI]",
                                             "why it lost"))
    parts.append(f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    return "".join(parts)


def search_figure(tune: dict):
    """Rate against num_envs per strategy: each configuration measured (its median) and each pruned one at
    its prediction, the winner's rate as a line across; None when the decision holds no search."""
    points = [{"series": p["strategy"], "variant": MEASURED if p["status"] != "pruned" else PREDICTED,
               "x": p["num_envs"], "y": p["steps_per_s"], "n": p.get("n"), "label": p["config"]}
              for p in tune.get("points") or []]
    if not points:
        return None
    win = tune["winner"]
    return charts.scaling(points, x="x", y="y", series="series", variant="variant", n="n", label="label",
                          dashes={PREDICTED: "dot"}, x_title="num_envs", y_title="env steps/s",
                          hlines=[(f"winner: {win['config']}", win["steps_per_s"], "#000000")])


def of_winner(strategy: dict) -> str:
    """A strategy's best rate as a multiple of the winner's with its bootstrap 95% CI ('0.67x [0.61, 0.72]');
    '[-]' when either side had fewer than 2 repeats (or a decision older than the CI); '' when it never ran."""
    value = strategy.get("ratio_to_winner")
    if value is None or math.isnan(value):
        return ""
    return with_ci(value, strategy.get("ratio_ci_low"), strategy.get("ratio_ci_high"), unit="x")
