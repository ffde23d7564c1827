"""Run against run: a cell regressed only when it is both slower by more than the threshold and significantly so
over its repeats (two-sided Mann-Whitney U; with too few repeats, non-overlapping 95% CIs of the median), and
beyond the machine's run-to-run noise (the ratio's 95% CI widened by it, A/A-learned with --noise-from, else the
1% floor: two runs differ by more than one run's repeats show), so a noisy CI machine does not cry wolf. Cells
measured on machines whose fingerprints differ, or with different CPU sets or devices, are `not comparable`, never
failed. Each cell's change is new/base with a bootstrap 95% CI
(docs/compare.md), said as a CellChange of the one gate (rlbench.results.gate) that `history check` shares.
"""
import math
from dataclasses import dataclass

from rlbench.results.changes import RUN_SD_FLOOR
from rlbench.results.gate import CellChange, counts_label, regressions
from rlbench.results.stats import ratio_ci, summarize, widened

METRIC = "steps_per_s"   # higher is better
MACHINE = ("cpu_model", "cpu_logical_cores", "ram_gb", "gpus")
CELL = ("cpus", "device", "omp_threads")
EXACT_MAX_N = 12

# compare.csv: its column -> the CellChange field it shows (rlbench.results.gate.table)
COLUMNS = {"cell_id": "cell_id", "verdict": "verdict", "base_median": "base", "new_median": "new", "ratio": "ratio",
           "ratio_ci_low": "ratio_low", "ratio_ci_high": "ratio_high", "change_pct": "change_pct",
           "p_value": "p_value", "test": "test", "base_n": "base_n", "new_n": "new_n", "base_ci_low": "base_ci_low",
           "base_ci_high": "base_ci_high", "new_ci_low": "new_ci_low", "new_ci_high": "new_ci_high",
           "reason": "reason"}


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


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: a CellChange per cell of either (rlbench.results.gate), the threshold and alpha that
    judged them, and each side's machine as compared."""
    rows: tuple
    threshold: float
    alpha: float
    base_machine: dict
    new_machine: dict
    run_sd: float = RUN_SD_FLOOR    # the run-to-run noise the verdicts allowed for (a log median's sd)

    @property
    def counts_label(self) -> str:
        """'19 failed, 41 same': cells per verdict."""
        return counts_label(self.rows)

    @property
    def regressions(self) -> tuple:
        return regressions(self.rows)


def compare(base, new, threshold: float = 0.10, alpha: float = 0.05, run_sd: float = RUN_SD_FLOOR) -> Comparison:
    """base, new: rlbench.results.model.ResultSet. One CellChange per cell of either, in the new run's order;
    run_sd: the machine's run-to-run noise (rlbench.results.changes.aa_noise), at least the floor."""
    run_sd = max(run_sd, RUN_SD_FLOOR)
    bm, nm = machine(base.record), machine(new.record)
    machine_diff = [k for k in MACHINE if bm[k] != nm[k]]
    ids = list(new.benchmarks) + [c for c in base.benchmarks if c not in new.benchmarks]
    rows = tuple(_compare_cell(cell_id, base.benchmarks.get(cell_id), new.benchmarks.get(cell_id), machine_diff, bm,
                               nm, threshold, alpha, run_sd) for cell_id in ids)
    return Comparison(rows, threshold, alpha, bm, nm, run_sd)


def _compare_cell(cell_id, b, n, machine_diff, bm, nm, threshold, alpha, run_sd=RUN_SD_FLOOR) -> CellChange:
    if b is None or n is None:
        return CellChange(cell_id, "only in new" if b is None else "only in base")
    bx = [r[METRIC] for r in b.ok_runs if r.get(METRIC) is not None]
    nx = [r[METRIC] for r in n.ok_runs if r.get(METRIC) is not None]
    bs, ns = summarize(bx), summarize(nx)
    sides = dict(base=bs.median, new=ns.median, base_n=bs.n, new_n=ns.n, base_ci_low=bs.ci_low,
                 base_ci_high=bs.ci_high, new_ci_low=ns.ci_low, new_ci_high=ns.ci_high)
    if not bx and not nx:
        return CellChange(cell_id, "not run", reason=f"no ok repeat on either side ({b.status} / {n.status})",
                          **sides)
    if not bx or not nx:
        side = b if not bx else n
        return CellChange(cell_id, "failed", reason=f"no ok repeat in {'base' if not bx else 'new'} ({side.status})",
                          **sides)
    ratio = ns.median / bs.median if bs.median else float("nan")
    _, low, high = ratio_ci(nx, bx)
    measured = dict(sides, ratio=ratio, ratio_low=low, ratio_high=high)
    differ = [f"{k}: {bm[k]} vs {nm[k]}" for k in machine_diff]
    differ += [f"{k}: {b.ok_runs[0].get(k)} vs {n.ok_runs[0].get(k)}" for k in CELL
               if b.ok_runs[0].get(k) != n.ok_runs[0].get(k)]
    if differ:
        return CellChange(cell_id, "not comparable", reason="different " + "; ".join(differ), **measured)
    significant, p, test = significance(bx, nx, bs, ns, alpha)
    _, w_low, w_high = widened(ratio, low, high, run_sd)   # the CI with the run-to-run noise in it
    if abs(ratio - 1) <= threshold:
        verdict, reason = "same", f"within {threshold:.0%}"
    elif not significant:
        verdict, reason = "uncertain", f"beyond {threshold:.0%} but not significant ({test})"
    elif low == low and high == high and w_low <= 1 <= w_high:   # 1x within the noise (a CI the repeats gave)
        verdict, reason = "uncertain", (f"beyond {threshold:.0%} and significant over the repeats ({test}), but "
                                        f"within the run-to-run noise: the 95% CI with it is [{w_low:.2f}, "
                                        f"{w_high:.2f}]")
    else:
        verdict = "slower" if ratio < 1 else "faster"
        reason = f"{abs(100 * (ratio - 1)):.1f}% {verdict}, significant ({test})"
    return CellChange(cell_id, verdict, reason=reason, p_value=p, test=test, **measured)


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
