"""The learners' section (kind learner): learner throughput, policy lag, training progress, and where each
cell's time went, from the session metrics every learner reports."""
import html
import json

from rlbench.report.charts import stacked_bars
from rlbench.report.console import fmt_rate

SPLIT = (("env_frac", "env step", "#2ca02c"), ("inference_frac", "inference", "#1f77b4"),
         ("learn_frac", "learn", "#9467bd"), ("transfer_frac", "transfer", "#ff7f0e"),
         ("sync_frac", "parameter sync", "#8c564b"), ("wait_frac", "wait", "#d62728"))
COLUMNS = (("env steps/s", "steps_per_s_median", fmt_rate), ("updates/s", "updates_per_s_median", "{:.1f}".format),
           ("samples/s", "samples_per_s_median", fmt_rate), ("lag mean", "policy_lag_mean_median", "{:.2f}".format),
           ("lag max", "policy_lag_max_median", "{:.0f}".format),
           ("queue wait ms", "queue_wait_ms_median", "{:.2f}".format),
           ("return (last 100)", "return_mean_median", "{:.1f}".format),
           ("time to target s", "time_to_target_s_median", "{:.1f}".format),
           ("steps to target", "steps_to_target_median", fmt_rate))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and v == v


def learners_section(results) -> str:
    rows = [r for r in results.summary_rows() if r.get("kind") == "learner" and r["n"]]
    if not rows:
        return ""
    shown = [c for c in COLUMNS if any(_finite(r.get(c[1])) for r in rows)]
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in shown)
    body = []
    for r in rows:
        run = results.benchmarks[r["cell_id"]].ok_runs[0]
        hist = run.get("policy_lag_hist")
        cells = "".join(f"<td data-v='{r[k] if _finite(r.get(k)) else ''}'>{fmt(r[k]) if _finite(r.get(k)) else '-'}</td>"
                        for _, k, fmt in shown)
        body.append(f"<tr><td>{html.escape(r['cell_id'])}</td>{cells}"
                    f"<td>{html.escape(json.dumps(hist) if hist else '-')}</td></tr>")
    items = []
    for r in rows:
        split = {k: r.get(f"{k}_median") for k, _, _ in SPLIT if _finite(r.get(f"{k}_median"))}
        total = sum(split.values())
        if total > 0:
            items.append((r["cell_id"], {k: v / total for k, v in split.items()}))
    chart = stacked_bars(items, SPLIT) if items else ""
    return ("<h2>Learners and training</h2>"
            "<p>One unit is one learner update; median of repeats. Lag: updates between the parameters that acted "
            "and the ones that learned (histogram of the first repeat: batches at lag 0, 1, ...). Time to target: "
            "training wall time, setup and compilation excluded, until the mean return of the last 100 episodes "
            "first reached the target (- when the window ended first).</p>"
            f"<table class='sortable'><thead><tr><th>cell</th>{head}<th>lag histogram</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
            + (f"<h3>Time split per stage (normalised over the stages each cell reports)</h3>{chart}" if chart else ""))
