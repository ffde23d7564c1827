"""The environments rlbench knows, named as EnvPool names them, and how every adapter builds them: same env, same
preprocessing, same seeds, which is what makes strategies comparable. Any other env is the user's (a registered
gymnasium id, `module:EnvId-v0`, a factory, or a JAX env with gymnax's or Jumanji's API); one instance is built
while planning (`probe`), so an env that does not import or build is refused before anything runs. Preprocessing
and accounting: docs/protocol.md ("Environments and policies"), docs/tune.md and docs/strategies/jax.md (Brax).
"""
import contextlib
import functools
import importlib
import importlib.util
import inspect
import math
import os
import re
import sys
import types
from dataclasses import dataclass, field, replace

from rlbench.errors import Unsupported, UsageError, install_hint

ATARI_ID = re.compile(r"^([A-Z][A-Za-z0-9]*)-v5$")
ATARI = {"frameskip": 4, "noop_max": 30, "screen": 84, "stack": 4}


@dataclass(frozen=True)
class EnvInfo:
    env_id: str
    family: str                 # classic | atari | mujoco | synthetic | brax | dm_control | gymnasium | custom
    frameskip: int = 1          # frames = env steps x frameskip
    kwargs: dict = field(default_factory=dict)   # allowed env_kwargs -> default; None: any (the user's env)
    native: tuple = ()          # families that implement the env natively besides gymnasium
    choices: dict = field(default_factory=dict)  # env_kwargs with a fixed set of values -> that set
    ranges: dict = field(default_factory=dict)   # numeric env_kwargs -> (low, high), both valid; else >= 0
    wrappers: tuple = ()        # the user's wrappers (module:fn), applied in this order to every env built

    @property
    def probed(self) -> bool:
        """Whether its spaces are read from a built instance: envs rlbench did not write, and any wrapped env
        (a wrapper may change them)."""
        return self.family in USER_FAMILIES or bool(self.wrappers)


ENVS = {
    "CartPole-v1": EnvInfo("CartPole-v1", "classic", native=("envpool",)),
    "Ant-v4": EnvInfo("Ant-v4", "mujoco", frameskip=5, native=("envpool",)),
    "HalfCheetah-v4": EnvInfo("HalfCheetah-v4", "mujoco", frameskip=5, native=("envpool",)),
    "Humanoid-v4": EnvInfo("Humanoid-v4", "mujoco", frameskip=5, native=("envpool",)),
    **{env_id: EnvInfo(env_id, "mujoco", frameskip=skip, native=("envpool",)) for env_id, skip in (
        ("Hopper-v4", 4), ("Walker2d-v4", 4), ("Swimmer-v4", 4), ("InvertedPendulum-v4", 2))},
    # Brax (JAX) envs: brax.envs.get_environment(<name>); no gymnasium or EnvPool counterpart
    "brax/ant": EnvInfo("brax/ant", "brax", frameskip=5),
    "brax/halfcheetah": EnvInfo("brax/halfcheetah", "brax", frameskip=5),
    # DeepMind Control tasks by EnvPool's names (its C++ port of dm_control's files), which MuJoCo Playground steps
    # too (its MJX re-implementation: the same bodies and control step, its own solver settings); frameskip =
    # physics steps per env step, the same on both sides (tests/frameworks/test_playground.py checks both)
    **{env_id: EnvInfo(env_id, "dm_control", frameskip=skip, native=("envpool",)) for env_id, skip in (
        ("CheetahRun-v1", 1), ("HopperHop-v1", 4), ("HopperStand-v1", 4), ("HumanoidRun-v1", 5),
        ("HumanoidStand-v1", 5), ("HumanoidWalk-v1", 5), ("WalkerRun-v1", 10), ("WalkerStand-v1", 10),
        ("WalkerWalk-v1", 10))},
    "rlbench/Synthetic-v0": EnvInfo(
        "rlbench/Synthetic-v0", "synthetic",
        kwargs={"step_cost_us": 0.0, "obs_bytes": 64, "episode_len": 1000, "straggler_p": 0.0, "straggler_x": 10.0},
        ranges={"step_cost_us": (0, math.inf), "obs_bytes": (1, math.inf), "episode_len": (1, math.inf),
                "straggler_p": (0, 1), "straggler_x": (1, math.inf)},
    ),
    # stacked 84x84 uint8 frames (Atari after DQN's preprocessing) with a chosen step cost: the CNN policies'
    # workload where there is no Atari
    "rlbench/Frames-v0": EnvInfo(
        "rlbench/Frames-v0", "synthetic",
        kwargs={"step_cost_us": 0.0, "stack": 4, "size": 84, "layout": "chw", "n_actions": 6, "episode_len": 1000},
        choices={"layout": ("chw", "hwc")},
        ranges={"step_cost_us": (0, math.inf), "stack": (1, 64), "size": (1, 4096), "n_actions": (1, math.inf),
                "episode_len": (1, math.inf)},
    ),
}
USER_FAMILIES = ("gymnasium", "custom")  # envs rlbench did not write: kwargs as given, spaces probed
SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple")  # what adapters may carry
# the functional APIs of JAX envs a factory may return
JAX_APIS = ("gymnax", "jumanji", "pgx", "xminigrid", "brax", "navix", "jaxmarl", "gxm")
_GYMNAX_API = ("reset", "step", "action_space", "observation_space")
_JUMANJI_API = ("reset", "step")
_PGX_API = ("init", "step", "observe")
_XMINIGRID_API = ("reset", "step", "num_actions", "default_params")
_BRAX_API = ("reset", "step")   # with the attributes action_size and observation_size
_NAVIX_API = ("reset", "step")  # with action_space and observation_space attributes (spaces, not methods)
_JAXMARL_API = ("reset", "step", "action_space", "observation_space")   # with agents and num_agents
_GXM_API = ("init", "reset", "step")   # with action_space and observation_space attributes
_API_NAMES = ("gymnax's (reset, step, action_space, observation_space, default_params), Jumanji's (reset(key), "
              "step(state, action), action_spec, observation_spec), Pgx's (init, step, observe, num_actions), "
              "XLand-MiniGrid's (reset(params, key), step(params, timestep, action), num_actions, default_params) or "
              "Brax's (reset(rng) and step(state, action) returning a State with obs, reward and done, action_size, "
              "observation_size: Brax's and MuJoCo Playground's envs), Navix's (reset(key) and step(timestep, action) "
              "returning a Timestep with observation, reward and step_type, action_space and observation_space "
              "attributes), gxm's (init(key), step(key, state, action) returning (state, Timestep), action_space "
              "and observation_space attributes) or JaxMARL's (agents, num_agents, reset(key), step(key, state, "
              "actions by agent) returning rewards and dones by agent, action_space(agent))")
_cell = False  # set in a cell's process: there the adapter, not planning, decides how JAX starts


def atari_games() -> set:
    """ROM names ale-py or EnvPool's assets ship (e.g. 'pong'), read from their folders without importing
    either (EnvPool runs Atari on its own emulator: its cells need no ale-py)."""
    folders = []
    for package in ("ale_py", "envpool_assets"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            folders.append(os.path.join(os.path.dirname(spec.origin), *(("roms",) if package == "ale_py"
                                                                         else ("atari", "roms"))))
    if os.environ.get("ENVPOOL_ASSETS_PATH"):  # EnvPool's own override of where its assets are
        folders.append(os.path.join(os.environ["ENVPOOL_ASSETS_PATH"], "atari", "roms"))
    return {f[:-4] for d in folders if os.path.isdir(d) for f in os.listdir(d) if f.endswith(".bin")}


def _rom(env_id: str) -> str:
    """'SpaceInvaders-v5' -> 'space_invaders' (ale-py's ROM naming)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", ATARI_ID.match(env_id).group(1)).lower()


WRAP = "+"  # base env id + wrapper + wrapper: how a wrapped env is named (in cell ids too)


def wrapped_id(env_id: str, wrappers) -> str:
    """The id of `env_id` with the user's wrappers applied in order (`CartPole-v1+pkg.mod:fn`)."""
    return WRAP.join([env_id, *wrappers])


def env_info(env_id: str) -> EnvInfo:
    """What an env id names: an env of ours, an Atari game, a family's own workload (replay/<name>,
    described by that family), or any of these wrapped (`ID+module:fn`): the base env's info, no longer
    native to any framework (EnvPool or gymnax cannot apply a Python wrapper)."""
    from rlbench import registry
    if WRAP in env_id:
        base, *wrappers = env_id.split(WRAP)
        info = env_info(base)
        if registry.family_of_workload(base) is not None or (not _cell and env_api(base) != "gymnasium"):
            raise UsageError(f"env '{env_id}': wrappers apply to gymnasium envs, not to {base}")
        for w in wrappers:
            _wrapper(w)
        return EnvInfo(env_id, info.family, info.frameskip, info.kwargs, (), info.choices, info.ranges,
                       tuple(wrappers))
    if env_id in ENVS:
        return ENVS[env_id]
    family = registry.family_of_workload(env_id)
    if family is not None:
        return family.workload_info(env_id)
    if ATARI_ID.match(env_id) and _rom(env_id) in atari_games():
        return EnvInfo(env_id, "atari", frameskip=ATARI["frameskip"], native=("envpool",))
    if ":" in env_id:
        _user_target(env_id)  # the module imports and names a factory or a registered id
        return EnvInfo(env_id, "custom", kwargs=None)
    if _registered(env_id):
        return EnvInfo(env_id, "gymnasium", frameskip=_registered_frameskip(env_id), kwargs=None)
    own = "".join(f", or a {f.name} workload, e.g. {f.workload_example}" for f in registry.families()
                  if f.workload_prefix)
    ours = sorted(k for k, v in ENVS.items() if v.family != "dm_control")
    dm_control = ", ".join(k for k, v in ENVS.items() if v.family == "dm_control")
    raise UsageError(f"unknown env '{env_id}' (valid: a registered gymnasium id, e.g. Acrobot-v1; "
                     f"module:EnvId-v0; package.module:make_env, e.g. a JAX package's own ids as gymnax:make "
                     f"--env-kwarg env_id=Breakout-MinAtar; {', '.join(ours)}; an Atari game "
                     f"as <Game>-v5, e.g. Pong-v5 (EnvPool's preprocessing), or ALE's own id, e.g. ALE/Pong-v5"
                     f"{'' if atari_games() else ' (ale-py is not installed)'}; "
                     f"a DeepMind Control task: {dm_control}{own})")


def _registered(env_id: str) -> bool:
    """A registered gymnasium id; ALE's (`ALE/Pong-v5`) are registered by importing ale_py, as gymnasium 1.x asks
    its users to (`gym.register_envs(ale_py)`): done here when ale-py is installed, in planning and in every cell."""
    import gymnasium as gym
    if env_id not in gym.envs.registry and env_id.startswith("ALE/") and importlib.util.find_spec("ale_py"):
        import ale_py
        gym.register_envs(ale_py)
    return env_id in gym.envs.registry


def _registered_frameskip(env_id: str) -> int:
    """The frames a step of a registered id makes, as its spec's fixed `frameskip` says (ALE's v5 ids: 4), so that
    frames are counted as for rlbench's own Atari ids; 1 where it states none (or a random range, ALE's v0)."""
    import gymnasium as gym
    skip = gym.spec(env_id).kwargs.get("frameskip", 1)
    return int(skip) if isinstance(skip, int) and skip > 0 else 1


@functools.lru_cache(maxsize=None)
def _user_target(env_id: str):
    """`module:name` -> ("factory", callable) or ("id", name) once the module is imported (which registers
    its ids). A name the module defines is a factory, a dotted one too as in entry points (MuJoCo Playground's
    `mujoco_playground:registry.load`); anything else an env id."""
    module_name, _, name = env_id.partition(":")
    if not module_name or not name:
        raise UsageError(f"bad env '{env_id}' (expected module:EnvId-v0 or package.module:make_env)")
    try:
        with _jax_for_planning():
            module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure to import is theirs to see, in one line
        raise UsageError(f"env '{env_id}': module {module_name} failed to import: "
                         f"{type(exc).__name__}: {exc}{install_hint(exc)}") from None
    parts = name.split(".")
    target = functools.reduce(lambda obj, part: getattr(obj, part, None), parts, module) \
        if all(part.isidentifier() for part in parts) else None
    if callable(target):
        return "factory", target
    if _registered(name):
        return "id", name
    raise UsageError(f"env '{env_id}': module {module_name} defines no factory '{name}' and registers no "
                     f"gymnasium id '{name}'")


def in_cell() -> None:
    """Called once by a cell's process: the user's module is imported there as the user runs it."""
    global _cell
    _cell = True


@contextlib.contextmanager
def _jax_for_planning():
    """A user's JAX env imported or built while planning would start JAX's backend in rlbench's own
    process: on a GPU, one that keeps most of its memory (JAX preallocates) while the cells run. Until JAX
    is imported, its platform is CPU and nothing preallocated while planning; the cells, fresh processes,
    start JAX as their adapter sets it."""
    if _cell or "jax" in sys.modules:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")}
    os.environ.update(JAX_PLATFORMS="cpu", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def jax_api(env) -> str:
    """Which JAX functional API `env` offers ("" for none), by its methods (_API_NAMES): the packages' envs
    and a user's env written to one of them alike."""
    def has(*methods):
        return all(callable(getattr(env, m, None)) for m in methods)
    agents = getattr(env, "agents", None)
    if has(*_JAXMARL_API) and isinstance(agents, (list, tuple)) and getattr(env, "num_agents", None):
        return "jaxmarl"
    if has(*_GYMNAX_API) and hasattr(env, "default_params"):
        return "gymnax"
    if has(*_JUMANJI_API) and all(hasattr(env, m) for m in ("action_spec", "observation_spec")):
        return "jumanji"
    if has(*_PGX_API) and all(hasattr(env, m) for m in ("num_actions", "observation_shape")):
        return "pgx"
    if has(*_XMINIGRID_API):
        return "xminigrid"
    # looked up, not read: Brax's observation_size is a property that resets the env to find out
    if has(*_BRAX_API) and all(inspect.getattr_static(env, m, None) is not None
                               for m in ("action_size", "observation_size")):
        return "brax"
    spaces_as_attributes = all(getattr(env, m, None) is not None and not callable(getattr(env, m))
                               for m in ("action_space", "observation_space"))
    if has(*_GXM_API) and spaces_as_attributes:
        return "gxm"
    if has(*_NAVIX_API) and spaces_as_attributes:
        return "navix"
    return ""


def build_user_env(env_id: str, /, **kwargs):
    """What the user's `module:name` builds: a gymnasium.Env, or a JAX env (a factory may return
    gymnax.make's (env, params) pair too; the env is then the first)."""
    import gymnasium as gym
    how, target = _user_target(env_id)
    with _jax_for_planning():
        env = target(**kwargs) if how == "factory" else gym.make(target, **kwargs)
    if isinstance(env, gym.Env):
        return env
    if isinstance(env, tuple) and len(env) == 2 and jax_api(env[0]) in ("gymnax", "xminigrid"):
        return env    # gymnax.make's and xminigrid.make's (env, params)
    if jax_api(env):
        return env
    raise UsageError(f"env '{env_id}': the factory returned {type(env).__name__}, not a gymnasium.Env nor a JAX "
                     f"env with {_API_NAMES}")


def env_api(env_id: str, env_kwargs: dict = None) -> str:
    """"gymnasium" for an env rlbench builds with gymnasium (its own, registered ids, a factory returning a
    gymnasium.Env), else the JAX API of the env the user's factory returns (built once, while planning)."""
    if env_info(env_id).family != "custom":
        return "gymnasium"
    return _probe(env_id, tuple(sorted((env_kwargs or {}).items())))[0]


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


@functools.lru_cache(maxsize=None)
def _wrapper(path: str):
    """`package.module:fn`: a callable taking an env and returning the wrapped env (a gymnasium.Wrapper
    class works as is)."""
    from rlbench import registry
    module_name, _, name = path.partition(":")
    if not module_name or not name.isidentifier():
        raise UsageError(f"bad env wrapper '{path}' (expected package.module:fn, a callable env -> env)")
    return registry.load_factory(path, "env wrapper")


def frameskip_of(info: EnvInfo, env_kwargs: dict) -> int:
    """The user's env states its frameskip as an env argument (passed to the env too, as ALE's is), else its
    registered spec does (info.frameskip: 1 for a factory)."""
    return int(env_kwargs.get("frameskip", info.frameskip)) if info.kwargs is None else info.frameskip


def _box(shape):
    """The observation space of an API that states only a shape, or a dict of them (Pgx, XLand-MiniGrid,
    MuJoCo Playground's observation_size): planning reads its size."""
    import gymnasium as gym
    import numpy as np
    if isinstance(shape, dict):
        return gym.spaces.Dict({k: _box(v) for k, v in shape.items()})
    return gym.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)


def declares(space, name: str) -> bool:
    """hasattr for the spaces of JAX env packages, whose properties may raise anything for what they lack
    (gxm's Box.n: NotImplementedError)."""
    try:
        getattr(space, name)
    except Exception:  # noqa: BLE001  (the package's property, not rlbench, chose the error)
        return False
    return True


def _declared_actions(space, low: str = "minimum", high: str = "maximum"):
    """A Discrete (Navix's count is maximum + 1) or a bounded box (Navix's minimum and maximum, gxm's low and
    high) as gymnasium's."""
    import gymnasium as gym
    import numpy as np
    if declares(space, "n"):
        return gym.spaces.Discrete(int(space.n))
    if not (declares(space, low) and declares(space, high)):
        return space   # named as it is, and refused by the adapters' space check
    shape = tuple(space.shape)
    low, high = (np.broadcast_to(np.asarray(getattr(space, b), np.float32), shape) for b in (low, high))
    return gym.spaces.Box(low, high, shape, np.float32)


def _declared_shapes(space):
    """gxm's observation space (a Box, a Discrete, or a Tree of them) as its shapes, a dict for a Tree."""
    inner = getattr(space, "spaces", None)
    if isinstance(inner, dict):
        return {str(k): _declared_shapes(v) for k, v in inner.items()}
    if isinstance(inner, (list, tuple)):
        return {str(i): _declared_shapes(v) for i, v in enumerate(inner)}
    return tuple(int(d) for d in (getattr(space, "shape", None) or ()))


def _declared_boxes(space, name: str):
    """(name, Box) per array of a declared space: one space with a shape (Hanabi's an int), or a dict of them
    (STORM's), their names joined with "/"."""
    import numpy as np
    if isinstance(space, dict):
        for key, inner in space.items():
            yield from _declared_boxes(inner, f"{name}/{key}")
        return
    yield name, _box(tuple(np.reshape(space.shape, -1).astype(int).tolist()))


def _jaxmarl_spaces(env_id: str, env):
    """A JaxMARL env seen as one agent acting for the team: every agent's observation space (its shape, as the env
    declares it), and one action component per agent (a discrete choice each, or their boxes joined)."""
    import gymnasium as gym
    import numpy as np
    obs_space = gym.spaces.Dict({name: box for agent in env.agents
                                 for name, box in _declared_boxes(env.observation_space(agent), str(agent))})
    per_agent = [env.action_space(agent) for agent in env.agents]
    if all(hasattr(s, "n") and not tuple(getattr(s, "shape", ()) or ()) for s in per_agent):
        return obs_space, gym.spaces.MultiDiscrete([int(s.n) for s in per_agent])
    if all(hasattr(s, "low") and hasattr(s, "high") for s in per_agent):
        low, high = (np.concatenate([np.broadcast_to(np.asarray(getattr(s, b), np.float32), s.shape).ravel()
                                     for s in per_agent]) for b in ("low", "high"))
        return obs_space, gym.spaces.Box(low, high, low.shape, np.float32)
    kinds = sorted({type(s).__name__ for s in per_agent})
    raise UsageError(f"env '{env_id}': its agents' actions are {', '.join(kinds)}: rlbench carries a JaxMARL env "
                     "whose agents all have a Discrete action or all a Box")


def _probe(env_id: str, frozen_kwargs: tuple):
    """(API, observation space, action space) of one env built with these arguments."""
    import gymnasium as gym
    try:
        info = env_info(env_id)
        if info.family == "custom" and not info.wrappers:  # perhaps a JAX env
            env = build_user_env(env_id, **dict(frozen_kwargs))
        else:
            env = make_env(env_id, **dict(frozen_kwargs))
    except UsageError:
        raise
    except Exception as exc:  # the user's env, built with the user's arguments
        raise UsageError(f"env '{env_id}' failed to build: {type(exc).__name__}: {exc}") from None
    if not isinstance(env, gym.Env):  # a JAX env (build_user_env checked it has an API)
        env, params = env if isinstance(env, tuple) else (env, getattr(env, "default_params", None))
        api = jax_api(env)
        with _jax_for_planning():  # the spaces of a gymnax env are built from its params
            if api == "gymnax":
                return api, env.observation_space(params), env.action_space(params)
            if api == "pgx":
                return api, _box(env.observation_shape), gym.spaces.Discrete(env.num_actions)
            if api == "xminigrid":
                return api, _box(env.observation_shape(params)), gym.spaces.Discrete(env.num_actions(params))
            if api == "brax":   # observation_size: a length, or a dict of shapes (Playground's); actions in [-1, 1]
                import numpy as np
                size = env.observation_size
                return (api, _box(dict(size) if isinstance(size, dict) else (int(size),)),
                        gym.spaces.Box(-1.0, 1.0, (int(env.action_size),), np.float32))
            if api == "navix":
                return api, _box(tuple(env.observation_space.shape)), _declared_actions(env.action_space)
            if api == "gxm":
                return api, _box(_declared_shapes(env.observation_space)), _declared_actions(env.action_space,
                                                                                             "low", "high")
            if api == "jaxmarl":
                return api, *_jaxmarl_spaces(env_id, env)
            return api, *(s() if inspect.ismethod(s) else s for s in (env.observation_spec, env.action_spec))
    try:
        return "gymnasium", env.observation_space, env.action_space
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001  (a failing close says nothing about the spaces)
            pass


def spaces(env_id: str, env_kwargs: dict = None) -> tuple:
    """(observation space, action space) of one env, built once per process and arguments (a JAX env's:
    its own space or spec objects)."""
    return _probe(env_id, tuple(sorted((env_kwargs or {}).items())))[1:]


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


def unsupported_leaves(workload, who: str, carries: tuple = None, refuses: tuple = ()):
    """The reason an adapter cannot carry some part of the user's env's observations (None when it can):
    a part, at any depth of Dicts and Tuples, of a kind not in `carries` (None: any) or in `refuses`."""
    if not env_info(workload.env_id).probed:
        return None
    for path, kind in space_leaves(spaces(workload.env_id, workload.env_kwargs)[0]):
        if (carries is not None and kind not in carries) or kind in refuses:
            where = f" (at {path[1:]})" if path else ""
            what = (f"carries {', '.join(carries)}, in Dicts and Tuples too, only" if carries is not None
                    else f"carries no {', '.join(refuses)}")
            return f"{kind} observations{where}: {who} {what}"
    return None


def structured_actions(workload, who: str):
    """The reason an adapter that hands a batch of actions to gymnasium's vector env (which takes a Dict or
    Tuple action space's batch as a dict or tuple of arrays, not one array of dicts) cannot take the user's
    env's Dict or Tuple actions; None for any other action space."""
    if not env_info(workload.env_id).probed:
        return None
    kind = type(spaces(workload.env_id, workload.env_kwargs)[1]).__name__
    if kind not in ("Dict", "Tuple"):
        return None
    return (f"{kind} actions: {who} steps gymnasium's vector env, which takes them batched part by part; "
            "rlbench's policies give one array of actions (serial and SB3 carry them)")


def typed_env_kwargs(env_id: str, given: dict, from_cli: bool = False) -> dict:
    """given env arguments checked against the env's known ones and typed like their defaults."""
    info = env_info(env_id)
    if info.kwargs is None:
        return user_env_kwargs(env_id, given, from_cli)
    out = {}
    for key, raw in given.items():
        if key not in info.kwargs:
            raise UsageError(f"unknown key '{key}' for {env_id} (valid: {', '.join(info.kwargs) or 'none'})")
        kind = type(info.kwargs[key])
        if key in info.choices:
            if raw not in info.choices[key]:
                raise UsageError(f"{key}={raw!r} for {env_id} (valid: {', '.join(info.choices[key])})")
            out[key] = raw
            continue
        low, high = info.ranges.get(key, (0, math.inf))
        valid = (f"a {'' if kind is int else 'finite '}number ({kind.__name__}) >= {low:g}"
                 + (f" and <= {high:g}" if high < math.inf else ""))
        try:
            if isinstance(raw, bool) or (kind is int and isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            value = kind(raw)
        except (TypeError, ValueError):
            raise UsageError(f"{key}={raw!r} for {env_id} must be {valid}") from None
        if not low <= value <= high or abs(value) == math.inf:  # NaN is in no range
            raise UsageError(f"{key}={raw!r} for {env_id} must be {valid}")
        out[key] = value
    return out


def planned_env_kwargs(env_id: str, given: dict, from_cli: bool = False) -> tuple:
    """(typed env_kwargs, frameskip) of a planned workload; the user's env is built once here, so one
    that does not build is refused before anything runs."""
    kwargs = typed_env_kwargs(env_id, given, from_cli)
    info = env_info(env_id)
    if info.probed:
        spaces(env_id, kwargs)
    return kwargs, frameskip_of(info, kwargs)


def user_env_kwargs(env_id: str, given: dict, from_cli: bool = False) -> dict:
    """The user's env takes what it takes (its build while planning says what it refuses). A suite's value
    is TOML's already; one from the command line is read as TOML reads it (4 -> int, 0.5 -> float, true ->
    bool), else a string, and stays the string where the env declares that argument a string (Pgx's
    `make(env_id: Literal["2048", ...])`: `--env-kwarg env_id=2048`). `frameskip` is rlbench's accounting
    too: an integer >= 1."""
    from rlbench.workload import literal
    out = dict(given)
    if from_cli:
        strings = string_arguments(env_id) if given else set()
        for key, raw in given.items():
            value = literal(raw)
            out[key] = raw if key in strings and not isinstance(value, str) else value
    skip = out.get("frameskip", 1)
    if isinstance(skip, bool) or not isinstance(skip, int) or skip < 1:
        raise UsageError(f"frameskip={given.get('frameskip')!r} for {env_id} must be an integer >= 1")
    return out


def string_arguments(env_id: str) -> set:
    """The arguments a user's env declares strings, by annotation (str, a Literal of strings, str | None)
    or by a string default: its factory's, or a registered id's creator's and registered kwargs'. What
    cannot be read declares nothing."""
    import typing
    base = env_id.split(WRAP)[0]
    try:
        kind, target = _user_target(base) if ":" in base else ("id", base)
        defaults = {}
        if kind == "id":
            import gymnasium as gym
            from gymnasium.envs.registration import load_env_creator
            spec = gym.spec(target)
            defaults = dict(spec.kwargs)
            target = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
        signature = inspect.signature(target)
    except Exception:  # a callee rlbench cannot read (a C extension, an id that does not load)
        return set()
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    except Exception:  # an annotation that does not resolve (a partial, a name imported for type checking only)
        hints = {}

    def textual(hint) -> bool:
        args = typing.get_args(hint)
        if typing.get_origin(hint) is typing.Literal:
            return bool(args) and all(isinstance(a, str) for a in args)
        if args and typing.get_origin(hint) in (typing.Union, types.UnionType):
            kinds = [a for a in args if a is not type(None)]
            return bool(kinds) and all(textual(a) for a in kinds)
        return hint is str

    out = {k for k, v in defaults.items() if isinstance(v, str)}
    for name, param in signature.parameters.items():
        if textual(hints.get(name)) or isinstance(param.default, str):
            out.add(name)
    return out


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
    if info.family == "custom" and _user_target(workload.env_id)[0] == "factory":
        module, _, name = workload.env_id.partition(":")
        return f"{module}.{name}({args[2:]})"
    if info.family in ("atari", "synthetic"):  # rlbench's own preprocessing / env
        return f"rlbench.envs.make_env({workload.env_id!r}{args})"
    return f"gymnasium.make({workload.env_id!r}{args})"


def make_env(env_id: str, /, **kwargs):
    """Build one gymnasium env; module-level so subprocess vector envs can pickle it."""
    import gymnasium as gym
    if WRAP in env_id:
        base, *wrappers = env_id.split(WRAP)
        env = make_env(base, **kwargs)
        for w in wrappers:
            env = _wrapper(w)(env)
            if not isinstance(env, gym.Env):
                raise UsageError(f"env wrapper '{w}' returned {type(env).__name__}, not a gymnasium.Env")
        return env
    family = env_info(env_id).family
    if family == "custom":
        env = build_user_env(env_id, **kwargs)
        if not isinstance(env, gym.Env):
            raise Unsupported(f"{env_id} is a JAX env ({env_api(env_id, kwargs)} API), not a gymnasium.Env")
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
