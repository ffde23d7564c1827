"""The table of medians printed at the end of a run."""
from rlbench.report.format import rate as fmt_rate


def medians_table(results) -> str:
    rows = results.summary_rows()
    head = ("cell", "n", "steps/s median", "95% CI", "CV", "p99 ms", "status")
    lines = [head]
    for r in rows:
        ci = f"{fmt_rate(r['steps_per_s_ci_low'])}..{fmt_rate(r['steps_per_s_ci_high'])}" if r["n"] > 1 else "-"
        cv = f"{r['steps_per_s_cv']:.1%}" if r["n"] > 1 else "-"
        p99 = f"{r['latency_p99_ms_median']:.3f}" if r["n"] else "-"
        status = r["status"] + (f" ({r['warning']})" if r["warning"] else "")
        if r["status"] not in ("ok",) and r["error"]:
            status += f": {r['error'][:70]}"
        lines.append((r["cell_id"], str(r["n"]), fmt_rate(r["steps_per_s_median"]), ci, cv, p99, status))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = []
    for line in lines:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells) + "  " + line[-1])
    return "\n".join(out)
