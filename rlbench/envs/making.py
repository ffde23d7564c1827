"""How every adapter builds an env: the same env, preprocessing and seeds, which is what makes strategies
comparable (Atari with DQN's preprocessing, EnvPool's arguments for the same env, the user's wrappers applied in
order), and the Python call a user writes for one (tune's snippets). Preprocessing and accounting: docs/protocol.md
("Environments and policies")."""
from dataclasses import replace

from rlbench.envs import agents, jax_apis, users
from rlbench.envs.catalogue import ATARI, WRAP, env_info
from rlbench.errors import Unsupported, UsageError


def make_env(env_id: str, /, **kwargs):
    """Build one gymnasium env; module-level so subprocess vector envs can pickle it. A multi-agent env's
    per-agent rewards and episode ends are joined into one each (rlbench.envs.agents)."""
    return agents.joined(_build(env_id, **kwargs))


def _build(env_id: str, /, **kwargs):
    import gymnasium as gym
    if WRAP in env_id:
        base, *wrappers = env_id.split(WRAP)
        env = _build(base, **kwargs)
        for w in wrappers:
            env = users.wrapper(w)(env)
            if not isinstance(env, gym.Env):
                raise UsageError(f"env wrapper '{w}' returned {type(env).__name__}, not a gymnasium.Env")
        return env
    family = env_info(env_id).family
    if family == "custom":
        env = users.build_user_env(env_id, **kwargs)
        if not isinstance(env, gym.Env):
            api = jax_apis.jax_api(jax_apis.env_and_params(env)[0])
            raise Unsupported(f"{env_id} is a JAX env ({api} API), not a gymnasium.Env")
        return env
    if family == "synthetic":
        import rlbench.synthetic  # noqa: F401  (registers the env)
    if family == "atari":
        return _make_atari(env_id)
    if family == "brax":
        raise Unsupported(f"{env_id} is a Brax env: it runs only inside JAX (adapters brax, brax-ppo)")
    if family == "dm_control":
        raise Unsupported(f"{env_id} is a DeepMind Control task: EnvPool's adapters and playground run it")
    return gym.make(env_id, **kwargs)


def env_fns(workload) -> list:
    """One picklable constructor per env, for vector envs that build them (in subprocesses or not)."""
    from functools import partial
    return [partial(make_env, workload.env_id, **workload.env_kwargs)] * workload.num_envs


def _make_atari(env_id: str):
    import ale_py
    import gymnasium as gym
    if hasattr(gym, "register_envs"):  # gymnasium >= 1.0; 0.29 registers ALE/ through ale-py's entry point
        gym.register_envs(ale_py)
    env = gym.make(f"ALE/{env_id}", frameskip=1, repeat_action_probability=0.0, full_action_space=False,
                   max_num_frames_per_episode=108_000)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=ATARI["noop_max"], frame_skip=ATARI["frameskip"],
                                          screen_size=ATARI["screen"], terminal_on_life_loss=False,
                                          grayscale_obs=True, scale_obs=False)
    return _frame_stack(env, ATARI["stack"])


def _frame_stack(env, stack: int):
    """The last `stack` frames as one (stack, 84, 84) uint8 array, the reset frame repeated at first.

    gymnasium >= 1.0 has FrameStackObservation (padding_type="reset"); 0.29 (per-adapter environments,
    e.g. Sample Factory's) has FrameStack, which returns LazyFrames: made an ndarray here, so both
    give the same observations.
    """
    import gymnasium as gym
    if hasattr(gym.wrappers, "FrameStackObservation"):
        return gym.wrappers.FrameStackObservation(env, stack)
    import numpy as np
    return gym.wrappers.TransformObservation(gym.wrappers.FrameStack(env, stack), np.asarray)


def envpool_kwargs(env_id: str) -> dict:
    """EnvPool's arguments for the same env as make_env builds."""
    if env_info(env_id).family != "atari":
        return {}
    return {"episodic_life": False, "reward_clip": False, "use_fire_reset": False,
            "repeat_action_probability": 0.0, "noop_max": ATARI["noop_max"], "frame_skip": ATARI["frameskip"],
            "img_height": ATARI["screen"], "img_width": ATARI["screen"], "stack_num": ATARI["stack"],
            "gray_scale": True, "max_episode_steps": 108_000 // ATARI["frameskip"]}


def env_call(workload) -> str:
    """The Python expression a user writes to build one of the workload's envs (for tune's snippets):
    gymnasium.make for an id, the factory itself for a factory."""
    args = "".join(f", {k}={v!r}" for k, v in sorted(workload.env_kwargs.items()))
    info = env_info(workload.env_id)
    if info.wrappers:
        call = env_call(replace(workload, env_id=workload.env_id.split(WRAP)[0]))
        for w in info.wrappers:
            module, _, name = w.partition(":")
            call = f"{module}.{name}({call})"
        return call
    if info.family == "custom" and users.user_target(workload.env_id)[0] == "factory":
        module, _, name = workload.env_id.partition(":")
        return f"{module}.{name}({args[2:]})"
    if info.family in ("atari", "synthetic"):  # rlbench's own preprocessing / env
        return f"rlbench.envs.make_env({workload.env_id!r}{args})"
    return f"gymnasium.make({workload.env_id!r}{args})"
