"""The environments rlbench knows, named as EnvPool names them, and how every adapter builds them.

Building envs in one place is what makes strategies comparable: same env, same arguments, same seeds.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EnvInfo:
    env_id: str
    frameskip: int = 1          # frames = env steps x frameskip
    kwargs: dict = field(default_factory=dict)   # allowed env_kwargs -> default
    native: tuple = ()          # families that implement the env natively besides gymnasium


ENVS = {
    "CartPole-v1": EnvInfo("CartPole-v1", native=("envpool",)),
    "rlbench/Synthetic-v0": EnvInfo(
        "rlbench/Synthetic-v0",
        kwargs={"step_cost_us": 0.0, "obs_bytes": 64, "episode_len": 1000},
    ),
}


def env_info(env_id: str) -> EnvInfo:
    from rlbench.errors import UsageError
    if env_id not in ENVS:
        raise UsageError(f"unknown env '{env_id}' (valid: {', '.join(sorted(ENVS))})")
    return ENVS[env_id]


def typed_env_kwargs(env_id: str, given: dict) -> dict:
    """given env arguments checked against the env's known ones and typed like their defaults."""
    from rlbench.errors import UsageError
    info = env_info(env_id)
    out = {}
    for key, raw in given.items():
        if key not in info.kwargs:
            raise UsageError(f"unknown key '{key}' for {env_id} (valid: {', '.join(info.kwargs) or 'none'})")
        kind = type(info.kwargs[key])
        try:
            if isinstance(raw, bool) or (kind is int and isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            out[key] = kind(raw)
        except (TypeError, ValueError):
            raise UsageError(f"{key}={raw!r} for {env_id} must be a number ({kind.__name__})") from None
    return out


def make_env(env_id: str, **kwargs):
    """Build one gymnasium env; module-level so subprocess vector envs can pickle it."""
    import gymnasium as gym
    if env_id.startswith("rlbench/"):
        import rlbench.synthetic  # noqa: F401  (registers the env)
    return gym.make(env_id, **kwargs)
