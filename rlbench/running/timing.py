"""The measurement protocol one cell process runs: warm up, then time units until both the
minimum duration and the minimum number of units are reached (or, with a stopping rule, until the rate is
stable). One clock read per unit: each latency is the time between consecutive unit ends, so the
latencies add up to exactly the measured seconds and nothing between units goes untimed.
"""
from time import perf_counter_ns

import numpy as np
import psutil

from rlbench.planning.plan import TimingProtocol
from rlbench.policy import PolicyClock
from rlbench.results.metrics import SESSION_METRICS
from rlbench.running import proctree

BLOCKS = 10          # a stopping rule judges the window by the rates of its ten consecutive blocks of units
CHECK_GROWTH = 1.25  # each stability check comes 25% later than the last: O(units) work in all


def measure(step, protocol: TimingProtocol, session_metrics=None, drain=None, warmed=None, reached=None) -> dict:
    """`session_metrics`, if given, has `reset()` (called as the timed window opens) and
    `read(seconds) -> dict` (called as it closes): figures only the session can see, such as
    optimiser updates or time in each stage, over exactly the timed window.

    `drain`, if given, waits until every unit a step dispatched has finished (an accelerator's queue):
    it runs before the window closes, inside the last unit, so work a step only enqueued is still timed.

    `warmed(units, seconds)`, if given, hears how the warm-up went, before the window opens.

    `reached()`, if given, says a training run reached its target return: the window closes after that unit
    (min_units permitting), as it would at duration_s."""
    warm_steps, warm_units, warm_ns = _warm_up(step, protocol, drain)
    if warmed is not None:
        warmed(warm_units, warm_ns / 1e9)
    unit_ns = max(warm_ns // max(warm_units, 1), 1)
    expected = int(protocol.duration_s * 1e9 / unit_ns * 2) if warm_units else 0
    capacity = min(max(protocol.min_units, expected), 1 << 20) + 16  # grows if ever full
    lat = np.empty(capacity, dtype=np.int64)
    duration_ns = int(protocol.duration_s * 1e9)
    stop = _StoppingRule(protocol) if protocol.stop_ci_width > 0 else None
    me = psutil.Process()
    cpu0 = proctree.cpu_seconds(me)
    PolicyClock.reset()
    if session_metrics is not None:
        session_metrics.reset()

    steps = units = 0
    t0 = last = perf_counter_ns()
    while True:
        steps += step()
        now = perf_counter_ns()
        closing = units + 1 >= protocol.min_units and (
            now - t0 >= duration_ns or (stop is not None and stop.stable(lat, units, now - t0))
            or (reached is not None and reached()))
        if closing and drain is not None:
            drain()  # the window is about to close: what is still queued belongs inside it
            now = perf_counter_ns()
        lat[units] = now - last
        last = now
        units += 1
        if closing:
            break
        if units == capacity:
            lat = np.concatenate([lat, np.empty(capacity, dtype=np.int64)])
            capacity *= 2

    seconds = (last - t0) / 1e9
    extra = session_metrics.read(seconds) if session_metrics is not None else {}
    unknown = set(extra) - set(SESSION_METRICS)
    if unknown:
        raise ValueError(f"session reported unknown metrics: {', '.join(sorted(unknown))} "
                         f"(valid: {', '.join(sorted(SESSION_METRICS))})")
    cpu = proctree.cpu_util(cpu0, proctree.cpu_seconds(me), seconds)
    lat_ms = lat[:units] / 1e6
    p50, p95, p99, p999 = np.percentile(lat_ms, [50, 95, 99, 99.9])
    policy_s = PolicyClock.ns / 1e9
    return {
        "env_steps": int(steps), "units": units, "seconds": seconds,
        "steps_per_s": steps / seconds, "units_per_s": units / seconds,
        "latency_p50_ms": float(p50), "latency_p95_ms": float(p95), "latency_p99_ms": float(p99),
        "latency_p999_ms": float(p999),
        "latency_max_ms": float(lat_ms.max()), "latency_mean_ms": float(lat_ms.mean()),
        "policy_s": policy_s if PolicyClock.calls else None,
        "env_s": seconds - policy_s if PolicyClock.calls else None,
        "cpu_util": cpu, "peak_rss_mb": proctree.peak_rss_mb(me),
        "warmup_units": warm_units, "warmup_steps": int(warm_steps),
        "window_ci_width": stop.width(lat, units) if stop is not None else None, **extra,
    }


class _StoppingRule:
    """Closes a window early once its rate is stable: the 95% CI of the median of its BLOCKS blocks' rates
    (consecutive units, equal counts; distribution-free order statistics) spans at most stop_ci_width of
    that median. Blocks, not single units, so drift and correlated stalls widen the interval."""

    def __init__(self, protocol: TimingProtocol):
        from rlbench.results.stats import median_ci_ranks  # scipy: imported here, before the window opens
        self.lo, self.hi = median_ci_ranks(BLOCKS)
        self.width_max = protocol.stop_ci_width
        self.next_ns = int(min(protocol.min_duration_s, protocol.duration_s) * 1e9)

    def width(self, lat: np.ndarray, units: int) -> float:
        """The CI's width as a share of the median block rate (None with fewer units than blocks)."""
        if units < BLOCKS:
            return None
        edges = np.linspace(0, units, BLOCKS + 1).astype(np.int64)
        rates = np.sort(np.diff(edges) / np.add.reduceat(lat[:units], edges[:-1]))
        return float((rates[self.hi] - rates[self.lo]) / np.median(rates))

    def stable(self, lat: np.ndarray, units: int, elapsed_ns: int) -> bool:
        if elapsed_ns < self.next_ns:
            return False
        self.next_ns = max(int(elapsed_ns * CHECK_GROWTH), 1)
        width = self.width(lat, units)
        return width is not None and width <= self.width_max


def _warm_up(step, protocol, drain=None):
    steps = units = 0
    t0 = now = perf_counter_ns()
    end = t0 + int(protocol.warmup_s * 1e9)
    while units < protocol.warmup_units or now < end:
        n = step()
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise TypeError(f"session.step() must return the env steps it made (an int >= 0), got {n!r}")
        steps += n
        units += 1
        now = perf_counter_ns()
    if drain is not None:  # nothing of the warm-up may still run inside the timed window
        drain()
        now = perf_counter_ns()
    return steps, units, now - t0
