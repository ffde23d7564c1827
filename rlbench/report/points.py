"""Summary rows as charts and tables see them: labels of an env and a strategy, rows grouped, and one chart
point per cell (median, 95% CI, n, CV) in the columns rlbench.report.charts.scaling reads."""
from rlbench.report.format import is_num
from rlbench.workload import kv_label

STAT_COLUMNS = dict(x="x", y="y", series="series", lo="lo", hi="hi", n="n", cv="cv", label="label",
                    variant="variant")


def env_label(row) -> str:
    kw = row.get("env_kwargs") or {}
    return row["env"] + (f" ({kv_label(kw)})" if kw else "")


def series_label(row) -> str:
    return f"{row['adapter']} {row['policy']} {kv_label(row.get('options'))}".strip()


def group_by(rows, key) -> dict:
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def stat_points(rows, key: str, results=None, x=lambda r: r["num_envs"], series=None, variant: str = "") -> list:
    """One chart row per cell with a positive `key` (steps_per_s, latency_p50_ms, ...): its median, 95% CI,
    n and CV. steps/s come from the summary rows; other metrics from each cell's repeats when `results` is
    given (the same summary the CSV's medians come from), else their medians alone."""
    out = []
    for r in rows:
        if not r["n"]:
            continue
        if key == "steps_per_s":
            median, lo, hi, n, cv = (r["steps_per_s_median"], r["steps_per_s_ci_low"], r["steps_per_s_ci_high"],
                                     r["n"], r["steps_per_s_cv"])
        elif results is not None and r["cell_id"] in results.benchmarks:
            s = results.benchmarks[r["cell_id"]].stat(key)
            median, lo, hi, n, cv = s.median, s.ci_low, s.ci_high, s.n, s.cv
        else:
            median, lo, hi, n, cv = r.get(f"{key}_median"), None, None, r["n"], None
        if is_num(median) and median > 0:
            out.append({"series": (series or series_label)(r), "variant": variant, "x": x(r), "y": median,
                        "lo": lo, "hi": hi, "n": n, "cv": cv, "label": r["cell_id"]})
    return out
