"""What a user writes to bring crafter (the old gym API: reset() -> obs, step() -> a 4-tuple) to gymnasium:
`--env crafter_gym:make_env`. Crafter reseeds each episode from its seed and episode count, so a seeded reset
gives the same episodes in every process."""
import crafter
import gymnasium as gym
import numpy as np


class CrafterGym(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, **kw):
        self._env = crafter.Env(**kw)
        self.observation_space = gym.spaces.Box(0, 255, self._env.observation_space.shape, np.uint8)
        self.action_space = gym.spaces.Discrete(self._env.action_space.n)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._env._seed = int(seed)
        return self._env.reset(), {}

    def step(self, action):
        obs, reward, done, info = self._env.step(int(action))
        truncated = bool(done and info.get("discount", 1.0) == 1.0)
        return obs, float(reward), bool(done and not truncated), truncated, info


def make_env(**kw):
    return CrafterGym(**kw)
