"""The user's envs: what `module:name` names (a factory or an id its module registers), a registered gymnasium id,
a wrapper, and building them while planning with JAX kept off the accelerator (a factory may return a JAX env of any
registered API: rlbench.envs.jax_apis). One instance is built while planning, so an env that does not import or
build is refused before anything runs."""
import contextlib
import functools
import importlib
import importlib.util
import os
import sys

from rlbench.envs import jax_apis
from rlbench.errors import UsageError, install_hint

_cell = False  # set in a cell's process: there the adapter, not planning, decides how JAX starts


def in_cell() -> None:
    """Called once by a cell's process: the user's module is imported there as the user runs it."""
    global _cell
    _cell = True


def in_a_cell() -> bool:
    """Whether this process is a cell's (in_cell was called), not planning's."""
    return _cell


def registered(env_id: str) -> bool:
    """A registered gymnasium id; ALE's (`ALE/Pong-v5`) are registered by importing ale_py, as gymnasium 1.x asks
    its users to (`gym.register_envs(ale_py)`): done here when ale-py is installed, in planning and in every cell."""
    import gymnasium as gym
    if env_id not in gym.envs.registry and env_id.startswith("ALE/") and importlib.util.find_spec("ale_py"):
        import ale_py
        gym.register_envs(ale_py)
    return env_id in gym.envs.registry


def registered_frameskip(env_id: str) -> int:
    """The frames a step of a registered id makes, as its spec's fixed `frameskip` says (ALE's v5 ids: 4), so that
    frames are counted as for rlbench's own Atari ids; 1 where it states none (or a random range, ALE's v0)."""
    import gymnasium as gym
    skip = gym.spec(env_id).kwargs.get("frameskip", 1)
    return int(skip) if isinstance(skip, int) and skip > 0 else 1


@functools.lru_cache(maxsize=None)
def user_target(env_id: str):
    """`module:name` -> ("factory", callable) or ("id", name) once the module is imported (which registers
    its ids). A name the module defines is a factory, a dotted one too as in entry points (MuJoCo Playground's
    `mujoco_playground:registry.load`); anything else an env id."""
    module_name, _, name = env_id.partition(":")
    if not module_name or not name:
        raise UsageError(f"bad env '{env_id}' (expected module:EnvId-v0 or package.module:make_env)")
    try:
        with jax_for_planning():
            module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure to import is theirs to see, in one line
        raise UsageError(f"env '{env_id}': module {module_name} failed to import: "
                         f"{type(exc).__name__}: {exc}{install_hint(exc)}") from None
    parts = name.split(".")
    target = functools.reduce(lambda obj, part: getattr(obj, part, None), parts, module) \
        if all(part.isidentifier() for part in parts) else None
    if callable(target):
        return "factory", target
    if registered(name):
        return "id", name
    raise UsageError(f"env '{env_id}': module {module_name} defines no factory '{name}' and registers no "
                     f"gymnasium id '{name}'")


@functools.lru_cache(maxsize=None)
def wrapper(path: str):
    """`package.module:fn`: a callable taking an env and returning the wrapped env (a gymnasium.Wrapper
    class works as is)."""
    from rlbench import registry
    module_name, _, name = path.partition(":")
    if not module_name or not name.isidentifier():
        raise UsageError(f"bad env wrapper '{path}' (expected package.module:fn, a callable env -> env)")
    return registry.load_factory(path, "env wrapper")


@contextlib.contextmanager
def jax_for_planning():
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


def build_user_env(env_id: str, /, **kwargs):
    """What the user's `module:name` builds: a gymnasium.Env, or a JAX env of a registered API (a factory may
    return the (env, params) pair of an API that makes pairs, as gymnax.make does; the env is then the first)."""
    import gymnasium as gym
    how, target = user_target(env_id)
    with jax_for_planning():
        env = target(**kwargs) if how == "factory" else gym.make(target, **kwargs)
    if isinstance(env, gym.Env):
        return env
    if isinstance(env, tuple) and len(env) == 2:
        api = jax_apis.api_of(env[0])
        if api is not None and api.pairs:
            return env
    if jax_apis.api_of(env) is not None:
        return env
    raise UsageError(f"env '{env_id}': the factory returned {type(env).__name__}, not a gymnasium.Env nor a JAX "
                     f"env with {jax_apis.described()}")


def builds_gymnasium(env_id: str) -> bool:
    """Whether the user's `module:name`, built with no arguments, is a gymnasium.Env (what a wrapper takes);
    one that does not build is refused naming the exception."""
    import gymnasium as gym
    try:
        env = build_user_env(env_id)
    except UsageError:
        raise
    except Exception as exc:  # the user's env
        raise UsageError(f"env '{env_id}' failed to build: {type(exc).__name__}: {exc}") from None
    if not isinstance(env, gym.Env):
        return False
    close_quietly(env)
    return True


def close_quietly(env) -> None:
    try:
        env.close()
    except Exception:  # noqa: BLE001  (a failing close says nothing about the env's spaces or API)
        pass
