"""The compiled-programs section: compile time apart from every rate, the carry's bandwidth against the
devices' copy rate, and aggregate env steps/s against agents trained at once."""
from dataclasses import dataclass

from rlbench.report import charts
from rlbench.report.format import esc, figure, fixed, pct, rate, with_ci
from rlbench.report.points import STAT_COLUMNS, stat_points
from rlbench.report.table import Column, table
from rlbench.results.stats import median_ci
from rlbench.results.text import env_label


def agents_figure(cells):
    """Aggregate env steps/s vs num_agents (agents trained at once by one compiled program)."""
    points = stat_points([c for c in cells if "num_agents" in c.options], "steps_per_s",
                        x=lambda c: int(c.options["num_agents"]),
                        series=lambda c: f"{c.adapter} {env_label(c)} n={c.num_envs}")
    return charts.scaling(points, **STAT_COLUMNS, x_title="num_agents",
                          y_title="aggregate env steps/s") if points else None


def _fixed(spec):
    return lambda v: fixed(v, spec)


# (figure, header and format when it is not registered (rlbench.report.format.figure)); the last one shown
# with the bootstrap 95% CI of its median over the repeats
COLUMNS = (("steps_per_s", "env steps/s", rate), ("compile_s", "compile s", _fixed(".2f")),
           ("setup_s", "setup s", _fixed(".2f")), ("state_gb_per_s", "state GB/s", _fixed(".3g")),
           ("device_copy_gbps", "device copy GB/s", _fixed(".3g")), ("unit_cost_us", "unit cost us", _fixed(".3g")),
           ("unit_cost_frac", "unit cost share", pct), ("state_bw_frac", "of device copy", pct))


SHOWN = tuple((header, fmt) for name, given, spec in COLUMNS for header, fmt in [figure(name, given, spec)])


@dataclass(frozen=True)
class CompiledRow:
    """A compiled cell as its table row shows it."""
    cell_id: str
    figures: tuple      # the medians of COLUMNS but the last, in order
    share: tuple        # the last (its share of device copy): median, CI low, CI high over the repeats


def compiled_row(c, bench) -> CompiledRow:
    """compile and setup from the benchmark, as the cell's summary keeps no median of them."""
    return CompiledRow(c.cell_id, (c.steps_per_s.median, bench.stat("compile_s").median, bench.stat("setup_s").median,
                                   *(c.stat(name).median for name, _, _ in COLUMNS[3:-1])),
                       median_ci([run.get("state_bw_frac") for run in bench.ok_runs]))


def _share(row: CompiledRow) -> str:
    return esc(with_ci(*row.share, fmt=SHOWN[-1][1]))


def _figure_column(i: int, header: str, fmt) -> Column:
    return Column(header, lambda row: row.figures[i], fmt)


TABLE = (Column("cell", lambda row: row.cell_id),
         *(_figure_column(i, header, fmt) for i, (header, fmt) in enumerate(SHOWN[:-1])),
         Column(f"{SHOWN[-1][0]} [95% CI]", lambda row: row.share[0], html=_share))


def jax_section(results) -> str:
    """Compilation apart from every rate, and aggregate env steps/s against agents trained at once."""
    compiled = [(c, results.benchmarks[c.cell_id]) for c in results.cells.values() if c.n]
    compiled = [(c, b) for c, b in compiled if b.stat("compile_s").n]
    if not compiled:
        return ""
    rows = [compiled_row(c, bench) for c, bench in compiled]
    fig = agents_figure([c for c, _ in compiled])
    chart = charts.to_html(fig, charts.chart_id("jax", "agents")) if fig else ""
    return ("<h2>Compiled programs (JAX): compile time apart from the rate</h2>"
            "<p>compile_s is the ahead-of-time lowering and compilation inside setup; no rate includes it. "
            "state GB/s: the compiled loop's carry (env state, obs, keys, returns) read and written once per "
            "step, the least memory traffic it can make, against the same devices' own copy rate measured "
            "in the cell (x + 1 over a buffer past the caches); its share with a bootstrap 95% CI of the "
            "median over the repeats. unit cost: what each unit costs besides its program (a compiled no-op on "
            "the same carry, dispatched, waited for and timed as a unit is), and the share of the window it "
            "took: what the harness costs per unit on these devices.</p>"
            + table(TABLE, rows)
            + (f"<h3>Agents trained at once: aggregate env steps/s vs num_agents</h3>{chart}" if chart else ""))
