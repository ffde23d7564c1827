"""`sb3-dummy` and `sb3-subproc`: stable-baselines3's DummyVecEnv and SubprocVecEnv; `sb3-replay`: its
ReplayBuffer on the replay workloads (kind replay).

SB3 resets a finished env inside the same `step()` (the final observation goes to
info["terminal_observation"]), as `serial` does, so every adapter counts the same transitions.
`venv.seed(s)` stores seeds s, s+1, ... that the next `reset()` passes to env i, so env i starts
from `reset(seed=s + i)` like in `serial`.
"""

import numpy as np

from rlbench.api import Adapter, Option, ReplaySession, env_fns, in_process_only, make_policy, register, replay_spec
from rlbench.replay import PREFIX, WORKLOADS


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


class SB3Replay:
    """stable-baselines3's ReplayBuffer as its off-policy algorithms drive it: one `add(obs, next_obs,
    action, reward, done, infos)` per transition, `sample(batch_size)` -> ReplayBufferSamples of torch
    tensors. The observation space is Box(0, 255, (item_bytes,), uint8): an item is one observation.

    SB3 always returns next_observations beside observations and the learner gets both, so both are
    consumed: SB3 delivers 2x the bytes per sampled item (the rates count items, and item_bytes per
    item). Each is gathered from the buffer by fancy indexing, then copied again into a new tensor
    (`to_torch` copies), so a sample costs four copies of item_bytes per item. Each add copies the
    observation twice (`np.array(obs)`, then into the buffer) and next_obs twice more.

    The driver hands over one item per add, not the transition's next observation, so next_obs is the
    item itself. With optimize_memory_usage, next_obs goes to the following slot, which the next add
    overwrites with its obs, so a sampled next_observation is the following item, as in a real run;
    that scheme leaves the slot at `pos` unsampleable, so the buffer gets one slot more than the
    capacity and samples from exactly `capacity` items. Without it next_obs has its own array: twice
    the memory. Sampling is uniform (np.random, SB3's global generator) for uniform and reuse
    workloads; SB3 has no prioritized buffer."""
    bound = "memcpy_1core"

    def __init__(self, spec, optimize_memory_usage: bool):
        from gymnasium import spaces
        from stable_baselines3.common.buffers import ReplayBuffer
        obs_space = spaces.Box(0, 255, (spec.item_bytes,), np.uint8)
        self.buffer = ReplayBuffer(spec.capacity + int(optimize_memory_usage), obs_space, spaces.Discrete(2),
                                   device="cpu", n_envs=1, optimize_memory_usage=optimize_memory_usage,
                                   # SB3 refuses both together; its default (True) otherwise
                                   handle_timeout_termination=not optimize_memory_usage)
        self.action = np.zeros((1, 1), dtype=np.int64)    # what a VecEnv step hands over, n_envs=1
        self.reward = np.zeros(1, dtype=np.float32)
        self.done = np.zeros(1, dtype=bool)
        self.infos = [{}]

    def add(self, item) -> None:
        obs = item[None]   # [n_envs=1, item_bytes], as from a VecEnv
        self.buffer.add(obs, obs, self.action, self.reward, self.done, self.infos)

    def sample(self, n: int):
        s = self.buffer.sample(n)
        # numpy views of the CPU tensors (no copy); the indices SB3 drew are not returned by its API
        return [s.observations.numpy(), s.next_observations.numpy()], None

    def close(self) -> None:
        self.buffer = None


@register
class SB3ReplayBuffer(Adapter):
    name = "sb3-replay"
    kind = "replay"
    description = "stable_baselines3 ReplayBuffer (uniform only): one add per transition, samples as torch tensors"
    requires = ("stable_baselines3",)
    options = (
        Option("optimize_memory_usage", bool, True,
               "obs and next_obs share one array (False: a second array, twice the memory)"),
    )

    def supports(self, workload, options):
        w = WORKLOADS.get(workload.env_id[len(PREFIX):])
        if w is not None and w.sampling == "prioritized":
            return "stable-baselines3 has no prioritized replay buffer"
        return in_process_only(workload)

    def open(self, workload, options):
        spec = replay_spec(workload)
        return ReplaySession(SB3Replay(spec, options["optimize_memory_usage"]), spec)
