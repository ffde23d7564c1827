"""Cells (rlbench.results.summary.CellSummary) as charts and tables see them: labels of an env and a strategy,
cells grouped, and one chart point per cell (median, 95% CI, n, CV) in the columns rlbench.report.charts.scaling
reads. The labels take a Run too (it has the same identity attributes)."""
from rlbench.report.format import is_num
from rlbench.workload import kv_label

STAT_COLUMNS = dict(x="x", y="y", series="series", lo="lo", hi="hi", n="n", cv="cv", label="label",
                    variant="variant")


def series_label(cell) -> str:
    return f"{cell.adapter} {cell.policy} {kv_label(cell.options)}".strip()


def stat_points(cells, key: str, x=lambda c: c.num_envs, series=None, variant: str = "") -> list:
    """One chart row per measured cell with a positive median of figure `key` (steps_per_s, latency_p50_ms,
    ...): its median, 95% CI, n and CV over the cell's ok repeats."""
    out = []
    for c in cells:
        if not c.n:
            continue
        s = c.stat(key)
        if is_num(s.median) and s.median > 0:
            out.append({"series": (series or series_label)(c), "variant": variant, "x": x(c), "y": s.median,
                        "lo": s.ci_low, "hi": s.ci_high, "n": s.n, "cv": s.cv, "label": c.cell_id})
    return out
