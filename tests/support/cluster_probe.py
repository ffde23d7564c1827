"""A gymnasium env that writes down, from inside the cell process that built it, which cores that process
may run on and when it opened and closed: what the cluster tests check the placement against."""
import json
import os
import time

import gymnasium as gym
import numpy as np


class ProbeEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, log_dir: str = "", step_us: float = 50.0):
        self.log_dir, self.step_s = log_dir, step_us / 1e6
        self._write("open")

    def _write(self, event: str) -> None:
        if self.log_dir and "RLBENCH_HARNESS_PID" in os.environ:  # built in a cell, not while planning
            record = {"event": event, "pid": os.getpid(), "t": time.time(), "cpus": sorted(os.sched_getaffinity(0))}
            with open(os.path.join(self.log_dir, f"{os.getpid()}-{id(self)}.jsonl"), "a") as f:
                f.write(json.dumps(record) + "\n")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        end = time.perf_counter() + self.step_s
        while time.perf_counter() < end:
            pass
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def close(self):
        self._write("close")


def make_probe(log_dir: str = "", step_us: float = 50.0):
    return ProbeEnv(log_dir, float(step_us))
