"""`gymnasium-sync` and `gymnasium-async`: gymnasium's own SyncVectorEnv and AsyncVectorEnv.

Both reset a finished env within the same step (AutoresetMode.SAME_STEP), as `serial` does, so
every adapter counts the same transitions.
"""

from rlbench.api import Adapter, Option, env_call, env_fns, make_policy, register


class VectorSession:
    def __init__(self, envs, workload, workers):
        self.envs = envs
        self.obs, _ = envs.reset(seed=workload.seed)
        self.policy = make_policy(workload, envs.single_observation_space, envs.single_action_space)
        self.info = {"workers": workers}

    def step(self) -> int:
        self.obs, _, _, _, _ = self.envs.step(self.policy(self.obs))
        return self.envs.num_envs

    def close(self):
        self.envs.close()



@register
class GymnasiumSync(Adapter):
    name = "gymnasium-sync"
    description = "gymnasium.vector.SyncVectorEnv: all envs in this process"
    requires = ("gymnasium",)

    def open(self, workload, options):
        import gymnasium as gym
        envs = gym.vector.SyncVectorEnv(env_fns(workload), autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        return VectorSession(envs, workload, workers=1)

    def snippet(self, workload, options):
        return (f"gymnasium.vector.SyncVectorEnv([lambda: {env_call(workload)}] * {workload.num_envs}, "
                "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)")


@register
class GymnasiumAsync(Adapter):
    name = "gymnasium-async"
    description = "gymnasium.vector.AsyncVectorEnv: one subprocess per env, pipes or shared memory"
    requires = ("gymnasium",)
    options = (
        Option("shared_memory", bool, True, "observations through shared memory instead of pipes"),
        Option("context", str, "fork", "multiprocessing start method", ("fork", "forkserver", "spawn")),
    )

    def open(self, workload, options):
        import gymnasium as gym
        envs = gym.vector.AsyncVectorEnv(
            env_fns(workload), shared_memory=options["shared_memory"], context=options["context"],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        return VectorSession(envs, workload, workers=workload.num_envs)

    def tune_space(self, num_envs, cpus):
        """Pipes against shared memory: which wins depends on the observation's size."""
        return [{}, {"shared_memory": False}] if num_envs > 1 else [{}]

    def snippet(self, workload, options):
        return (f"gymnasium.vector.AsyncVectorEnv([lambda: {env_call(workload)}] * {workload.num_envs}, "
                f"shared_memory={options['shared_memory']}, context={options['context']!r}, "
                "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)")
