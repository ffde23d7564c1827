"""rlbench.running.timing: the warm-up and timed loop, with fake step functions (and a fake clock where the
exact numbers matter)."""
from dataclasses import replace

import numpy as np
import pytest

from rlbench import policy as policy_mod
from rlbench.planning.plan import TimingProtocol
from rlbench.policy import TimedPolicy
from rlbench.running import timing as measure_mod
from rlbench.running.timing import measure


class FakeClock:
    """perf_counter_ns that only moves when a step says so."""

    def __init__(self):
        self.ns = 1_000_000_000

    def __call__(self):
        return self.ns


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(measure_mod, "perf_counter_ns", fake)
    return fake


def test_exact_accounting_with_a_fake_clock(clock):
    costs = iter([3, 3] + [1, 2, 3, 4] * 100)   # warm-up units, then ms per unit

    def step():
        clock.ns += next(costs) * 1_000_000
        return 8

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=2, duration_s=0.02, min_units=3))
    # 1+2+3+4+1+2+3+4 = 20 ms: the duration is reached after 8 units
    assert r["warmup_units"] == 2 and r["warmup_steps"] == 16
    assert r["units"] == 8
    assert r["env_steps"] == 64
    assert r["seconds"] == pytest.approx(0.020)
    assert r["steps_per_s"] == pytest.approx(64 / 0.020)
    assert r["units_per_s"] == pytest.approx(8 / 0.020)
    assert r["latency_mean_ms"] * r["units"] == pytest.approx(r["seconds"] * 1000)  # nothing untimed
    assert r["latency_max_ms"] == 4.0
    assert r["latency_p50_ms"] == 2.5
    assert r["latency_p99_ms"] == pytest.approx(np.percentile([1, 2, 3, 4] * 2, 99))


def test_min_units_beats_duration(clock):
    def step():
        clock.ns += 50_000_000  # 50 ms per unit
        return 1

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.01, min_units=7))
    assert r["units"] == 7 and r["env_steps"] == 7
    assert r["seconds"] == pytest.approx(0.35)


def test_latency_buffer_grows_past_its_estimate(clock):
    costs = iter([1_000_000] + [1_000] * 100_000)  # the warm-up unit is 1000x slower than the rest

    def step():
        clock.ns += next(costs)
        return 1

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.05, min_units=1))
    assert r["units"] == 50_000
    assert r["latency_mean_ms"] * r["units"] == pytest.approx(r["seconds"] * 1000)


def test_real_clock_meets_both_minimums():
    counts = [0]

    def step():
        counts[0] += 1
        return 3

    r = measure(step, TimingProtocol(warmup_s=0.01, warmup_units=5, duration_s=0.02, min_units=50))
    assert r["units"] >= 50
    assert r["seconds"] >= 0.02
    assert r["warmup_units"] >= 5
    assert r["env_steps"] == 3 * r["units"]
    assert counts[0] == r["units"] + r["warmup_units"]
    assert r["latency_mean_ms"] * r["units"] == pytest.approx(r["seconds"] * 1000, rel=1e-9)
    assert r["latency_p50_ms"] <= r["latency_p95_ms"] <= r["latency_p99_ms"] <= r["latency_max_ms"]


def test_env_steps_is_the_sum_of_what_step_returns():
    counts = iter(range(10**6))
    returned = []

    def step():
        n = next(counts) % 5
        returned.append(n)
        return np.int64(n) if n % 2 else n   # numpy ints count too

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=3, duration_s=0.01, min_units=20))
    assert r["warmup_units"] == 3
    assert r["warmup_steps"] == sum(returned[:3])
    assert r["env_steps"] == sum(returned[3:])
    assert isinstance(r["env_steps"], int)


@pytest.mark.parametrize("bad", [1.0, "4", None, -1, [4]])
def test_step_must_return_a_count(bad):
    with pytest.raises(TypeError, match="must return the env steps"):
        measure(lambda: bad, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.01, min_units=1))


def test_policy_time_is_split_out(clock, monkeypatch):
    monkeypatch.setattr(policy_mod, "perf_counter_ns", clock)

    def slow_policy(obs):
        clock.ns += 1_000_000
        return obs

    policy = TimedPolicy(slow_policy)

    def step():
        policy([0, 0])
        clock.ns += 3_000_000
        return 2

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.04, min_units=1))
    assert r["units"] == 10 and r["seconds"] == pytest.approx(0.04)
    assert r["policy_s"] == pytest.approx(0.01)   # 1 ms of every 4 ms, warm-up excluded
    assert r["env_s"] == pytest.approx(0.03)


def test_no_policy_calls_means_no_split():
    r = measure(lambda: 1, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.001, min_units=1))
    assert r["policy_s"] is None and r["env_s"] is None


class _Counted:
    """Session metrics as a runner would keep them: a counter read over the timed window only."""

    def __init__(self, names=("updates_per_s",)):
        self.updates, self.names, self.resets = 0, names, 0

    def step(self):
        self.updates += 1
        return 4

    def reset(self):
        self.resets += 1
        self.mark = self.updates

    def read(self, seconds):
        return {name: (self.updates - self.mark) / seconds for name in self.names}


def test_session_metrics_cover_the_timed_window_only():
    session = _Counted()
    r = measure(session.step, TimingProtocol(warmup_s=0.0, warmup_units=7, duration_s=0.01, min_units=5), session)
    assert session.resets == 1 and session.updates == 7 + r["units"]
    assert r["updates_per_s"] == pytest.approx(r["units"] / r["seconds"])


def test_unknown_session_metrics_are_refused_with_the_valid_names():
    session = _Counted(names=("updates_per_second",))
    with pytest.raises(ValueError, match=r"unknown metrics: updates_per_second \(valid: .*\bupdates_per_s\b"):
        measure(session.step, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.001, min_units=1), session)


def test_drain_puts_work_a_step_only_dispatched_inside_the_window(clock):
    """An accelerator step returns once its work is queued; without a final wait the window would
    close with the queue still full and the rate would be dispatch speed."""
    queued = []

    def step():               # enqueue 10 ms of work, return after 1 us of dispatch
        queued.append(10_000_000)
        clock.ns += 1_000
        return 1

    def drain():              # block_until_ready: the queue's work happens now
        clock.ns += sum(queued)
        queued.clear()

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.0, min_units=4), drain=drain)
    assert r["units"] == 4 and r["seconds"] == pytest.approx(0.040004)  # the warm-up's unit drained before
    undrained = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.0, min_units=4))
    assert undrained["seconds"] == pytest.approx(4e-6)  # dispatch speed: 10,000x too fast


def _unit_ms(clock, unit_ms, drift=0.0):
    """A step of unit_ms per unit (warm-up included), each unit `drift` of unit_ms slower than the last."""
    count = [0]

    def step():
        clock.ns += int(unit_ms * (1 + drift * count[0]) * 1e6)
        count[0] += 1
        return 1
    return step


def test_a_stable_rate_closes_the_window_at_its_minimum(clock):
    stop = TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=2.0, min_units=5, stop_ci_width=0.02,
                          min_duration_s=0.2)
    r = measure(_unit_ms(clock, 1.0), stop)
    assert r["seconds"] == pytest.approx(0.2, abs=0.002) and r["units"] == 200
    assert r["window_ci_width"] == pytest.approx(0.0)
    fixed = measure(_unit_ms(clock, 1.0), replace(stop, stop_ci_width=0.0))
    assert fixed["seconds"] == pytest.approx(2.0, abs=0.002) and fixed["window_ci_width"] is None


def test_an_unstable_rate_runs_to_the_longest_window(clock):
    """A rate that drifts (each unit 1% slower): its blocks' rates differ, the window is not cut short."""
    stop = TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=1.0, min_units=5, stop_ci_width=0.02,
                          min_duration_s=0.1)
    r = measure(_unit_ms(clock, 1.0, drift=0.01), stop)
    assert r["seconds"] >= 1.0 and r["window_ci_width"] > 0.02


def test_the_stopping_rule_needs_min_units_and_drains_before_it_closes(clock):
    queued = []

    def step():
        queued.append(1_000_000)
        clock.ns += 1_000_000
        return 1

    def drain():
        clock.ns += sum(queued)
        queued.clear()

    stop = TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=5.0, min_units=400, stop_ci_width=0.5,
                          min_duration_s=0.01)
    r = measure(step, stop, drain=drain)
    # min_units first, then the rule (not the 5 s); the 400 queued ms drained inside the last unit
    assert r["units"] == 400 and r["seconds"] == pytest.approx(0.4 + 0.4)
    assert not queued


def test_min_duration_longer_than_duration_is_capped_by_it(clock):
    stop = TimingProtocol(warmup_s=0.0, warmup_units=1, duration_s=0.05, min_units=5, stop_ci_width=0.02,
                          min_duration_s=9.0)
    r = measure(_unit_ms(clock, 1.0), stop)
    assert r["seconds"] == pytest.approx(0.05, abs=0.002)


def test_warmed_hears_the_warm_up_before_the_window_opens(clock):
    """What a timeout's reason tells (rlbench.running.runner.stood_at): the warm-up's units and seconds, heard
    before the first timed unit."""
    heard, steps_then = [], []
    calls = []

    def step():
        calls.append(1)
        clock.ns += 5_000_000
        return 1

    def warmed(units, seconds):
        heard.append((units, seconds))
        steps_then.append(len(calls))

    r = measure(step, TimingProtocol(warmup_s=0.0, warmup_units=3, duration_s=0.0, min_units=2), warmed=warmed)
    assert heard == [(3, pytest.approx(0.015))] and steps_then == [3]
    assert r["units"] == 2 and r["warmup_units"] == 3


def test_a_timeout_says_where_the_cell_stood_and_what_would_let_it_finish():
    from rlbench.planning.plan import Settings
    from rlbench.running.runner import stood_at
    settings = Settings(warmup_units=2, duration_s=1.0, min_units=10)
    start, opened = {"event": "start", "pid": 1}, {"event": "opened", "setup_s": 3.87}
    warmed = {"event": "warmed", "units": 2, "seconds": 16.6}
    assert stood_at([], settings) == "; the cell's interpreter had not started"
    assert stood_at([start], settings) == ("; the adapter was still opening its session (building envs, starting "
                                           "workers, compiling)")
    assert stood_at([start, opened], settings) == (
        "; the session opened in 3.87 s, then the warm-up (2 unit(s)) did not finish; --timeout longer, or fewer "
        "env steps a unit (the adapter's options)")
    assert stood_at([start, opened, warmed], settings) == (
        "; warm-up: 2 unit(s) in 16.6 s (8.3 s a unit), then the timed window (at least 10 units and 1 s: ~83 s) "
        "did not close; --timeout longer, or fewer env steps a unit (the adapter's options)")
