"""`rlbench/Synthetic-v0`: an env whose step cost and observation size are knobs.

It shows where inter-process overhead stops mattering (openai/baselines#608): with a cheap step,
subprocess vector envs lose to a plain loop; with an expensive one they win.
"""
import gymnasium as gym
import numpy as np

from rlbench.busy import busy_wait_us

ENV_ID = "rlbench/Synthetic-v0"


class SyntheticEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, step_cost_us: float = 0.0, obs_bytes: int = 64, episode_len: int = 1000,
                 straggler_p: float = 0.0, straggler_x: float = 10.0):
        if step_cost_us < 0 or obs_bytes < 1 or episode_len < 1 or not 0 <= straggler_p <= 1 or straggler_x < 1:
            raise ValueError(f"bad Synthetic-v0 arguments: step_cost_us={step_cost_us} "
                             f"obs_bytes={obs_bytes} episode_len={episode_len} straggler_p={straggler_p} "
                             f"straggler_x={straggler_x}")
        self.step_cost_us = float(step_cost_us)
        # stragglers: with probability straggler_p a step costs straggler_x times as much (steps of highly
        # variable length, where synchronous vector envs wait for the slowest and async ones do not)
        self.straggler_p, self.straggler_x = float(straggler_p), float(straggler_x)
        self._rng = np.random.default_rng(0)
        self.episode_len = int(episode_len)
        self.observation_space = gym.spaces.Box(0, 255, shape=(int(obs_bytes),), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._obs = np.zeros(int(obs_bytes), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._obs = np.zeros(self._obs.size, dtype=np.uint8)  # not in place: a copy shipped to a Ray actor is read-only
        return self._obs.copy(), {}

    def step(self, action):
        if self.straggler_p and self._rng.random() < self.straggler_p:
            busy_wait_us(self.step_cost_us * self.straggler_x)
        else:
            busy_wait_us(self.step_cost_us)
        self._t += 1
        self._obs[self._t % self._obs.size] = self._t & 0xFF
        truncated = self._t >= self.episode_len
        return self._obs.copy(), float(action), False, truncated, {}


def register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=SyntheticEnv)


register()
