"""An env's spaces and API, read from one instance built while planning (the user's envs and any wrapped env:
rlbench's own have Box observations and Box or Discrete actions), and the reasons an adapter cannot carry them or
step the env by its API: planning, the sweep and tune all ask `refusal`."""
from rlbench.envs import jax_apis, users
from rlbench.envs.catalogue import env_info
from rlbench.envs.making import make_env
from rlbench.errors import UsageError

SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple")  # what adapters may carry


def _probe(env_id: str, frozen_kwargs: tuple):
    """(API, observation space, action space) of one env built with these arguments."""
    import gymnasium as gym
    try:
        info = env_info(env_id)
        if info.family == "custom" and not info.wrappers:  # perhaps a JAX env
            env = users.build_user_env(env_id, **dict(frozen_kwargs))
        else:
            env = make_env(env_id, **dict(frozen_kwargs))
    except UsageError:
        raise
    except Exception as exc:  # the user's env, built with the user's arguments
        raise UsageError(f"env '{env_id}' failed to build: {type(exc).__name__}: {exc}") from None
    if not isinstance(env, gym.Env):  # a JAX env (build_user_env checked it has a registered API)
        env, params = jax_apis.env_and_params(env)
        api = jax_apis.api_of(env)
        with users.jax_for_planning():  # the spaces of a gymnax env are built from its params
            try:
                return api.name, *api.spaces(env, params)
            except UsageError as exc:  # what the API cannot carry, in its words
                raise UsageError(f"env '{env_id}': {exc}") from None
    try:
        return "gymnasium", env.observation_space, env.action_space
    finally:
        users.close_quietly(env)


def spaces(env_id: str, env_kwargs: dict = None) -> tuple:
    """(observation space, action space) of one env, built once per process and arguments (a JAX env's:
    its own space or spec objects)."""
    return _probe(env_id, tuple(sorted((env_kwargs or {}).items())))[1:]


def env_api(env_id: str, env_kwargs: dict = None) -> str:
    """"gymnasium" for an env rlbench builds with gymnasium (its own, registered ids, a factory returning a
    gymnasium.Env), else the JAX API of the env the user's factory returns (built once, while planning)."""
    if env_info(env_id).family != "custom":
        return "gymnasium"
    return _probe(env_id, tuple(sorted((env_kwargs or {}).items())))[0]


def space_name(space) -> str:
    return type(space).__name__


def unsupported_spaces(workload, who: str, obs=SPACES, act=("Box", "Discrete", "MultiDiscrete", "MultiBinary")):
    """The reason an adapter cannot carry the user's env's spaces (None when it can). rlbench's own envs
    have Box observations and Box or Discrete actions, which every adapter carries: not probed."""
    if not env_info(workload.env_id).probed:
        return None
    o, a = spaces(workload.env_id, workload.env_kwargs)
    if space_name(o) not in obs:
        return f"{space_name(o)} observations: {who} carries {', '.join(obs)} only"
    if space_name(a) not in act:
        return f"{space_name(a)} actions: {who} carries {', '.join(act)} only"
    return None


def space_leaves(space, path: str = ""):
    """(path, kind) of every part of a space that is no Dict or Tuple, nested ones opened: ("/mission",
    "MissionSpace") for MiniGrid's Dict observation."""
    kind = type(space).__name__
    if kind == "Dict":
        for key, part in space.spaces.items():
            yield from space_leaves(part, f"{path}/{key}")
    elif kind == "Tuple":
        for i, part in enumerate(space.spaces):
            yield from space_leaves(part, f"{path}/{i}")
    else:
        yield path, kind


def unsupported_leaves(workload, who: str, carries: tuple = None, refuses: tuple = (), actions: bool = False):
    """The reason an adapter cannot carry some part of the user's env's observations (its actions with
    `actions`) (None when it can): a part, at any depth of Dicts and Tuples, of a kind not in `carries` (None:
    any) or in `refuses`."""
    if not env_info(workload.env_id).probed:
        return None
    for path, kind in space_leaves(spaces(workload.env_id, workload.env_kwargs)[1 if actions else 0]):
        if (carries is not None and kind not in carries) or kind in refuses:
            where = f" (at {path[1:]})" if path else ""
            what = (f"carries {', '.join(carries)}, in Dicts and Tuples too, only" if carries is not None
                    else f"carries no {', '.join(refuses)}")
            return f"{kind} {'actions' if actions else 'observations'}{where}: {who} {what}"
    return None


def api_refusal(adapter_cls, workload):
    """Why `adapter_cls` cannot step the workload's env by its API (a JAX env on an adapter that steps
    gymnasium envs, or the reverse is the JAX adapter's own supports()), or None."""
    api = env_api(workload.env_id, workload.env_kwargs)
    if api == "gymnasium" or api in adapter_cls.jax_env_apis:
        return None
    from rlbench import registry
    hosts = sorted(name for name, cls in registry.discover().items() if api in cls.jax_env_apis)
    return (f"{workload.env_id} is a JAX env ({api} API): {adapter_cls.name} steps gymnasium envs; "
            f"JAX envs of this API run on {', '.join(hosts) or 'no adapter here'}")


def refusal(adapter, workload, options: dict):
    """Why `adapter` cannot host the workload (None when it can): the env's API first, then the adapter's
    own supports(). Planning, the sweep and tune all ask this."""
    return api_refusal(type(adapter), workload) or adapter.supports(workload, options)
