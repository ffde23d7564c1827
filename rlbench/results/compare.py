"""Run against run: a cell regressed only when it is both slower by more than the threshold and significantly so
over its repeats (two-sided Mann-Whitney U; with too few repeats, non-overlapping 95% CIs of the median), so a
noisy CI machine does not cry wolf. Cells measured on machines whose fingerprints differ, or with different CPU
sets or devices, are `not comparable`, never failed. Each cell's change is new/base with a bootstrap 95% CI
(docs/compare.md).
"""
import math
from dataclasses import dataclass

from rlbench.errors import UsageError
from rlbench.results.stats import ratio_ci, summarize

METRIC = "steps_per_s"   # higher is better
MACHINE = ("cpu_model", "cpu_logical_cores", "ram_gb", "gpus")
CELL = ("cpus", "device", "omp_threads")
EXACT_MAX_N = 12

# verdict -> does it fail the comparison
VERDICTS = {"slower": True, "faster": False, "same": False, "uncertain": False, "not comparable": False,
            "failed": False, "not run": False, "only in base": False, "only in new": False}
COLUMNS = ("cell_id", "verdict", "base_median", "new_median", "ratio", "ratio_ci_low", "ratio_ci_high",
           "change_pct", "p_value", "test",
           "base_n", "new_n", "base_ci_low", "base_ci_high", "new_ci_low", "new_ci_high", "reason")


def parse_threshold(text: str) -> float:
    """'10%' or '0.1' -> 0.1."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < 10:
        raise UsageError(f"--threshold {text!r} must be a relative change such as 10% or 0.1 (> 0)")
    return value


def machine(record) -> dict:
    """What makes two runs' machines the same (of their RunRecords); a cluster run's are its class's nodes,
    not the driver."""
    cluster, env = record.cluster, record.machine
    if cluster:
        fp = cluster["classes"][cluster["class"]]["fingerprint"]
        return {"cpu_model": fp.get("cpu_model"), "cpu_logical_cores": fp.get("cpu_logical_cores"),
                "ram_gb": fp.get("ram_gb"), "gpus": [name for name, _ in fp.get("gpus") or []]}
    gpus = [g.get("name") for g in env.get("gpus") or []]
    ram = env.get("ram_gb")
    return {"cpu_model": env.get("cpu_model"), "cpu_logical_cores": env.get("cpu_logical_cores"),
            "ram_gb": round(ram) if isinstance(ram, (int, float)) else ram, "gpus": gpus}


def mann_whitney_u(x, y) -> tuple:
    """(U of x, two-sided p, method): scipy.stats.mannwhitneyu, exact when both samples are small and
    tie-free, else the normal approximation (tie-corrected, with continuity correction). Ties count half."""
    from scipy.stats import mannwhitneyu  # scipy only when comparing: importing rlbench stays cheap
    m, n = len(x), len(y)
    exact = max(m, n) <= EXACT_MAX_N and len(set(x) | set(y)) == m + n
    res = mannwhitneyu(x, y, alternative="two-sided", method="exact" if exact else "asymptotic")
    p = float(res.pvalue)
    return float(res.statistic), 1.0 if math.isnan(p) else min(1.0, p), \
        "mann-whitney-exact" if exact else "mann-whitney-normal"


def min_p(m: int, n: int) -> float:
    """The smallest two-sided p the exact test can give for these sample sizes: the two most extreme
    orderings (every x below every y, or above) out of C(m + n, m). Kept as this closed form because scipy
    has no function for it (scipy.stats.mannwhitneyu on fully separated samples gives the same value, as
    tests/core/test_compare.py checks, but only by running the test)."""
    return 2 / math.comb(m + n, m)


def ratio_label(row: dict) -> str:
    """'1.29x [1.10, 1.52]': a compared cell's new/base ratio of medians and its bootstrap 95% CI ('' when
    the cell has no ratio; no bracket when the CI is unknown, with fewer than 2 repeats on a side)."""
    ratio, lo, hi = row.get("ratio"), row.get("ratio_ci_low"), row.get("ratio_ci_high")
    if ratio is None or math.isnan(ratio):
        return ""
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{ratio:.2f}x"
    return f"{ratio:.2f}x [{lo:.2f}, {hi:.2f}]"


@dataclass
class Comparison:
    rows: list
    threshold: float
    alpha: float
    base_machine: dict
    new_machine: dict

    @property
    def counts_label(self) -> str:
        """'19 failed, 41 same': cells per verdict."""
        counts = {}
        for r in self.rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        return ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))

    @property
    def regressions(self) -> list:
        return [r for r in self.rows if VERDICTS[r["verdict"]]]


def compare(base, new, threshold: float = 0.10, alpha: float = 0.05) -> Comparison:
    """base, new: rlbench.results.model.ResultSet. One row per cell of either, in the new run's order."""
    bm, nm = machine(base.record), machine(new.record)
    machine_diff = [k for k in MACHINE if bm[k] != nm[k]]
    ids = list(new.benchmarks) + [c for c in base.benchmarks if c not in new.benchmarks]
    rows = []
    for cell_id in ids:
        b, n = base.benchmarks.get(cell_id), new.benchmarks.get(cell_id)
        rows.append(_compare_cell(cell_id, b, n, machine_diff, bm, nm, threshold, alpha))
    return Comparison(rows, threshold, alpha, bm, nm)


def _compare_cell(cell_id, b, n, machine_diff, bm, nm, threshold, alpha) -> dict:
    row = {c: None for c in COLUMNS}
    row["cell_id"] = cell_id
    if b is None or n is None:
        return {**row, "verdict": "only in new" if b is None else "only in base", "reason": ""}
    bx = [r[METRIC] for r in b.ok_runs if r.get(METRIC) is not None]
    nx = [r[METRIC] for r in n.ok_runs if r.get(METRIC) is not None]
    bs, ns = summarize(bx), summarize(nx)
    row.update(base_median=bs.median, new_median=ns.median, base_n=bs.n, new_n=ns.n, base_ci_low=bs.ci_low,
               base_ci_high=bs.ci_high, new_ci_low=ns.ci_low, new_ci_high=ns.ci_high)
    if not bx and not nx:
        return {**row, "verdict": "not run", "reason": f"no ok repeat on either side ({b.status} / {n.status})"}
    if not bx or not nx:
        side = b if not bx else n
        return {**row, "verdict": "failed",
                "reason": f"no ok repeat in {'base' if not bx else 'new'} ({side.status})"}
    row["ratio"] = ns.median / bs.median if bs.median else float("nan")
    _, row["ratio_ci_low"], row["ratio_ci_high"] = ratio_ci(nx, bx)
    row["change_pct"] = 100 * (row["ratio"] - 1)
    differ = [f"{k}: {bm[k]} vs {nm[k]}" for k in machine_diff]
    differ += [f"{k}: {b.ok_runs[0].get(k)} vs {n.ok_runs[0].get(k)}" for k in CELL
               if b.ok_runs[0].get(k) != n.ok_runs[0].get(k)]
    if differ:
        return {**row, "verdict": "not comparable", "reason": "different " + "; ".join(differ)}
    significant, row["p_value"], row["test"] = significance(bx, nx, bs, ns, alpha)
    if abs(row["ratio"] - 1) <= threshold:
        verdict, reason = "same", f"within {threshold:.0%}"
    elif not significant:
        verdict, reason = "uncertain", f"beyond {threshold:.0%} but not significant ({row['test']})"
    else:
        verdict = "slower" if row["ratio"] < 1 else "faster"
        reason = f"{abs(row['change_pct']):.1f}% {verdict}, significant ({row['test']})"
    return {**row, "verdict": verdict, "reason": reason}


def significance(bx, nx, bs, ns, alpha) -> tuple:
    """(significant, p or None, method)."""
    if len(bx) < 2 or len(nx) < 2:
        return False, None, f"too few repeats ({len(bx)} vs {len(nx)})"
    m, n = len(bx), len(nx)
    if max(m, n) > EXACT_MAX_N or min_p(m, n) <= alpha:
        _, p, method = mann_whitney_u(bx, nx)
        return p <= alpha, p, method
    disjoint = bs.ci_high < ns.ci_low or ns.ci_high < bs.ci_low
    return disjoint, None, f"ci-overlap ({m} vs {n} repeats: the U test cannot reach p <= {alpha:g})"
