"""The Training recommendation on top of a `rlbench tune --train` run's page: its TrainDecision
(rlbench.results.train_decision, as rlbench.tuning.training.answer made it): the winner over seeds, its three
levels side by side, the bottleneck named, and every configuration's standing; nothing is recomputed here."""
from rlbench.report.format import esc, rate
from rlbench.report.table import Column, table

LEVEL_NAMES = ("1. env step alone", "2. + policy inference", "3. + training")


def train_recommendation_section(decision) -> str:
    """decision: RunRecord.train_tune, None for a run that is not a training tune."""
    if decision is None:
        return ""
    parts = [f"<h2>Training recommendation: {esc(decision.algo)} on {esc(decision.label)}</h2>",
             f"<p>Objective: {esc(decision.objective)}, {decision.seeds} seeds per finalist"
             + (f"; the learner's device raced: {esc(decision.devices)}" if decision.devices else "") + ".</p>"]
    if decision.interrupted:
        parts.append(f"<p class='warn'>Cut short ({esc(decision.interrupted)}): this covers what was measured; "
                     "`rlbench resume` on this folder goes on with the budget left.</p>")
    win = decision.winner
    if win is None:
        parts.append(f"<p>No answer: {esc(decision.why_none)}</p>")
    else:
        parts.append(f"<p><b>{esc(win.config)}</b> ({esc(win.recipe)}): {esc(decision.figure)}.</p>")
        for head, text in (("Runner-up", decision.runner_up), ("Bottleneck", decision.bottleneck),
                           ("Other settings", decision.vec_note), ("Start-up", decision.startup)):
            if text:
                parts.append(f"<p>{head}: {esc(text)}.</p>")
        if decision.levels is not None:
            parts.append(f"<h3>Three levels ({esc(decision.levels.source)})</h3>")
            parts.append(table(LEVELS, level_rows(decision.levels), cls=""))
        parts.append(f"<pre>{esc(decision.command)}</pre>")
    parts.append("<h3>Every configuration</h3>")
    parts.append(table(standing_columns(decision), decision.standings))
    parts.append(f"<p>Search: {esc(decision.stop_reason)}; {decision.used_s:.0f} s of the {decision.budget_s:.0f} s "
                 "budget.</p>")
    return "".join(parts)


def level_rows(levels) -> list:
    rates = (levels.env_steps_per_s, levels.inference_steps_per_s, levels.training_steps_per_s)
    memory = (levels.env_peak_rss_mb, levels.env_peak_rss_mb, levels.training_peak_rss_mb)
    setup = (levels.env_setup_s, levels.env_setup_s, levels.training_setup_s)
    return list(zip(LEVEL_NAMES, rates, memory, setup))


LEVELS = (Column("level", lambda r: r[0]), Column("env steps/s", lambda r: r[1], lambda v: rate(v) if v else "-"),
          Column("peak RSS (MB)", lambda r: r[2], lambda v: f"{v:.0f}" if v else "-"),
          Column("start-up (s)", lambda r: r[3], lambda v: f"{v:.1f}" if v is not None else "-"))


def _seconds(values) -> str:
    return ", ".join("-" if v is None else f"{v:.1f}" for v in values)


def standing_columns(decision) -> tuple:
    figure = (Column(f"time to {decision.target_return:g} per seed (s; - not reached)", lambda s: s.median_time_s,
                     html=lambda s: esc(_seconds(s.times_s)))
              if decision.target_return is not None else
              Column("env steps/s per seed", lambda s: s.median_steps_per_s,
                     html=lambda s: esc(", ".join(rate(v) for v in s.steps_per_s if v))))
    return (Column("configuration", lambda s: s.config), Column("recipe", lambda s: s.recipe),
            Column("status", lambda s: s.status), figure,
            Column("median env steps/s", lambda s: s.median_steps_per_s, lambda v: rate(v) if v else "-"),
            Column("setup (s)", lambda s: s.setup_s, lambda v: f"{v:.1f}" if v is not None else "-"),
            Column("why", lambda s: s.why))
