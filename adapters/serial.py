"""`serial`: gymnasium envs stepped one after another in a Python for-loop (EnvPool's baseline)."""
import numpy as np

from rlbench.api import Adapter, env_call, make_env, make_policy, register


class SerialSession:
    """Observations batched as gymnasium's vector envs batch them (a dict of arrays for Dict spaces), so
    any observation space runs; the batch is written in place, with no per-step allocation."""

    def __init__(self, workload):
        from gymnasium.vector.utils import concatenate, create_empty_array
        self.envs = [make_env(workload.env_id, **workload.env_kwargs) for _ in range(workload.num_envs)]
        first = self.envs[0]
        self.space, self.concatenate = first.observation_space, concatenate
        self.obs = create_empty_array(self.space, len(self.envs))
        self.obs = concatenate(self.space, [env.reset(seed=workload.seed + i)[0] for i, env in enumerate(self.envs)],
                               self.obs)
        self.policy = make_policy(workload, first.observation_space, first.action_space)
        # a recurrent policy's mask of observations that start an episode (reset ones), else None
        self.starts = np.ones(len(self.envs), dtype=np.bool_) if self.policy.recurrent else None
        self.info = {"workers": 1}

    def step(self) -> int:
        starts = self.starts
        if starts is None:
            actions = self.policy(self.obs)
        else:
            actions = self.policy(self.obs, starts)
            starts[:] = False
        batch = []
        for i, env in enumerate(self.envs):
            obs, _, terminated, truncated, _ = env.step(actions[i])
            if terminated or truncated:
                obs, _ = env.reset()
                if starts is not None:
                    starts[i] = True
            batch.append(obs)
        self.obs = self.concatenate(self.space, batch, self.obs)
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

    def snippet(self, workload, options):
        return f"envs = [{env_call(workload)} for _ in range({workload.num_envs})]  # stepped in a for loop"
