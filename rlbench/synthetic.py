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

    def __init__(self, step_cost_us: float = 0.0, obs_bytes: int = 64, episode_len: int = 1000):
        if step_cost_us < 0 or obs_bytes < 1 or episode_len < 1:
            raise ValueError(f"bad Synthetic-v0 arguments: step_cost_us={step_cost_us} "
                             f"obs_bytes={obs_bytes} episode_len={episode_len}")
        self.step_cost_us = float(step_cost_us)
        self.episode_len = int(episode_len)
        self.observation_space = gym.spaces.Box(0, 255, shape=(int(obs_bytes),), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._obs = np.zeros(int(obs_bytes), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._obs[:] = 0
        return self._obs.copy(), {}

    def step(self, action):
        busy_wait_us(self.step_cost_us)
        self._t += 1
        self._obs[self._t % self._obs.size] = self._t & 0xFF
        truncated = self._t >= self.episode_len
        return self._obs.copy(), float(action), False, truncated, {}


def register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=SyntheticEnv)


register()
