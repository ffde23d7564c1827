"""rlbench.results.stats on samples whose statistics are worked out by hand; its quantiles (scipy.stats) cross-checked
against the hand-written table and loop they replaced."""
import math
from fractions import Fraction

import pytest

from rlbench.results.stats import CV_WARN, MIN_N, median_ci_ranks, summarize, t975

nan = float("nan")


def test_three_values_by_hand():
    s = summarize([14.0, 10.0, 12.0])  # order does not matter
    assert s.n == 3
    assert s.median == 12.0 and s.mean == 12.0
    assert s.stdev == pytest.approx(2.0)            # sqrt(((-2)^2 + 0 + 2^2) / 2)
    assert (s.q1, s.q3, s.iqr) == pytest.approx((11.0, 13.0, 2.0))   # linear interpolation
    assert s.cv == pytest.approx(2.0 / 12.0)
    assert (s.minimum, s.maximum) == (10.0, 14.0)


def test_student_t_interval_on_logs_for_positive_small_samples():
    # ln 10, ln 12, ln 14: mean 2.4755164, sd 0.1684326; half width t(0.975, 2) * 0.1684326 / sqrt(3)
    # = 4.3026527 * 0.1684326 / 1.7320508 = 0.4184097
    s = summarize([10.0, 12.0, 14.0])
    assert s.ci_method == "student-t-log"
    assert s.ci_low == pytest.approx(7.823302, abs=1e-5)    # exp(2.4755164 - 0.4184097)
    assert s.ci_high == pytest.approx(18.064090, abs=1e-5)  # exp(2.4755164 + 0.4184097)
    assert s.ci_low < s.median < s.ci_high


def test_student_t_interval_when_a_value_is_not_positive():
    # mean 2, sd 2, df 2: 2 +- 4.3026527 * 2 / sqrt(3) = 2 +- 4.9682754
    s = summarize([0.0, 2.0, 4.0])
    assert s.ci_method == "student-t"
    assert s.ci_low == pytest.approx(-2.968275, abs=1e-5)
    assert s.ci_high == pytest.approx(6.968275, abs=1e-5)


def test_even_count_median_and_quartiles():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s.median == 2.5
    assert (s.q1, s.q3, s.iqr) == pytest.approx((1.75, 3.25, 1.5))


# the two-sided 95% Student t table rlbench carried before scipy (3 decimals), df = 1..30
OLD_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
            2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
            2.045, 2.042)


def test_t_quantiles():
    assert t975(1) == pytest.approx(12.706204736, abs=1e-8)
    assert t975(2) == pytest.approx(4.302652730, abs=1e-8)
    assert t975(30) == pytest.approx(2.042272456, abs=1e-8)
    assert t975(1000) == pytest.approx(1.962339081, abs=1e-8)  # the old table said 1.96 beyond df 30


@pytest.mark.parametrize("df", range(1, 31))
def test_t_quantiles_round_to_the_old_table(df):
    assert round(t975(df), 3) == pytest.approx(OLD_T975[df - 1], abs=1e-9)


def _exact_lower_rank(n: int) -> int:
    """The hand loop median_ci_ranks replaced, in exact fractions: the largest lo with
    P(Binomial(n, 1/2) <= lo) <= 0.025 (-1 when there is none)."""
    cdf, lo = Fraction(0), -1
    while cdf + Fraction(math.comb(n, lo + 1), 2**n) <= Fraction(1, 40):
        lo += 1
        cdf += Fraction(math.comb(n, lo), 2**n)
    return lo


@pytest.mark.parametrize("n", [*range(6, 130), 200, 501, 1000])
def test_order_statistics_ranks_match_the_exact_binomial(n):
    lo = _exact_lower_rank(n)
    assert median_ci_ranks(n) == (lo, n - 1 - lo)


@pytest.mark.parametrize("n", range(0, 6))
def test_order_statistics_ranks_below_six_have_none(n):
    assert n == 0 or _exact_lower_rank(n) == -1
    with pytest.raises(ValueError, match="n >= 6"):
        median_ci_ranks(n)


@pytest.mark.parametrize("n, ranks", [(6, (0, 5)), (10, (1, 8)), (20, (5, 14))])
def test_order_statistics_ranks(n, ranks):
    assert median_ci_ranks(n) == ranks
    lo, hi = ranks
    # the interval [x_lo, x_hi] covers the median with probability >= 95%: P(Bin(n, 1/2) <= lo) <= 2.5%
    tail = sum(math.comb(n, k) for k in range(lo + 1)) / 2**n
    assert tail <= 0.025 < tail + math.comb(n, lo + 1) / 2**n


def test_order_statistics_ranks_need_six():
    with pytest.raises(ValueError, match="n >= 6"):
        median_ci_ranks(5)


def test_order_statistics_interval_from_n_6():
    s = summarize([6.0, 1.0, 5.0, 2.0, 4.0, 3.0])
    assert s.ci_method == "order-statistics"
    assert (s.ci_low, s.ci_high) == (1.0, 6.0)
    s = summarize(list(range(1, 21)))
    assert (s.ci_low, s.ci_high) == (6.0, 15.0)  # 0-based ranks 5 and 14 of 1..20


def test_cv_warning_above_ten_percent():
    assert CV_WARN == 0.10
    assert summarize([10.0, 12.0, 14.0]).warning == "CV 16.7% > 10%"
    assert summarize([100.0, 101.0, 102.0]).warning == ""  # CV 0.99%


def test_small_n_warning():
    assert MIN_N == 3
    assert summarize([100.0, 100.0]).warning == "n=2 < 3"
    both = summarize([1.0, 2.0])
    assert both.warning == f"n=2 < 3; CV {both.cv:.1%} > 10%"


def test_single_value_has_no_interval():
    s = summarize([5.0])
    assert s.n == 1 and s.median == 5.0 and s.stdev == 0.0
    assert math.isnan(s.cv)  # no spread from one value
    assert s.ci_method == "none" and math.isnan(s.ci_low) and math.isnan(s.ci_high)
    assert s.warning == "n=1 < 3"


def test_none_nan_and_inf_are_ignored():
    s = summarize([None, 10.0, nan, 12.0, float("inf"), 14.0, None])
    assert s.n == 3
    assert s.median == 12.0
    assert s.ci_low == pytest.approx(summarize([10.0, 12.0, 14.0]).ci_low)


@pytest.mark.parametrize("values", [[], [None], [nan, None]])
def test_no_valid_value(values):
    s = summarize(values)
    assert s.n == 0 and s.ci_method == "none"
    assert all(math.isnan(v) for v in (s.median, s.mean, s.ci_low, s.ci_high, s.iqr, s.cv))
    assert s.warning == "no successful repeat"


# -- slower_p against scipy's Welch test; the bootstrap CI of a median -----------------------------------

@pytest.mark.parametrize("values, leader", [
    ([90.0, 95.0, 99.0], [100.0, 110.0, 105.0]),                 # slower: a small p
    ([100.0, 112.0, 104.0, 97.0], [101.0, 95.0, 108.0]),         # a tie
    ([130.0, 120.0, 140.0, 125.0, 133.0], [100.0, 90.0, 110.0]),  # faster: p near 1
    ([50.0, 80.0], [60.0, 75.0, 70.0, 90.0]),
])
def test_slower_p_is_scipys_one_sided_welch_test_on_logs_above_the_floor(values, leader):
    """slower_p(values, leader) is small when `values` are lower: scipy's ttest_ind(log values, log leader,
    equal_var=False, alternative='less'). They agree where both sides' log spreads exceed LOG_SD_FLOOR."""
    import numpy as np
    from scipy.stats import ttest_ind

    from rlbench.results.stats import LOG_SD_FLOOR, slower_p
    x, y = np.log(values), np.log(leader)
    assert x.std(ddof=1) > LOG_SD_FLOOR and y.std(ddof=1) > LOG_SD_FLOOR
    expected = ttest_ind(x, y, equal_var=False, alternative="less").pvalue
    assert slower_p(values, leader) == pytest.approx(expected, rel=1e-9)
    assert slower_p(leader, values) == pytest.approx(1 - expected, rel=1e-9)   # the other side


def test_below_the_floor_slower_p_is_more_cautious_than_scipy():
    """Repeats that agree to 0.1% by chance: scipy calls a 1% gap significant; the floor does not."""
    import numpy as np
    from scipy.stats import ttest_ind

    from rlbench.results.stats import slower_p
    values, leader = [99.0, 99.1, 98.95], [100.0, 100.1, 99.95]
    assert ttest_ind(np.log(values), np.log(leader), equal_var=False, alternative="less").pvalue < 0.001
    assert slower_p(values, leader) > 0.2
    assert math.isnan(slower_p([1.0], leader)) and math.isnan(slower_p(values, [None, 2.0]))


def test_median_ci_is_the_seeded_percentile_bootstrap_of_the_median():
    import numpy as np
    from scipy.stats import bootstrap

    from rlbench.results.stats import median_ci
    values = [0.61, 0.70, 0.66, 0.72, 0.64, 0.69]
    median, low, high = median_ci(values)
    ref = bootstrap((np.asarray(values),), np.median, confidence_level=0.95, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(0)).confidence_interval
    assert median == pytest.approx(0.675) and (low, high) == pytest.approx((ref.low, ref.high))
    assert low <= median <= high and median_ci(values) == (median, low, high)     # seeded: the same each time
    assert median_ci([0.5, None, float("nan")])[0] == 0.5 and all(map(math.isnan, median_ci([0.5])[1:]))
    assert median_ci([0.4, 0.4, 0.4]) == (0.4, 0.4, 0.4) and all(map(math.isnan, median_ci([])))
