"""The compiled-programs section: compile time apart from every rate, the carry's bandwidth against the
devices' copy rate, and aggregate env steps/s against agents trained at once."""
from rlbench.report import charts
from rlbench.report.format import esc as _e
from rlbench.report.format import fixed, pct, rate
from rlbench.report.points import STAT_COLUMNS, env_label, stat_points


def agents_figure(rows):
    """Aggregate env steps/s vs num_agents (agents trained at once by one compiled program)."""
    points = stat_points([r for r in rows if "num_agents" in (r.get("options") or {})], "steps_per_s",
                        x=lambda r: int(r["options"]["num_agents"]),
                        series=lambda r: f"{r['adapter']} {env_label(r)} n={r['num_envs']}")
    return charts.scaling(points, **STAT_COLUMNS, x_title="num_agents",
                          y_title="aggregate env steps/s") if points else None


def jax_section(results) -> str:
    """Compilation apart from every rate, and aggregate env steps/s against agents trained at once."""
    rows = results.summary_rows()
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
