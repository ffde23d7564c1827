"""rlbench.stats on samples whose statistics are worked out by hand."""
import math

import pytest

from rlbench.stats import CV_WARN, MIN_N, median_ci_ranks, summarize, t975

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
    # ln 10, ln 12, ln 14: mean 2.4755164, sd 0.1684326; half width 4.303 * 0.1684326 / sqrt(3) = 0.4184434
    s = summarize([10.0, 12.0, 14.0])
    assert s.ci_method == "student-t-log"
    assert s.ci_low == pytest.approx(7.823038, abs=1e-5)    # exp(2.4755164 - 0.4184434)
    assert s.ci_high == pytest.approx(18.064700, abs=1e-5)  # exp(2.4755164 + 0.4184434)
    assert s.ci_low < s.median < s.ci_high


def test_student_t_interval_when_a_value_is_not_positive():
    # mean 2, sd 2, df 2: 2 +- 4.303 * 2 / sqrt(3) = 2 +- 4.9686764
    s = summarize([0.0, 2.0, 4.0])
    assert s.ci_method == "student-t"
    assert s.ci_low == pytest.approx(-2.968676, abs=1e-5)
    assert s.ci_high == pytest.approx(6.968676, abs=1e-5)


def test_even_count_median_and_quartiles():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s.median == 2.5
    assert (s.q1, s.q3, s.iqr) == pytest.approx((1.75, 3.25, 1.5))


def test_t_quantiles():
    assert t975(1) == 12.706
    assert t975(2) == 4.303
    assert t975(30) == 2.042
    assert t975(1000) == 1.96


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
