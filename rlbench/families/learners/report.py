"""The learners' section (kind learner): learner throughput, policy lag, training progress, and where each
cell's time went, from the session metrics every learner reports."""
import json

from rlbench.report import charts
from rlbench.report.format import figure, fixed, rate
from rlbench.report.table import Column, table
from rlbench.results.text import is_num

SPLIT = tuple((f"{stage}_frac", text, charts.STAGE_COLOURS[stage])
              for stage, text in (("env", "env step"), ("inference", "inference"), ("learn", "learn"),
                                  ("transfer", "transfer"), ("sync", "parameter sync"), ("wait", "wait")))


def _fixed(spec):
    return lambda v: fixed(v, spec)


# (header, summary column, format); a registered figure's label and format win (rlbench.report.format.figure)
_COLUMNS = (("env steps/s", "steps_per_s_median", rate), ("updates/s", "updates_per_s_median", _fixed(".1f")),
            ("samples/s", "samples_per_s_median", rate), ("lag mean", "policy_lag_mean_median", _fixed(".2f")),
            ("lag max", "policy_lag_max_median", _fixed(".0f")),
            ("queue wait ms", "queue_wait_ms_median", _fixed(".2f")),
            ("level 1: env step", "env_level_steps_per_s_median", rate),
            ("level 2: + inference", "inference_level_steps_per_s_median", rate),
            ("return (last 100)", "return_mean_median", _fixed(".1f")),
            ("time to target s", "time_to_target_s_median", _fixed(".1f")),
            ("steps to target", "steps_to_target_median", rate),
            ("priority lag", "priority_lag_mean_median", _fixed(".1f")),  # apex, r2d2
            ("sequence MB/s", "sequence_mb_per_s_median", _fixed(",.1f")),  # r2d2
            ("prediction queue", "prediction_queue_mean_median", _fixed(".1f")),  # ga3c, from here on
            ("training queue", "training_queue_mean_median", _fixed(".1f")),
            ("predict batch", "predict_batch_mean_median", _fixed(".1f")),
            ("train batch", "train_batch_mean_median", _fixed(".1f")))
# a column shows only where some cell reports it: the architecture-specific ones stay out of other runs' tables
COLUMNS = tuple((label, key, fmt) for header, key, given in _COLUMNS for label, fmt in [figure(key, header, given)])


def _figure_column(header, key, fmt) -> Column:
    return Column(header, lambda c: c.value(key), fmt)


def _lag_histogram(results, cell) -> str:
    """The first repeat's lag histogram as JSON (batches at lag 0, 1, ...), '-' without one."""
    hist = results.benchmarks[cell.cell_id].ok_runs[0].get("policy_lag_hist")
    return json.dumps(hist) if hist else "-"


def learners_section(results, kinds) -> str:
    cells = [c for c in results.cells.values() if c.kind in kinds and c.n]
    if not cells:
        return ""
    shown = [_figure_column(*col) for col in COLUMNS if any(is_num(c.value(col[1])) for c in cells)]
    columns = [Column("cell", lambda c: c.cell_id), *shown,
               Column("lag histogram", lambda c: _lag_histogram(results, c))]
    fig = split_figure(cells)
    chart = charts.to_html(fig, charts.chart_id("learners", "time split")) if fig else ""
    return ("<h2>Learners and training</h2>"
            "<p>One unit is one learner update; median of repeats. Lag: updates between the parameters that acted "
            "and the ones that learned (histogram of the first repeat: batches at lag 0, 1, ...). Time to target: "
            "training wall time, setup and compilation excluded, until the mean return of the last 100 episodes "
            "first reached the target (- when the window ended first).</p>"
            + table(columns, cells) + levels_part(results, cells)
            + (f"<h3>Time split per stage (normalised over the stages each cell reports)</h3>{chart}" if chart else ""))


def levels_part(results, cells) -> str:
    """The three levels of each training cell with a split (env step alone, + inference, + training: env steps/s
    of the same env, policy and num_envs, the first two from the training run's split of its time), and the
    bottleneck they name; '' when no cell has a split."""
    from rlbench.results import levels as lv
    rows = []
    for c in cells:
        l1, l2 = c.value("env_level_steps_per_s_median"), c.value("inference_level_steps_per_s_median")
        if not is_num(l1):
            continue
        three = lv.Levels(l1, l2 if is_num(l2) else None, c.value("steps_per_s_median"), "split")
        rows.append((c.cell_id, l1, l2, three.training_steps_per_s,
                     lv.bottleneck(three, results.benchmarks[c.cell_id].ok_runs[0])[1]))
    if not rows:
        return ""
    columns = (Column("cell", lambda r: r[0]), Column("1. env step alone", lambda r: r[1], rate),
               Column("2. + inference", lambda r: r[2], rate), Column("3. + training", lambda r: r[3], rate),
               Column("what bounds it", lambda r: r[4]))
    return ("<h3>Three levels (env steps/s; the first two from each training run's split of its time)</h3>"
            + table(columns, rows))


def split_figure(cells):
    """Where each learner cell's time went: one stacked bar per cell, its stages' medians normalised over
    the stages it reports; None when no cell reports any."""
    items = []
    for c in cells:
        split = {k: c.stat(k).median for k, _, _ in SPLIT if is_num(c.stat(k).median)}
        total = sum(split.values())
        if total > 0:
            items.append((c.cell_id, {k: v / total for k, v in split.items()}, f"median of n={c.n} repeat(s)"))
    return charts.stacked_bars(items, SPLIT) if items else None
