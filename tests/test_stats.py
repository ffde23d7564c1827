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
