"""Statistics of a cell's repeats (each repeat is one independent fresh-process run).

The 95% confidence interval is for the median: distribution-free order statistics when n >= 6; for 2 <= n < 6,
Student's t interval on the log of the values (rates are positive and skewed: the interval stays positive), which
`ci_method` says. Quantiles come from scipy.stats, imported only when a statistic is computed.
"""
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

CV_WARN = 0.10
MIN_N = 3


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float
    ci_low: float
    ci_high: float
    ci_method: str
    q1: float
    q3: float
    iqr: float
    cv: float
    minimum: float
    maximum: float
    warning: str


@lru_cache(maxsize=None)
def t975(df: int) -> float:
    """The two-sided 95% Student t quantile for df degrees of freedom (scipy.stats.t; cached, as summarize
    asks it for every metric of every cell)."""
    from scipy.stats import t  # scipy only when a report is made: importing rlbench stays cheap
    return float(t.ppf(0.975, df))


def median_ci_ranks(n: int) -> tuple:
    """0-based ranks (lo, hi) of the order statistics bounding a >= 95% CI of the median: lo is the
    largest k with P(Binomial(n, 1/2) <= k) <= 0.025, the same on the other side. Exact integer sums
    (math.comb): a cell process asks for it before its window opens, where importing scipy costs ~1 s."""
    lo, below = -1, 0
    while n > 0 and (below + math.comb(n, lo + 1)) * 40 <= 2 ** n:   # P(B <= lo + 1) <= 0.025
        lo += 1
        below += math.comb(n, lo)
    if lo < 0:
        raise ValueError(f"n={n} is too small for a 95% distribution-free CI of the median (needs n >= 6)")
    return lo, n - 1 - lo


def summarize(values) -> Summary:
    x = np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float))
    n = len(x)
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan, "none", nan, nan, nan, nan, nan, nan, "no successful repeat")
    median, mean = float(np.median(x)), float(x.mean())
    stdev = float(x.std(ddof=1)) if n > 1 else 0.0
    if n >= 6:
        lo, hi = median_ci_ranks(n)
        ci, method = (float(x[lo]), float(x[hi])), "order-statistics"
    elif n > 1 and x[0] > 0:
        logs = np.log(x)
        half = t975(n - 1) * float(logs.std(ddof=1)) / math.sqrt(n)
        ci, method = (math.exp(logs.mean() - half), math.exp(logs.mean() + half)), "student-t-log"
    elif n > 1:
        half = t975(n - 1) * stdev / math.sqrt(n)
        ci, method = (mean - half, mean + half), "student-t"
    else:
        ci, method = (float("nan"), float("nan")), "none"
    q1, q3 = (float(q) for q in np.percentile(x, [25, 75]))
    cv = stdev / mean if mean and n > 1 else float("nan")
    warnings = []
    if n < MIN_N:
        warnings.append(f"n={n} < {MIN_N}")
    if cv > CV_WARN:
        warnings.append(f"CV {cv:.1%} > {CV_WARN:.0%}")
    return Summary(n, median, mean, stdev, ci[0], ci[1], method, q1, q3, q3 - q1, cv,
                   float(x[0]), float(x[-1]), "; ".join(warnings))


def ratio_ci(numerator, denominator, confidence: float = 0.95, seed: int = 0) -> tuple:
    """(ratio of medians, low, high): the speedup of one cell over another with a percentile-bootstrap CI
    (scipy.stats.bootstrap, the two samples resampled independently; seeded, so a report rebuilds the same).
    The bounds are NaN when either side has fewer than 2 finite values."""
    from scipy.stats import bootstrap
    x = np.asarray([v for v in numerator if v is not None and math.isfinite(v)], dtype=float)
    y = np.asarray([v for v in denominator if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0 or len(y) == 0 or np.median(y) == 0:
        nan = float("nan")
        return nan, nan, nan
    ratio = float(np.median(x) / np.median(y))
    if len(x) < 2 or len(y) < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return (ratio, float("nan"), float("nan")) if len(x) < 2 or len(y) < 2 else (ratio, ratio, ratio)
    res = bootstrap((x, y), lambda a, b, axis=-1: np.median(a, axis=axis) / np.median(b, axis=axis),
                    confidence_level=confidence, n_resamples=2000, method="percentile", vectorized=True,
                    random_state=np.random.default_rng(seed))
    return ratio, float(res.confidence_interval.low), float(res.confidence_interval.high)


def widened(ratio: float, low: float, high: float, run_sd: float, confidence: float = 0.95) -> tuple:
    """(ratio, low, high) with run-to-run noise added to a ratio's CI from one run's repeats: each side's median
    moves between runs by run_sd (a standard deviation of log medians, A/A-learned), so the log ratio by
    sqrt(2) run_sd; that and the CI's own distance from the ratio add in quadrature, each side in log space.
    NaN bounds (too few repeats) and run_sd <= 0 leave it as it is."""
    if not (run_sd > 0 and low == low and high == high and ratio > 0 and low > 0 and high > 0):
        return ratio, low, high
    from scipy.stats import norm
    extra = float(norm.ppf(0.5 + confidence / 2)) * math.sqrt(2) * run_sd
    centre = math.log(ratio)
    down = math.hypot(centre - math.log(low), extra)
    up = math.hypot(math.log(high) - centre, extra)
    return ratio, math.exp(centre - down), math.exp(centre + up)


def median_ci(values, confidence: float = 0.95, seed: int = 0) -> tuple:
    """(median, low, high): the median of per-repeat values (a fraction each repeat measured, such as a replay
    store's limit_frac or a compiled loop's state_bw_frac) with a percentile-bootstrap CI (scipy.stats.bootstrap;
    seeded, so a report rebuilds the same). NaN without a finite value; NaN bounds with fewer than 2."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    nan = float("nan")
    if len(x) == 0:
        return nan, nan, nan
    median = float(np.median(x))
    if len(x) < 2:
        return median, nan, nan
    if np.ptp(x) == 0:
        return median, median, median
    from scipy.stats import bootstrap
    res = bootstrap((x,), np.median, confidence_level=confidence, n_resamples=2000, method="percentile",
                    vectorized=True, random_state=np.random.default_rng(seed))
    return median, float(res.confidence_interval.low), float(res.confidence_interval.high)


LOG_SD_FLOOR = 0.02  # repeat-to-repeat noise of fresh processes is rarely below 2%: no test trusts less


def slower_p(values, leader, floor: float = LOG_SD_FLOOR) -> float:
    """One-sided p-value that a cell's rates are lower than the leader's: Welch's t-test on the logs of
    each side's repeats (rates are positive and skewed), each side's spread floored at `floor` (LOG_SD_FLOOR, or
    the spread a caller has seen across many configurations: `pooled_log_sd`) so two repeats that agree by chance
    do not make a test overconfident. NaN with fewer than 2 values a side.

    Hand-written rather than scipy.stats.ttest_ind(log values, log leader, equal_var=False, alternative="less")
    because of that floor: scipy takes each side's variance as measured, and two or three fresh-process repeats
    that happen to agree to 0.1% would make it call a 1% gap significant. Where both sides' spreads exceed the
    floor the two agree (tests/core/test_stats.py checks it)."""
    from scipy.stats import t
    x = np.log(np.asarray([v for v in values if v and math.isfinite(v) and v > 0], dtype=float))
    y = np.log(np.asarray([v for v in leader if v and math.isfinite(v) and v > 0], dtype=float))
    if len(x) < 2 or len(y) < 2:
        return float("nan")
    vx, vy = (max(float(a.var(ddof=1)), floor ** 2) / len(a) for a in (x, y))
    stat = (y.mean() - x.mean()) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return float(t.sf(stat, df))


def pooled_log_spread(samples) -> tuple:
    """(sd, degrees of freedom, groups) of log values pooled over groups (each a list of positive values; one
    with fewer than 2 counts for nothing): the within-group standard deviation of their logs; sd NaN where no
    group has 2. The repeats of many configurations (`pooled_log_sd`), or a cell's medians across A/A runs
    (rlbench.results.changes.aa_noise)."""
    ss, dof, groups = 0.0, 0, 0
    for values in samples:
        x = np.log(np.asarray([v for v in values if v and math.isfinite(v) and v > 0], dtype=float))
        if len(x) >= 2:
            ss, dof, groups = ss + float(((x - x.mean()) ** 2).sum()), dof + len(x) - 1, groups + 1
    return (math.sqrt(ss / dof) if dof else float("nan")), dof, groups


def pooled_log_sd(samples) -> float:
    """The repeat-to-repeat spread of log rates pooled over several configurations' repeats (pooled_log_spread),
    at least LOG_SD_FLOOR: on a bursty env every configuration's repeats spread alike, so two of one that agree by
    chance say less than the many measured together (issue 66: two repeats of sb3-subproc, CI [2.12k, 22.22k]
    from the spread, dropped rlpyt-cpu at p=0.045, and the sweep found rlpyt-cpu the faster)."""
    sd, dof, _ = pooled_log_spread(samples)
    return max(sd, LOG_SD_FLOOR) if dof else LOG_SD_FLOOR
