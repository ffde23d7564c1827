"""What the learners report beside their rates: the returns of the episodes their actors finish
(kept in rings that may live in shared memory) and the policy lag of the batches they train on.
"""
import math
from time import perf_counter

import numpy as np

RETURN_WINDOW = 100  # return_mean: the mean return of about the last this many finished episodes


class TargetRun:
    """A training session's run toward its target return: when and after how many env steps it first reached it
    (time_to_target, steps_to_target), the return it started from (return_first: the first mean return seen,
    after the first unit with a finished episode), and `reached()`, which closes the timed window of a run under
    the protocol's until_target (`rlbench tune --train` races time to a return)."""
    time_to_target = steps_to_target = return_first = None

    def reached(self) -> bool:
        return self.time_to_target is not None

    def progress(self, mean, steps: int) -> None:
        """After a unit: the mean return now (None or nan before an episode ended) and the env steps so far. Keeps
        the first return seen, and the time (from self.t_start) and steps at which the mean first reached
        self.target."""
        self.started_at(mean)
        if self.time_to_target is None and mean is not None and mean >= self.target:
            self.time_to_target = perf_counter() - self.t_start
            self.steps_to_target = steps

    def started_at(self, mean) -> None:
        """The first finite mean return seen is where training started from."""
        if self.return_first is None and mean is not None and math.isfinite(mean):
            self.return_first = float(mean)


class Episodes:
    """Running return of each env; a finished episode's return goes into `ring` (the last ring.size
    episodes) and `count` ([1] int64: episodes finished so far). Both may be shared memory that only
    this process writes."""

    def __init__(self, num_envs: int, ring: np.ndarray, count: np.ndarray):
        self.ret = np.zeros(num_envs, dtype=np.float64)
        self.ring, self.count = ring, count

    def add(self, rewards: np.ndarray, dones: np.ndarray):
        """rewards, dones: [T, B] or [B]."""
        for rew, done in zip(np.atleast_2d(rewards), np.atleast_2d(dones)):
            self.ret += rew
            if done.any():
                for r in self.ret[done]:
                    self.ring[int(self.count[0]) % self.ring.size] = r
                    self.count[0] += 1
                self.ret[done] = 0.0


def return_mean(rings: np.ndarray, counts: np.ndarray) -> float:
    """Mean return over every ring's stored episodes ([rings, size], [rings]); nan before any ended."""
    held = [ring[:min(int(c), ring.size)] for ring, c in zip(rings, counts)]
    total = sum(len(h) for h in held)
    return float(sum(h.sum() for h in held) / total) if total else float("nan")


def lag_stats(hist: np.ndarray) -> dict:
    """policy_lag_mean / _max of a histogram [batches at lag 0, lag 1, ...] (nan when empty)."""
    n = hist.sum()
    if not n:
        return {"policy_lag_mean": float("nan"), "policy_lag_max": float("nan")}
    lags = np.arange(hist.size)
    return {"policy_lag_mean": float((hist * lags).sum() / n), "policy_lag_max": float(lags[hist > 0].max())}


def trimmed(hist: np.ndarray) -> list:
    """The histogram as a list without trailing empty bins (info["policy_lag_hist"])."""
    nz = np.flatnonzero(hist)
    return [int(h) for h in hist[:nz[-1] + 1]] if nz.size else []
