"""The table of medians printed at the end of a run, from the run's view (rlbench.report.view); numbers
formatted by rlbench.report.format."""
from rlbench.report.format import fixed, pct, rate
from rlbench.report.view import run_view


def medians_table(source) -> str:
    """source: a ResultSet or its RunView."""
    head = ("cell", "n", "steps/s median", "95% CI", "CV", "p99 ms", "status")
    lines = [head]
    for c in run_view(source).cells:
        s, many = c.steps_per_s, c.n > 1
        ci = f"{rate(s.ci_low)}..{rate(s.ci_high)}" if many else "-"
        cv = pct(s.cv) if many else "-"
        p99 = fixed(c.stat("latency_p99_ms").median, ".3f") if c.n else "-"
        status = c.status + (f" ({c.warning})" if c.warning else "")
        if c.status != "ok" and c.error:
            status += f": {c.error[:70]}"
        lines.append((c.cell_id, str(c.n), rate(s.median), ci, cv, p99, status))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = []
    for line in lines:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells) + "  " + line[-1])
    return "\n".join(out)
