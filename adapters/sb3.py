"""`sb3-dummy` and `sb3-subproc`: stable-baselines3's DummyVecEnv and SubprocVecEnv; `sb3-replay`: its ReplayBuffer
on the replay workloads (kind replay); `sb3-ppo`: its PPO trained on DummyVecEnv, SubprocVecEnv or EnvPool
(kind learner). Resets and seeds give `serial`'s transitions: docs/strategies/stepping.md,
"How the SB3 adapters are built".

sb3-ppo trains SB3's own networks: MlpPolicy on vectors, CnnPolicy on an image, and on a Dict (a screen beside game
variables) MultiInputPolicy, whose CombinedExtractor puts a NatureCNN on each image part and flattens the others;
SB3 keeps every part in its own dtype in its rollout buffer. SB3 has no Tuple observations.
"""

import math
import os
from time import perf_counter, perf_counter_ns

import numpy as np

from adapters._kit.batch import ARRAY_SPACES, DYNAMIC_SPACES
from adapters._kit.learner_stats import TargetRun
from adapters._kit.ppo import (
    CLIP_COEF,
    COLLECTORS,
    ENT_COEF,
    LEARNER_OPTIONS,
    MAX_GRAD_NORM,
    VF_COEF,
    default_target,
    learner_supports,
    vec_space,
)
from rlbench.api import (
    Adapter,
    Option,
    Unsupported,
    env_call,
    env_fns,
    env_info,
    envpool_kwargs,
    make_policy,
    register,
    unsupported_leaves,
)
from rlbench.families.replay.api import PREFIX, WORKLOADS, ReplaySession, in_process_only, no_reuse_bound, replay_spec


class SB3Session:
    def __init__(self, venv, workload, workers):
        self.venv = venv
        try:
            venv.seed(workload.seed)
            self.obs = venv.reset()
            # SB3 VecEnvs expose single-env spaces
            self.policy = make_policy(workload, venv.observation_space, venv.action_space)
            self.starts, self.recurrent = None, self.policy.recurrent
        except BaseException:
            venv.close()
            raise
        self.info = {"workers": workers}

    def step(self) -> int:
        if self.recurrent:  # SB3's VecEnvs reset a done env within the step: its obs starts an episode
            self.obs, _, self.starts, _ = self.venv.step(self.policy(self.obs, self.starts))
        else:
            self.obs, _, _, _ = self.venv.step(self.policy(self.obs))
        return self.venv.num_envs

    def close(self):
        self.venv.close()



@register
class SB3Dummy(Adapter):
    name = "sb3-dummy"
    description = "stable_baselines3 DummyVecEnv: envs stepped in a loop, one process"
    requires = ("stable_baselines3",)

    def supports(self, workload, options):
        """DummyVecEnv keeps one preallocated numpy buffer per observation part (obs_space_info)."""
        return unsupported_leaves(workload, self.name, carries=ARRAY_SPACES)

    def open(self, workload, options):
        from stable_baselines3.common.vec_env import DummyVecEnv
        return SB3Session(DummyVecEnv(env_fns(workload)), workload, workers=1)

    def snippet(self, workload, options):
        return (f"stable_baselines3.common.vec_env.DummyVecEnv([lambda: {env_call(workload)}] * "
                f"{workload.num_envs})")


@register
class SB3Subproc(Adapter):
    name = "sb3-subproc"
    description = "stable_baselines3 SubprocVecEnv: one subprocess per env, pipes"
    requires = ("stable_baselines3",)
    options = (
        Option("start_method", str, "fork", "multiprocessing start method (SB3's own default is forkserver)",
               ("fork", "forkserver", "spawn")),
    )

    def supports(self, workload, options):
        """SubprocVecEnv stacks the workers' observations part by part with np.stack: shapes must not vary."""
        return unsupported_leaves(workload, self.name, refuses=DYNAMIC_SPACES)

    def open(self, workload, options):
        from stable_baselines3.common.vec_env import SubprocVecEnv
        venv = SubprocVecEnv(env_fns(workload), start_method=options["start_method"])
        return SB3Session(venv, workload, workers=workload.num_envs)

    def snippet(self, workload, options):
        return (f"stable_baselines3.common.vec_env.SubprocVecEnv([lambda: {env_call(workload)}] * "
                f"{workload.num_envs}, start_method={options['start_method']!r})")


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
        return in_process_only(workload) or no_reuse_bound(workload, "stable-baselines3's ReplayBuffer")

    def open(self, workload, options):
        spec = replay_spec(workload)
        return ReplaySession(SB3Replay(spec, options["optimize_memory_usage"]), spec)


# -- sb3-ppo: stable-baselines3's PPO on a chosen vector env ------------------------------------------------

def _sb3_vec_classes():
    """SB3 VecEnv classes, built once SB3 is imported: EnvPool as an SB3 VecEnv, a timing wrapper, and
    Atari's reward clipping."""
    from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

    class EnvPoolVecEnv(VecEnv):
        """EnvPool (synchronous, batch_size = num_envs) as an SB3 VecEnv, after EnvPool's own SB3 example
        (examples/sb3_examples/ppo.py): SB3 wants a finished env reset inside the step that finished it
        (the final observation in info["terminal_observation"]), so the finished envs are reset right away
        with `reset(env_ids)`; EnvPool's own next-step reset then never happens, and every step is a
        transition."""

        def __init__(self, workload, num_threads):
            import envpool
            self.env = envpool.make(workload.env_id, env_type="gymnasium", num_envs=workload.num_envs,
                                    batch_size=workload.num_envs, num_threads=num_threads, seed=workload.seed,
                                    **envpool_kwargs(workload.env_id), **workload.env_kwargs)
            super().__init__(workload.num_envs, self.env.observation_space, self.env.action_space)
            self.all_ids = np.arange(self.num_envs)

        def _ordered(self, x, info):
            ids = info["env_id"]
            if np.array_equal(ids, self.all_ids[:len(ids)]):
                return x
            out = np.empty_like(x)
            out[ids] = x
            return out

        def reset(self):
            obs, info = self.env.reset()   # seeded once, in envpool.make
            self.reset_infos = [{} for _ in range(self.num_envs)]
            return self._ordered(obs, info)

        def step_async(self, actions):
            self.actions = np.asarray(actions, dtype=np.int32)

        def step_wait(self):
            obs, reward, terminated, truncated, info = self.env.step(self.actions)
            obs, reward, terminated, truncated = (self._ordered(x, info) for x in (obs, reward, terminated, truncated))
            dones = terminated | truncated
            infos = [{} for _ in range(self.num_envs)]
            finished = np.flatnonzero(dones)
            if finished.size:
                obs = np.array(obs)  # ours to write into
                for i in finished:
                    infos[i]["terminal_observation"] = obs[i].copy()
                    infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                new_obs, new_info = self.env.reset(finished.astype(np.int32))
                obs[new_info["env_id"]] = new_obs
            return obs, reward.astype(np.float32), dones, infos

        def close(self):
            self.env.close()

        def get_attr(self, attr_name, indices=None):
            return [getattr(self.env, attr_name, None)] * len(self._get_indices(indices))

        def set_attr(self, attr_name, value, indices=None):
            raise AttributeError(f"EnvPool's envs have no settable attribute {attr_name}")

        def env_method(self, method_name, *args, indices=None, **kwargs):
            raise AttributeError(f"EnvPool's envs have no method {method_name}")

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * len(self._get_indices(indices))

        def seed(self, seed=None):
            return [None] * self.num_envs  # EnvPool is seeded once, in envpool.make

    class TimedVecEnv(VecEnvWrapper):
        """Counts the ns spent stepping the envs (send + wait)."""

        def __init__(self, venv):
            super().__init__(venv)
            self.env_ns = 0

        def reset(self):
            return self.venv.reset()

        def step_async(self, actions):
            t0 = perf_counter_ns()
            self.venv.step_async(actions)
            self.env_ns += perf_counter_ns() - t0

        def step_wait(self):
            t0 = perf_counter_ns()
            out = self.venv.step_wait()
            self.env_ns += perf_counter_ns() - t0
            return out

    class ClipRewardVecEnv(VecEnvWrapper):
        """Sign-clipped rewards for training (SB3's AtariWrapper clip_reward); VecMonitor, inside, sees the score."""

        def reset(self):
            return self.venv.reset()

        def step_wait(self):
            obs, reward, dones, infos = self.venv.step_wait()
            return obs, np.sign(reward), dones, infos

    return EnvPoolVecEnv, TimedVecEnv, ClipRewardVecEnv


class SB3PPOSession(TargetRun):
    """One unit: `model.learn(total_timesteps=n_steps * n_envs, reset_num_timesteps=False)`, which is one
    rollout and one update. The first call resets the envs; later calls keep them, their observations and
    SB3's episode buffer. The logger is set once (no outputs), so no call reconfigures it."""

    def __init__(self, workload, options):
        self.venv = None
        try:
            self._open(workload, options)
        except BaseException:
            if self.venv is not None:
                self.venv.close()
            raise

    def _open(self, workload, options):
        import gymnasium as gym
        import torch
        from stable_baselines3 import PPO
        from stable_baselines3.common.logger import Logger
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor
        EnvPoolVecEnv, TimedVecEnv, ClipRewardVecEnv = _sb3_vec_classes()
        vec, n = options["vec"], workload.num_envs
        if vec == "envpool":
            base = EnvPoolVecEnv(workload, options["num_threads"])
        elif vec == "subproc":
            base = SubprocVecEnv(env_fns(workload), start_method="fork")
        else:
            base = DummyVecEnv(env_fns(workload))
        self.venv = self.timed = TimedVecEnv(base)
        self.venv = VecMonitor(self.timed)          # episode returns (last 100 in model.ep_info_buffer)
        if env_info(workload.env_id).family == "atari":
            self.venv = ClipRewardVecEnv(self.venv)
        if not isinstance(self.venv.action_space, gym.spaces.Discrete):
            raise Unsupported(f"sb3-ppo is run with a categorical policy here: needs a Discrete action space "
                              f"(got {type(self.venv.action_space).__name__})")
        if workload.policy.device.startswith("cuda") and not torch.cuda.is_available():
            raise Unsupported("no CUDA device")
        # a Dict (a screen beside game variables) goes to SB3's MultiInputPolicy: its CombinedExtractor puts a
        # NatureCNN on each image part and flattens the rest, the MLP of the policy's hidden sizes on top; the clip
        # range is the vector one, as cleanrl-ppo's for a Dict (learner_nets.sb3_dict_reason checked the parts)
        if isinstance(self.venv.observation_space, gym.spaces.Tuple):
            raise Unsupported("Tuple observations: SB3's policies take no Tuple observations (sb3-ppo carries Box, "
                              "Dict only)")
        structured = isinstance(self.venv.observation_space, gym.spaces.Dict)
        image = not structured and len(self.venv.observation_space.shape) == 3
        policy = "MultiInputPolicy" if structured else "CnnPolicy" if image else "MlpPolicy"
        T = options["num_steps"]
        self.per_unit = T * n
        self.minibatches = options["num_minibatches"]
        self.steps_done = 0
        lr, total = options["lr"], options["total_timesteps"]
        if options["anneal_lr"]:  # SB3's progress_remaining restarts with every learn() call: anneal on our count
            def learning_rate(_progress_remaining):
                return lr * max(1.0 - self.steps_done / total, 0.0)
        else:
            learning_rate = lr
        hidden = list(workload.policy.hidden)
        self.model = PPO(
            policy, self.venv, learning_rate=learning_rate, n_steps=T,
            batch_size=self.per_unit // self.minibatches, n_epochs=options["update_epochs"], gamma=options["gamma"],
            gae_lambda=options["gae_lambda"], clip_range=CLIP_COEF["image" if image else "vector"], ent_coef=ENT_COEF,
            vf_coef=VF_COEF, max_grad_norm=MAX_GRAD_NORM,
            policy_kwargs=None if image else {"net_arch": {"pi": hidden, "vf": hidden}},
            seed=workload.seed, device=workload.policy.device, verbose=0)
        self.model.set_logger(Logger(folder=None, output_formats=[]))
        self.learn_ns = self.infer_ns = 0
        train, forward = self.model.train, self.model.policy.forward

        def timed_train():
            t0 = perf_counter_ns()
            train()
            self.learn_ns += perf_counter_ns() - t0

        def timed_forward(*args, **kwargs):
            t0 = perf_counter_ns()
            out = forward(*args, **kwargs)
            self.infer_ns += perf_counter_ns() - t0
            return out
        self.model.train = timed_train
        self.model.policy.forward = timed_forward   # collect_rollouts' action selection
        self.target = options["target_return"] or default_target(workload.env_id)
        self.t_start = None
        self.metrics = self
        workers = {"dummy": 1, "subproc": n,  # EnvPool's threads (0: min(num_envs, hardware threads))
                   "envpool": options["num_threads"] or min(n, os.cpu_count() or 1)}[vec]
        self.info = {"workers": workers, "batch_size": self.per_unit}
        self.reset()   # the window's marks: from the start until the harness opens its window

    def step(self) -> int:
        if self.t_start is None:
            self.t_start = perf_counter()
        before = self.model.num_timesteps
        self.model.learn(total_timesteps=self.per_unit, reset_num_timesteps=False)
        made = self.model.num_timesteps - before
        self.steps_done += made
        self.progress(self.return_mean(), self.steps_done)
        return made

    def episode_returns(self) -> list:
        """The returns of SB3's last (up to) 100 finished episodes, oldest first (VecMonitor's)."""
        return [float(e["r"]) for e in (self.model.ep_info_buffer or ())]

    def return_mean(self):
        returns = self.episode_returns()
        return float(np.mean(returns)) if returns else None

    def updates(self) -> int:
        """Adam steps: SB3 counts epochs (_n_updates), each of ceil(buffer / batch_size) minibatches."""
        return self.model._n_updates * math.ceil(self.per_unit / self.model.batch_size)

    # -- metrics over the timed window --
    def reset(self):
        self._mark = (self.steps_done, self.updates(), self.timed.env_ns, self.infer_ns, self.learn_ns)

    def read(self, seconds):
        if seconds <= 0:
            return {}
        steps0, updates0, env0, infer0, learn0 = self._mark
        return {"updates_per_s": (self.updates() - updates0) / seconds,
                "samples_per_s": (self.steps_done - steps0) / seconds,
                "return_mean": self.return_mean(), "return_first": self.return_first,
                "time_to_target_s": self.time_to_target, "steps_to_target": self.steps_to_target,
                "env_frac": (self.timed.env_ns - env0) / 1e9 / seconds,
                "inference_frac": (self.infer_ns - infer0) / 1e9 / seconds,
                "learn_frac": (self.learn_ns - learn0) / 1e9 / seconds}

    def close(self):
        self.venv.close()


@register
class SB3PPO(Adapter):
    name = "sb3-ppo"
    kind = "learner"
    description = ("stable_baselines3 PPO (CleanRL's hyperparameters) on DummyVecEnv, SubprocVecEnv or EnvPool; "
                   "one unit = one learn() call of one rollout + update")
    requires = ("stable_baselines3",)
    options = LEARNER_OPTIONS
    algo = "ppo"

    def tune_space(self, num_envs, cpus):
        return vec_space(num_envs, cpus)

    def collector(self, options):
        return COLLECTORS["sb3-ppo"][options["vec"]]

    def supports(self, workload, options):
        return learner_supports(self.name, workload, options)

    def open(self, workload, options):
        return SB3PPOSession(workload, options)
