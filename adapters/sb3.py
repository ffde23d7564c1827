"""`sb3-dummy` and `sb3-subproc`: stable-baselines3's DummyVecEnv and SubprocVecEnv.

SB3 resets a finished env inside the same `step()` (the final observation goes to
info["terminal_observation"]), as `serial` does, so every adapter counts the same transitions.
`venv.seed(s)` stores seeds s, s+1, ... that the next `reset()` passes to env i, so env i starts
from `reset(seed=s + i)` like in `serial`.
"""

from rlbench.api import Adapter, Option, env_fns, make_policy, register


class SB3Session:
    def __init__(self, venv, workload, workers):
        self.venv = venv
        try:
            venv.seed(workload.seed)
            self.obs = venv.reset()
            # SB3 VecEnvs expose single-env spaces
            self.policy = make_policy(workload, venv.observation_space, venv.action_space)
        except BaseException:
            venv.close()
            raise
        self.info = {"workers": workers}

    def step(self) -> int:
        self.obs, _, _, _ = self.venv.step(self.policy(self.obs))
        return self.venv.num_envs

    def close(self):
        self.venv.close()



@register
class SB3Dummy(Adapter):
    name = "sb3-dummy"
    description = "stable_baselines3 DummyVecEnv: envs stepped in a loop, one process"
    requires = ("stable_baselines3",)

    def open(self, workload, options):
        from stable_baselines3.common.vec_env import DummyVecEnv
        return SB3Session(DummyVecEnv(env_fns(workload)), workload, workers=1)


@register
class SB3Subproc(Adapter):
    name = "sb3-subproc"
    description = "stable_baselines3 SubprocVecEnv: one subprocess per env, pipes"
    requires = ("stable_baselines3",)
    options = (
        Option("start_method", str, "fork", "multiprocessing start method (SB3's own default is forkserver)",
               ("fork", "forkserver", "spawn")),
    )

    def open(self, workload, options):
        from stable_baselines3.common.vec_env import SubprocVecEnv
        venv = SubprocVecEnv(env_fns(workload), start_method=options["start_method"])
        return SB3Session(venv, workload, workers=workload.num_envs)
