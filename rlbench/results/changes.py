"""Series over commits, their change points, and the history gate.

A series is one cell of one suite on one machine class: a point per run (the median of its ok repeats, with the
95% CI of rlbench.results.stats), ordered by commit date, then by when the run started. Noise between runs is
what a pairwise gate cannot see (two rounds of the same code on these 2-core VMs differ by 5-15% in the async
loops, far more than the repeats inside one run spread), so it is learned from A/A history: runs of one clean
commit, whose spread of log medians is the machine's run-to-run noise for that cell (pooled over the suite's
cells where one cell has too few), floored at RUN_SD_FLOOR.

Change points: ruptures' PELT (model "l2", the least-squares change in mean; Killick et al. 2012) on the log
medians in units of that noise, with the BIC penalty 2 ln(n); each candidate is kept only where the segments it
splits differ significantly (a t-test whose spread is never below the learned noise), as Apache Otava
confirms its e-divisive candidates with a t-test. ruptures is chosen over Otava itself because Otava pins numpy
2.2 and scipy < 1.17 and pulls in BigQuery, Postgres and Slack clients; over hand-written detection because
ruptures is maintained, tested and needs only numpy and scipy.

The gate (`rlbench history check`): a new run's point against the points since the series' last change (the
current level, at most `window` of them): the one-sided t prediction test of a new observation, with the learned
noise; Holm's step-down across the run's cells keeps the suite's false-alarm rate at alpha (scipy has only the
FDR procedures, which do not bound it). What it finds is said as CellChange values of the one gate
(rlbench.results.gate) that `rlbench compare` shares."""
import math
from dataclasses import dataclass

import numpy as np

from rlbench.results.gate import CellChange
from rlbench.results.stats import pooled_log_spread, summarize

RUN_SD_FLOOR = 0.01      # no machine's run-to-run noise is trusted below 1%
MIN_AA_DOF = 3           # A/A degrees of freedom a cell needs before its own noise is used
MIN_POINTS = 4           # points a series needs before change points are looked for
SERIES = ("suite", "cell_id", "machine_class")


@dataclass(frozen=True)
class Noise:
    """Run-to-run noise of one series, as a standard deviation of log medians, with where it came from."""
    sd: float
    dof: int
    source: str


@dataclass(frozen=True)
class Change:
    """A change point: the series' level moves at point `index` (the first of the new segment)."""
    index: int
    run_id: str
    commit: str
    before: float          # the medians of the two segments' points
    after: float
    ratio: float           # after / before
    p_value: float
    significant: bool


def points(repeats):
    """One row per (series, run): n, median, its 95% CI, log median, in the series' order (commit date, then
    start). `repeats`: rlbench.results.history.History.repeats()."""
    import pandas as pd
    rows = []
    keys = [*SERIES, "run_key"]
    for key, group in repeats.groupby(keys, sort=False):
        s = summarize(group["value"].tolist())
        first = group.iloc[0]
        rows.append({**dict(zip(keys, key)), "run_id": first["run_id"], "machine_label": first["machine_label"],
                     "git_commit": first["git_commit"], "git_dirty": first["git_dirty"],
                     "commit_time": first["commit_time"], "run_started_at": first["run_started_at"],
                     "tag": first["tag"], "n": s.n, "median": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high,
                     "cv": s.cv, "log_median": math.log(s.median) if s.median > 0 else float("nan")})
    frame = pd.DataFrame(rows, columns=[*keys, "run_id", "machine_label", "git_commit", "git_dirty", "commit_time",
                                        "run_started_at", "tag", "n", "median", "ci_low", "ci_high", "cv",
                                        "log_median"])
    frame = frame[np.isfinite(frame["log_median"].astype(float))]
    order = frame["commit_time"].fillna(frame["run_started_at"])
    return frame.assign(_order=order).sort_values([*SERIES, "_order", "run_started_at"]).drop(columns="_order") \
        .reset_index(drop=True)


def noise(pts) -> dict:
    """(suite, cell_id, machine_class) -> Noise: the pooled spread of log medians within A/A groups (runs of one
    commit and tag, from a clean tree or tagged); the suite's pooled A/A spread on that machine where the cell
    has fewer than MIN_AA_DOF degrees of freedom; else the series' own spread of successive differences (robust:
    a step moves one difference only); floored at RUN_SD_FLOOR."""
    # one clean commit is the same code; a tag declares a dirty tree's runs one group (make check-history's)
    clean = pts[pts["git_commit"].notna() & ((pts["git_dirty"] == 0) | pts["tag"].notna())]
    per_cell, per_suite, groups = {}, {}, {}
    for key, group in clean.groupby([*SERIES, "git_commit", clean["tag"].fillna("")], sort=False):
        x = group["log_median"].to_numpy(float)
        if len(x) < 2:
            continue
        ss, dof = float(((x - x.mean()) ** 2).sum()), len(x) - 1
        groups[key[:3]] = groups.get(key[:3], 0) + 1
        for bucket, k in ((per_cell, key[:3]), (per_suite, (key[0], key[2]))):
            a, b = bucket.get(k, (0.0, 0))
            bucket[k] = (a + ss, b + dof)
    out = {}
    for key, series in pts.groupby(list(SERIES), sort=False):
        suite, _, cls = key
        if per_cell.get(key, (0, 0))[1] >= MIN_AA_DOF:
            ss, dof = per_cell[key]
            sd, source = math.sqrt(ss / dof), f"A/A: {dof + groups[key]} runs of this cell"
        elif per_suite.get((suite, cls), (0, 0))[1] >= MIN_AA_DOF:
            ss, dof = per_suite[(suite, cls)]
            sd, source = math.sqrt(ss / dof), "A/A of the suite's cells on this machine"
        else:
            diffs = np.diff(series["log_median"].to_numpy(float))
            dof = max(len(diffs) - 1, 1)
            sd = float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2)) if len(diffs) >= 3 \
                else float("nan")
            source = "the series itself (no A/A history)"
        if not math.isfinite(sd) or sd < RUN_SD_FLOOR:
            sd, source = (RUN_SD_FLOOR, f"the floor ({source} gave less)") if math.isfinite(sd) else \
                (RUN_SD_FLOOR, "the floor (no A/A history, too few points)")
        out[key] = Noise(sd, dof, source)
    return out


def aa_noise(results_list, metric: str = "steps_per_s") -> Noise:
    """The run-to-run noise of a machine from A/A runs given as folders (the same code run again, one run after
    another): the spread of each cell's log median across the runs that hold it, pooled over the cells (a cell in
    fewer than 2 runs adds nothing), floored at RUN_SD_FLOOR; the floor where no cell is in two runs. `rlbench
    validate --noise-from` widens every ratio's CI by it (a claim's verdict must hold across runs, not only
    within one)."""
    medians = {}
    for results in results_list:
        for cell_id, bench in results.benchmarks.items():
            values = [r.get(metric) for r in bench.ok_runs if r.get(metric)]
            if values:
                medians.setdefault(cell_id, []).append(float(np.median(values)))
    sd, dof, cells = pooled_log_spread(medians.values())
    if dof == 0:
        return Noise(RUN_SD_FLOOR, 0, "the floor (no cell in two of the runs given)")
    source = f"A/A: {len(results_list)} runs, {cells} cells"
    return Noise(sd, dof, source) if sd >= RUN_SD_FLOOR else Noise(RUN_SD_FLOOR, dof, f"the floor ({source} gave less)")


def change_points(series, sd: float, alpha: float = 0.05) -> list:
    """The significant changes of one series (its points, in order), as Change."""
    x = series["log_median"].to_numpy(float)
    n = len(x)
    if n < MIN_POINTS:
        return []
    import ruptures
    from scipy.stats import ttest_ind_from_stats
    cuts = ruptures.Pelt(model="l2", min_size=2, jump=1).fit((x / sd).reshape(-1, 1)).predict(pen=2 * math.log(n))
    bounds = [0, *cuts]
    changes = []
    for i in range(1, len(bounds) - 1):
        a, b = x[bounds[i - 1]:bounds[i]], x[bounds[i]:bounds[i + 1]]
        spread = max(sd, math.sqrt((((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
                                   / max(len(a) + len(b) - 2, 1)))
        p = float(ttest_ind_from_stats(b.mean(), spread, len(b), a.mean(), spread, len(a)).pvalue)
        at = series.iloc[bounds[i]]
        changes.append(Change(bounds[i], at["run_id"], at["git_commit"], float(np.exp(np.median(a))),
                              float(np.exp(np.median(b))), float(np.exp(np.median(b) - np.median(a))), p,
                              p <= alpha))
    return [c for c in changes if c.significant]


# history-check.csv: its column -> the CellChange field it shows (rlbench.results.gate.table)
CHECK_COLUMNS = {"cell_id": "cell_id", "verdict": "verdict", "new_median": "new", "level_median": "base",
                 "ratio": "ratio", "p_value": "p_value", "p_holm": "p_holm", "window": "window",
                 "noise_sd": "noise_sd", "noise_source": "noise_source", "first_verdict": "first_verdict",
                 "confirm_ratio": "confirm_ratio", "reason": "reason"}
TEST = "t prediction, Holm"


@dataclass(frozen=True)
class Level:
    """A new point against its series' current level, before Holm's adjustment across the run's cells: the level
    (the geometric mean of its points' medians), the ratio new / level, the one-sided p of a slowdown (None where
    fewer than 2 points set the level), the points used and the noise the test assumed."""
    window: int
    level: float = None
    ratio: float = None
    p_value: float = None
    noise_sd: float = None
    noise_source: str = None


def check(history_pts, new_pts, noises: dict, alpha: float = 0.05, threshold: float = 0.02, window: int = 20,
          failed: tuple = ()) -> list:
    """One CellChange (rlbench.results.gate) per cell of the new run: its point against its series' current level,
    judged once Holm's step-down has adjusted the p of every cell tested. `failed`: cells of the new run with no ok
    repeat. Each change's first_verdict is its verdict: a confirmation run (history check --confirm) may change
    the verdict, never the first one."""
    found = [(new["cell_id"], new["median"], against_level(history_pts, new, noises, alpha, window))
             for _, new in new_pts.iterrows()]
    tested = [level.p_value for _, _, level in found if level.p_value is not None]
    adjusted = iter(holm(tested))
    changes = [_judged(cell_id, median, level, next(adjusted) if level.p_value is not None else None, len(tested),
                       alpha, threshold) for cell_id, median, level in found]
    return changes + [CellChange(c, "failed", reason="no ok repeat", first_verdict="failed") for c in failed]


def against_level(history_pts, new, noises: dict, alpha: float, window: int) -> Level:
    """A new point (a row of `points`) against the level of its series in history_pts: the points since the
    series' last change, at most `window` of them; the one-sided t prediction test of a new observation, with the
    learned noise (never below the level's own spread)."""
    from scipy.stats import t
    key = (new["suite"], new["cell_id"], new["machine_class"])
    series = history_pts[(history_pts["suite"] == key[0]) & (history_pts["cell_id"] == key[1])
                         & (history_pts["machine_class"] == key[2])].reset_index(drop=True)
    level = series
    changes = change_points(series, noises[key].sd, alpha) if key in noises else []
    if changes:
        level = series.iloc[changes[-1].index:]
    level = level.iloc[-window:]
    if len(level) < 2:
        return Level(len(level))
    logs = level["log_median"].to_numpy(float)
    nz = noises.get(key) or Noise(RUN_SD_FLOOR, len(logs) - 1, "the floor")
    sd = max(nz.sd, float(logs.std(ddof=1)) if len(logs) >= 3 else 0.0)
    stat = (new["log_median"] - logs.mean()) / (sd * math.sqrt(1 + 1 / len(logs)))
    dof = max(nz.dof, len(logs) - 1)
    return Level(len(level), float(np.exp(logs.mean())), math.exp(new["log_median"] - logs.mean()),
                 float(t.cdf(stat, dof)), sd, nz.source)


def _judged(cell_id, median, level: Level, p_holm, tests: int, alpha: float, threshold: float) -> CellChange:
    """The gate's verdict on one cell: slower where beyond the threshold and significant after Holm's adjustment;
    faster where beyond it and the other tail's p (Bonferroni over the cells tested) says so; else the same."""
    if level.p_value is None:
        return CellChange(cell_id, "no history", new=median, window=level.window, first_verdict="no history",
                          reason=f"{level.window} run(s) of this cell on this machine since its last change "
                                 "(the gate needs 2)")
    ratio = level.ratio
    slower, faster = ratio < 1 - threshold, ratio > 1 + threshold
    p_faster = min(1.0, (1 - level.p_value) * tests)
    if slower and p_holm <= alpha:
        verdict, reason = "slower", (f"{1 - ratio:.1%} below the level of the last {level.window} runs, "
                                     f"p={p_holm:.3g} (Holm)")
    elif faster and p_faster <= alpha:
        verdict, reason = "faster", f"{ratio - 1:.1%} above the level of the last {level.window} runs"
    else:
        verdict = "same"
        reason = (f"within {threshold:.0%}" if not slower and not faster else
                  f"{ratio - 1:+.1%}, within the noise (p={p_holm:.3g} Holm)")
    return CellChange(cell_id, verdict, base=level.level, new=median, ratio=ratio, p_value=level.p_value,
                      reason=reason, test=TEST, p_holm=p_holm, window=level.window, noise_sd=level.noise_sd,
                      noise_source=level.noise_source, first_verdict=verdict)


def holm(p_values) -> list:
    """Holm's step-down adjusted p-values (family-wise error at alpha over the run's cells)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
