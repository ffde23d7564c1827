"""`serial`: gymnasium envs stepped one after another in a Python for-loop (EnvPool's baseline)."""
import numpy as np

from rlbench.api import Adapter, make_env, make_policy, register


class SerialSession:
    def __init__(self, workload):
        self.envs = [make_env(workload.env_id, **workload.env_kwargs) for _ in range(workload.num_envs)]
        first = self.envs[0]
        self.obs = np.stack([env.reset(seed=workload.seed + i)[0] for i, env in enumerate(self.envs)])
        self.policy = make_policy(workload, first.observation_space, first.action_space)
        self.info = {"workers": 1}

    def step(self) -> int:
        actions = self.policy(self.obs)
        for i, env in enumerate(self.envs):
            obs, _, terminated, truncated, _ = env.step(actions[i])
            if terminated or truncated:
                obs, _ = env.reset()
            self.obs[i] = obs
        return len(self.envs)

    def close(self):
        for env in self.envs:
            env.close()


@register
class Serial(Adapter):
    name = "serial"
    description = "num_envs gymnasium envs stepped in a plain Python loop, one process"
    requires = ("gymnasium",)

    def open(self, workload, options):
        return SerialSession(workload)
