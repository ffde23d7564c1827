"""The env-stepping section: env steps/s vs num_envs per env (log-log, a line per strategy, 95% CI),
steps/s vs workers where a strategy's worker count is swept, the fastest strategy per workload with its
speedup over the one-process loop, and the latency of one unit; and the run's headline, a sentence per
workload naming its fastest cell, its speedup over the loop and how clear its lead is."""
from dataclasses import dataclass
from typing import Optional

from rlbench.report import charts
from rlbench.report.format import esc, fixed, pct, rate, with_ci
from rlbench.report.points import STAT_COLUMNS, series_label, stat_points
from rlbench.report.table import Column, table
from rlbench.results import ranking
from rlbench.results.text import env_label, group_by, is_num, speedup
from rlbench.workload import kv_label


def stepping_section(results, kinds) -> str:
    cells = [c for c in results.cells.values() if c.kind in kinds]
    if not cells:
        return ""
    parts = ["<h2>Env stepping: vector envs, samplers, Ray, JAX</h2>"]
    for label, env_cells in group_by(cells, env_label).items():
        parts.append(f"<h3>{esc(label)}: env steps/s vs num_envs</h3>")
        parts.append(throughput_chart(env_cells, charts.chart_id("throughput", label)))
        parts.append(winners_table(env_cells, results))
        scaling = workers_chart(env_cells, charts.chart_id("workers", label))
        if scaling:
            parts.append(f"<h3>{esc(label)}: env steps/s vs workers at a fixed num_envs "
                         f"(dashed: linear scaling from the fewest workers)</h3>{scaling}")
        parts.append(f"<h3>{esc(label)}: latency of one unit (p50 solid, p99 dashed) vs num_envs</h3>")
        parts.append(latency_chart(env_cells, charts.chart_id("latency", label)))
    return "".join(parts)


WORKER_OPTIONS = ("workers", "num_threads")  # options that set a cell's worker count at a fixed num_envs


def throughput_figure(cells):
    """env steps/s vs num_envs, log-log, a line per strategy with its 95% CI; None without a measured cell."""
    points = stat_points(cells, "steps_per_s")
    return charts.scaling(points, **STAT_COLUMNS, x_title="num_envs", y_title="env steps/s") if points else None


def throughput_chart(cells, div_id: str) -> str:
    fig = throughput_figure(cells)
    return charts.to_html(fig, div_id) if fig else "<p>No successful cells for this env.</p>"


def _workers_series(c) -> str:
    options = {k: v for k, v in c.options.items() if k not in WORKER_OPTIONS}
    return " ".join(filter(None, (c.adapter, c.policy, kv_label(options), f"n={c.num_envs}")))


def workers_figure(cells):
    """Strong scaling: steps/s vs workers for each strategy swept over its worker count at one num_envs,
    beside the ideal (its rate at the fewest workers, times workers / those workers), dashed; None when no
    strategy was swept."""
    ok = [c for c in cells if c.n and c.workers and c.steps_per_s.median > 0]
    points = []
    for name, group in group_by(ok, _workers_series).items():
        if len({c.workers for c in group}) > 1:
            base = min(group, key=lambda c: c.workers)
            points += stat_points(group, "steps_per_s", x=lambda c: c.workers, series=_workers_series)
            points += [{"series": name, "variant": "ideal", "x": c.workers,
                        "y": base.steps_per_s.median * c.workers / base.workers,
                        "label": f"ideal: linear scaling from {base.workers} worker(s)"} for c in group]
    if not points:
        return None
    return charts.scaling(points, **STAT_COLUMNS, dashes={"ideal": "dash"}, x_title="workers",
                          y_title="env steps/s")


def workers_chart(cells, div_id: str) -> str:
    fig = workers_figure(cells)
    return charts.to_html(fig, div_id) if fig else ""


def latency_figure(cells):
    """ms per unit vs num_envs: p50 solid, p99 dashed, each with the 95% CI of its median over the repeats."""
    points = (stat_points(cells, "latency_p50_ms", variant="p50")
              + stat_points(cells, "latency_p99_ms", variant="p99"))
    if not points:
        return None
    return charts.scaling(points, **STAT_COLUMNS, dashes={"p99": "dash"}, x_title="num_envs",
                          y_title="ms per unit", y_fmt=lambda v: fixed(v, ".3g"), y_ticks="plain")


def latency_chart(cells, div_id: str) -> str:
    fig = latency_figure(cells)
    return charts.to_html(fig, div_id) if fig else ""


# why a winner's efficiency shows as a dash: speedup / cores of a single process is no measured inefficiency
ONE_PROCESS = "one process (workers = 1): nothing ran in parallel, so there is no parallel efficiency"
NOT_REPORTED = "its worker count was not reported: whether it ran in parallel is unknown"


@dataclass(frozen=True)
class Winner:
    """The fastest strategy of one workload (num_envs x policy), as the winners table shows it: the verdict
    of rlbench.results.ranking (the speedup over the serial baseline on the same workload, with a bootstrap 95%
    CI given the ResultSet; the runner-up and whether the lead is significant) and how it ran."""
    num_envs: int
    policy: str
    winner: str                         # its series label
    steps_per_s: float
    speedup_over_serial: Optional[float]  # None without a serial loop measured
    speedup_ci_low: float               # NaN: fewer than 2 repeats a side
    speedup_ci_high: float
    workers: Optional[int]              # the processes (or threads) it ran in, as its session said
    cpus: Optional[int]                 # the cores it had
    runner_up: str                      # '' when it ran alone
    lead: str                           # rlbench.results.ranking.LEAD_WORDS

    @property
    def parallel(self) -> bool:
        """It ran more than one worker: only then does its speedup say how well it used the cores."""
        return is_num(self.workers) and self.workers > 1

    def _per_core(self, ratio):
        """A speedup over the cores, as parallel efficiency (1.0 = every core as fast as the loop alone); None
        for a one-process winner (its 1/cores is no inefficiency: it used one core) and without a speedup."""
        ok = self.parallel and is_num(self.cpus) and self.cpus > 0 and is_num(self.speedup_over_serial)
        return ratio / self.cpus if ok else None

    @property
    def efficiency(self) -> Optional[float]:
        return self._per_core(self.speedup_over_serial)

    @property
    def efficiency_ci_low(self) -> Optional[float]:
        return self._per_core(self.speedup_ci_low)

    @property
    def efficiency_ci_high(self) -> Optional[float]:
        return self._per_core(self.speedup_ci_high)

    @property
    def efficiency_note(self) -> str:
        """Why there is no efficiency, '' where there is one (or no speedup to divide)."""
        if self.parallel or not is_num(self.speedup_over_serial):
            return ""
        return ONE_PROCESS if self.workers is not None else NOT_REPORTED


def winners(cells, results=None) -> list:
    """The Winner of each workload (num_envs x policy) of these cells, by num_envs then policy."""
    out = []
    competing = ranking.competing(cells)
    for n, policy in sorted({(c.num_envs, c.policy) for c in competing}):
        at = [c for c in competing if (c.num_envs, c.policy) == (n, policy)]
        v = ranking.verdict([ranking.entry(c, results) for c in at])
        win = next(c for c in at if c.cell_id == v.winner.cell_id)
        sp = v.speedup or ranking.Ratio(None, float("nan"), float("nan"))
        runner = next((c for c in at if v.runner_up and c.cell_id == v.runner_up.cell_id), None)
        out.append(Winner(n, policy, series_label(win), v.winner.median, sp.value, sp.low, sp.high, win.workers,
                          win.cpus, series_label(runner) if runner else "", ranking.LEAD_WORDS[v.lead]))
    return out


def headlines(results) -> list:
    """One sentence per workload (env, its arguments, policy; in suite order), hyperfine's "X ran 1.52 ±
    0.03 times faster than Y": rlbench.results.ranking's verdict in its words. A workload with no measured
    cell has none."""
    return [f"{label} · {policy}: {v.sentence()}" for (label, policy), v in ranking.verdicts(results).items()]


def _whole_pct(v) -> str:
    return pct(v, 0)


def _speedup(w: Winner) -> str:
    return esc(speedup(w.speedup_over_serial, w.speedup_ci_low, w.speedup_ci_high))


def _efficiency(w: Winner) -> str:
    """The efficiency with its CI; for a one-process winner a dash whose tooltip says why."""
    if w.efficiency_note:
        return f"<span title='{esc(w.efficiency_note)}'>—</span>"
    return esc(with_ci(w.efficiency, w.efficiency_ci_low, w.efficiency_ci_high, fmt=_whole_pct))


WINNER_COLUMNS = (Column("num_envs", lambda w: w.num_envs), Column("policy", lambda w: w.policy),
                  Column("fastest", lambda w: w.winner), Column("steps/s", lambda w: w.steps_per_s, rate),
                  Column("speedup over serial [95% CI]", lambda w: w.speedup_over_serial, html=_speedup),
                  Column("parallel efficiency (speedup / cores) [95% CI]", lambda w: w.efficiency,
                         html=_efficiency),
                  Column("runner-up", lambda w: w.runner_up), Column("lead", lambda w: w.lead))


def winners_table(cells, results=None) -> str:
    rows = winners(cells, results)
    return table(WINNER_COLUMNS, rows) if rows else ""
