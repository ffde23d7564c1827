"""The Recommendation section on top of a `rlbench tune` run's page: the run's Decision (rlbench.results.decision,
as rlbench.tuning.decide made it, its verdict in the ranking engine's words) and the search drawn as it went;
nothing is recomputed here."""
import math

from rlbench.report import charts
from rlbench.report.format import esc, rate, with_ci
from rlbench.report.table import Column, table

MEASURED, PREDICTED = "measured", "predicted at most (pruned)"


def recommendation_section(decision) -> str:
    """decision: the run's Decision (RunRecord.tune), None for a run that is not a tune."""
    if decision is None:
        return ""
    win = decision.winner
    parts = [f"<h2>Recommendation: {esc(decision.label)}</h2>"]
    if decision.interrupted:
        parts.append(f"<p class='warn'>The search was cut short ({esc(decision.interrupted)}): this decision covers "
                     "what was measured until then; `rlbench resume` on this folder goes on with the budget left.</p>")
    if win is None:
        return "".join(parts) + calibration_note(decision) + f"<p>No answer: {esc(decision.why_none)}</p>"
    parts.append(f"<p><b>{esc(win.config)}</b>: {rate(win.steps_per_s)} env steps/s "
                 f"[95% CI {rate(win.ci_low)}, {rate(win.ci_high)}], n={win.n}.</p>")
    if decision.verdict:
        parts.append(f"<p>{esc(decision.verdict)}.</p>")
    if decision.placement:
        parts.append(f"<p>Where the policy runs: {esc(decision.placement)}.</p>")
    if decision.search:
        parts.append(f"<p>Search: {esc(decision.search)}.</p>")
    parts.append(calibration_note(decision))
    fig = search_figure(decision)
    if fig is not None:
        parts.append("<h3>The search: env steps/s vs num_envs of every configuration tried (dotted: the "
                     "prediction of one pruned unmeasured; the line across: the winner)</h3>")
        parts.append(charts.to_html(fig, charts.chart_id("tune-search", decision.label)))
    if decision.note:
        parts.append(f"<p>Note: {esc(decision.note)}.</p>")
    if decision.regime:
        parts.append(f"<p>What bounds it: {esc(decision.regime)}.</p>")
    if decision.budget_note:
        parts.append(f"<p>Budget: {esc(decision.budget_note)}.</p>")
    code = "\n".join(filter(None, [win.snippet, win.command]))
    parts.append(f"<pre>{esc(code)}</pre>")
    parts.append(table(FATES, decision.strategies))
    return "".join(parts)


def calibration_note(decision) -> str:
    """How the machine's calibration was had (its time apart from the budget, or the cache's date) and each
    strategy it gave no prediction, with the reason (the sentence names them); '' for a decision older than it."""
    return f"<p>Calibration: {esc(decision.calibration)}.</p>" if decision.calibration else ""


def search_figure(decision):
    """Rate against num_envs per strategy: each configuration measured (its median) and each pruned one at
    its prediction, the winner's rate as a line across; None when the decision holds no search."""
    points = [{"series": p.strategy, "variant": MEASURED if p.status != "pruned" else PREDICTED,
               "x": p.num_envs, "y": p.steps_per_s, "n": p.n, "label": p.config} for p in decision.points]
    if not points:
        return None
    win = decision.winner
    return charts.scaling(points, x="x", y="y", series="series", variant="variant", n="n", label="label",
                          dashes={PREDICTED: "dot"}, x_title="num_envs", y_title="env steps/s",
                          hlines=[(f"winner: {win.config}", win.steps_per_s, "#000000")])


def of_winner(fate) -> str:
    """A strategy's best rate as a multiple of the winner's with its bootstrap 95% CI ('0.67x [0.61, 0.72]');
    '[-]' when either side had fewer than 2 repeats (or a decision older than the CI); '' when it never ran."""
    if not fate.measured or math.isnan(fate.ratio_to_winner):
        return ""
    return with_ci(fate.ratio_to_winner, fate.ratio_ci_low, fate.ratio_ci_high, unit="x")


# the other strategies' fates (rlbench.results.decision.Fate), fastest first as decided
FATES = (Column("strategy", lambda f: f.adapter), Column("its best configuration", lambda f: f.config),
         Column("env steps/s", lambda f: f.steps_per_s, lambda v: rate(v) if v else ""),
         Column("of the winner [95% CI]", lambda f: f.ratio_to_winner, html=lambda f: of_winner(f)),
         Column("why it lost", lambda f: f.why))
