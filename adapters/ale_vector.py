"""`ale-vector`: ALE's own C++ vector env (ale-py's `ale_py.vector_env.AtariVectorEnv`), driven as its users drive it.

It steps rlbench's Atari ids (Pong-v5, ...) with EnvPool's Atari preprocessing, read from the same
`envpool_kwargs` EnvPool's adapters run (no reward clipping, no episodic life, no fire reset, no sticky actions,
up to 30 no-ops at reset, frameskip 4 max-pooled, 84x84 grayscale, 4 frames stacked, 108,000 frames an episode),
so its cells and EnvPool's run the same workload. batch_size 0 (= num_envs) is synchronous: `step()` waits for
every env. 0 < batch_size < num_envs is asynchronous: `reset()` then `recv()` returns the first batch_size envs
done, whose actions `send()` returns (ALE remembers which envs the last batch held).

It also steps ALE's own gymnasium ids (`ALE/Pong-v5`) as `gymnasium.make` builds them, from their registered
settings and the cell's env_kwargs: the raw 210x160 screen (rgb or grayscale, one frame, no max-pooling), the
spec's frameskip and sticky actions (v5: 4 and 0.25), no no-ops, no reward clipping; its one-frame stack is
dropped so the observation is gymnasium's, and the same env's serial or vector-env cells run the same workload.

ALE resets a finished env on its next step (autoreset_mode NEXT_STEP, as EnvPool): that reset is not a
transition and is not counted. Its info has no `elapsed_step`, so the session remembers which envs ended:
an env's first result after its episode ended (or, async, after reset() while reset() returned other envs)
is its reset. Where the two libraries still differ (docs/strategies/stepping.md): ALE's no-ops at a reset
are 0 to noop_max - 1 (EnvPool's and gymnasium's 1 to noop_max), its stack starts with zero frames (EnvPool
repeats the reset frame) and its episode limit counts the no-op frames.
"""
import importlib.util
import os
import re

import numpy as np

from rlbench.api import Adapter, Option, env_info, envpool_kwargs, make_policy, register

# EnvPool's names for the preprocessing (rlbench.envs.envpool_kwargs) -> AtariVectorEnv's
_ALE_NAMES = {"frame_skip": "frameskip", "gray_scale": "grayscale", "reward_clip": "reward_clipping",
              "stack_num": "stack_num", "img_height": "img_height", "img_width": "img_width",
              "noop_max": "noop_max", "episodic_life": "episodic_life", "use_fire_reset": "use_fire_reset",
              "repeat_action_probability": "repeat_action_probability"}


def game(env_id: str) -> str:
    """'SpaceInvaders-v5' -> 'space_invaders', ALE's ROM name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", env_id[:-len("-v5")]).lower()


def ale_kwargs(env_id: str) -> dict:
    """AtariVectorEnv's preprocessing arguments for the env EnvPool's adapters build (envpool_kwargs): the same
    settings under ALE's names; EnvPool's episode limit in env steps is ALE's in frames."""
    kwargs = envpool_kwargs(env_id)
    out = {ale: kwargs[ours] for ours, ale in _ALE_NAMES.items()}
    out["max_num_frames_per_episode"] = kwargs["max_episode_steps"] * kwargs["frame_skip"]
    return out


# gymnasium's ALE/<Game>-v5 arguments AtariVectorEnv takes under the same name; it has no game mode or difficulty
_SAME_NAMES = ("repeat_action_probability", "full_action_space", "frameskip", "max_num_frames_per_episode")
_NO_MODES = ("mode", "difficulty")


def ale_id(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def gymnasium_kwargs(workload) -> dict:
    """The settings of gymnasium's ALE/<Game>-v5 (its registered kwargs, the cell's env_kwargs over them)."""
    import gymnasium as gym
    return {**gym.spec(workload.env_id).kwargs, **workload.env_kwargs}


def gymnasium_refusal(workload):
    """Why AtariVectorEnv cannot step this ALE id as gymnasium.make builds it, or None."""
    kwargs = gymnasium_kwargs(workload)
    if kwargs.get("obs_type", "rgb") not in ("rgb", "grayscale"):
        return f"ale-vector steps screens, not obs_type={kwargs['obs_type']!r} ({workload.env_id})"
    if not isinstance(kwargs.get("frameskip", 4), int):
        return f"ale-vector needs a fixed frameskip, not {kwargs['frameskip']!r} ({workload.env_id})"
    modes = [k for k in _NO_MODES if kwargs.get(k) is not None]
    if modes:
        return f"ale-vector has no {', '.join(modes)} argument ({workload.env_id})"
    known = {"game", "obs_type", "render_mode", *_SAME_NAMES, *_NO_MODES}
    other = sorted(k for k in kwargs if k not in known)
    return f"ale-vector cannot pass {', '.join(other)} to AtariVectorEnv ({workload.env_id})" if other else None


def vector_args(workload) -> tuple:
    """(ROM name, AtariVectorEnv's keyword arguments, whether to drop its one-frame stack axis) of the cell's env:
    rlbench's <Game>-v5 with EnvPool's preprocessing, or ALE's own id as gymnasium.make builds it."""
    if not ale_id(workload.env_id):
        return game(workload.env_id), ale_kwargs(workload.env_id), False
    kwargs = gymnasium_kwargs(workload)
    out = {k: kwargs[k] for k in _SAME_NAMES if k in kwargs}
    out.update(img_height=210, img_width=160, grayscale=kwargs.get("obs_type", "rgb") == "grayscale", stack_num=1,
               maxpool=False, noop_max=0, reward_clipping=False, episodic_life=False, use_fire_reset=False)
    return kwargs["game"], out, True


def _rom_shipped(rom: str):
    """True/False whether ale-py ships the ROM (read from its folder, ale_py not imported); None without ale-py."""
    spec = importlib.util.find_spec("ale_py")
    if spec is None or spec.origin is None:
        return None
    return os.path.exists(os.path.join(os.path.dirname(spec.origin), "roms", f"{rom}.bin"))


def _batch(workload, options) -> int:
    return options["batch_size"] or workload.num_envs


def _workers(options, batch_size) -> int:
    """ALE's num_threads=0 means min(batch_size, hardware threads), as EnvPool's."""
    return options["num_threads"] or min(batch_size, os.cpu_count() or 1)


class AleVectorSession:
    def __init__(self, workload, options):
        from ale_py.vector_env import AtariVectorEnv
        self.batch = _batch(workload, options)
        rom, kwargs, self.unstack = vector_args(workload)
        self.env = AtariVectorEnv(
            rom, workload.num_envs, batch_size=self.batch, num_threads=options["num_threads"],
            thread_affinity_offset=0 if options["thread_affinity"] else -1, **kwargs)
        # every env's next result is its reset until reset() returns it; then True where its episode just ended
        self.fresh = np.ones(workload.num_envs, dtype=np.bool_)
        obs, info = self.env.reset(seed=workload.seed)
        self.obs = self._frames(obs)
        self.ids = info["env_id"]
        self.fresh[self.ids] = False
        self.starts = np.ones(len(self.ids), dtype=np.bool_)   # the observations reset() returned start episodes
        space = self.env.single_observation_space
        if self.unstack:   # gymnasium's observation: the one frame, no stack axis
            import gymnasium as gym
            space = gym.spaces.Box(0, 255, space.shape[1:], space.dtype)
        self.policy = make_policy(workload, space, self.env.single_action_space, batch_size=self.batch)
        self.recurrent = self.policy.recurrent
        self.sync = self.batch == workload.num_envs
        self.info = {"workers": _workers(options, self.batch), "batch_size": self.batch}

    def step(self) -> int:
        if self.recurrent:  # a batch of any envs (async): the state rows are theirs, by id
            actions = self.policy(self.obs, self.starts, self.ids)
        else:
            actions = self.policy(self.obs)
        actions = np.asarray(actions)
        if actions.dtype != np.int64 and actions.dtype != np.int32:   # ALE takes int32/int64 only
            actions = actions.astype(np.int64)
        if self.sync:
            obs, _, terminated, truncated, info = self.env.step(actions)
        else:
            self.env.send(actions)
            obs, _, terminated, truncated, info = self.env.recv()
        self.obs = self._frames(obs)
        self.ids = ids = info["env_id"]
        self.starts = resets = self.fresh[ids]
        self.fresh[ids] = terminated | truncated
        return len(ids) - int(np.count_nonzero(resets))

    def _frames(self, obs):
        return obs[:, 0] if self.unstack else obs

    def close(self):
        self.env.close()


@register
class AleVector(Adapter):
    name = "ale-vector"
    description = ("ale_py.vector_env.AtariVectorEnv: ALE's C++ thread pool with EnvPool's Atari preprocessing; "
                   "batch_size < num_envs: recv() the first batch_size envs, send() their actions")
    requires = ("ale_py",)
    options = (
        Option("batch_size", int, 0, "envs per recv(); 0 = num_envs (sync: step() waits for every env); "
                                     "< num_envs: async send()/recv()"),
        Option("num_threads", int, 0, "pool threads; 0 = ALE default, min(batch_size, hardware threads)"),
        Option("thread_affinity", bool, False, "pin pool threads to cores (thread_affinity_offset=0)"),
    )

    def supports(self, workload, options):
        info = env_info(workload.env_id)
        if info.wrappers:
            return f"ale-vector steps its envs in C++: it cannot apply Python wrappers ({workload.env_id})"
        if info.family == "gymnasium" and ale_id(workload.env_id):
            why = gymnasium_refusal(workload)
            if why:
                return why
        elif info.family != "atari":
            return (f"ale-vector runs ALE's Atari games only (<Game>-v5, e.g. Pong-v5, or ALE's own id, e.g. "
                    f"ALE/Pong-v5), not {workload.env_id}")
        rom = vector_args(workload)[0]
        if _rom_shipped(rom) is False:
            return f"ale-py has no ROM for {workload.env_id} ({rom}.bin)"
        batch = _batch(workload, options)
        if batch > workload.num_envs:
            return (f"ale-vector needs batch_size <= num_envs (num_envs={workload.num_envs}, "
                    f"batch_size={batch})")
        return None

    def open(self, workload, options):
        return AleVectorSession(workload, options)

    def tune_space(self, num_envs, cpus):
        """Sync, then async in half batches (EnvPool's rule of thumb), each with a thread per core it can use."""
        space = [{"num_threads": max(1, min(cpus, num_envs))}]
        half = num_envs // 2
        if 0 < half < num_envs:
            space.append({"batch_size": half, "num_threads": max(1, min(cpus, half))})
        return space

    def snippet(self, workload, options):
        batch = _batch(workload, options)
        rom, kwargs, _ = vector_args(workload)
        extra = "".join(f", {k}={v!r}" for k, v in sorted(kwargs.items()))
        threads = f", num_threads={options['num_threads']}" if options["num_threads"] else ""
        affinity = ", thread_affinity_offset=0" if options["thread_affinity"] else ""
        call = (f"ale_py.vector_env.AtariVectorEnv({rom!r}, num_envs={workload.num_envs}, "
                f"batch_size={batch}{threads}{affinity}{extra})")
        if batch == workload.num_envs:
            return call + "  # reset(seed=...), then step(actions) waits for every env"
        return call + "  # reset(seed=...), then send(actions) for the last batch and recv() the next"
