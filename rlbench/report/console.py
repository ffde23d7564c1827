"""The table of medians printed at the end of a run, from the run's view (rlbench.report.view); numbers
formatted by rlbench.report.format."""
from rlbench.report.format import fixed, pct, rate
from rlbench.report.view import run_view


def medians_table(source) -> str:
    """source: a ResultSet or its RunView."""
    head = ("cell", "n", "steps/s median", "95% CI", "CV", "p99 ms", "status")
    lines = [head]
    for r in run_view(source).rows:
        many = r["n"] > 1
        ci = f"{rate(r['steps_per_s_ci_low'])}..{rate(r['steps_per_s_ci_high'])}" if many else "-"
        cv = pct(r["steps_per_s_cv"]) if many else "-"
        p99 = fixed(r["latency_p99_ms_median"], ".3f") if r["n"] else "-"
        status = r["status"] + (f" ({r['warning']})" if r["warning"] else "")
        if r["status"] not in ("ok",) and r["error"]:
            status += f": {r['error'][:70]}"
        lines.append((r["cell_id"], str(r["n"]), rate(r["steps_per_s_median"]), ci, cv, p99, status))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = []
    for line in lines:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells) + "  " + line[-1])
    return "\n".join(out)
