"""One functional interface over the JAX envs rlbench runs (gymnax's own registry, a user's env of any registered
JAX env API: adapters/_kit/jax_apis/ reads each into it, an installed plug-in too), so the compiled loops (gymnax's
vmap + scan, PureJaxRL's PPO) are written once. Both calls take and return one env (callers vmap them); `step`
resets a finished env inside the step that finished it, so every step is one counted transition; `flat` makes the
observation the policy's input; `legal` is the env's own mask of legal actions where it has one (board games end a
game on an illegal move, so a policy blind to it would measure resets), which the policies sample within, as these
packages' users do.
"""
import math
from dataclasses import dataclass
from typing import Callable

from adapters._kit.jax_apis._declared import declares
from rlbench.api import Unsupported, build_user_env, env_and_params, env_info, jax_api, jax_env_api, jax_env_apis

GYMNAX_NAMES = {"CartPole-v1": "CartPole-v1"}   # rlbench (EnvPool) name -> gymnax name
DEFAULT_EPISODE_STEPS = 1000  # evaluation horizon of an env that states none


@dataclass(frozen=True)
class FunctionalEnv:
    reset: Callable        # key -> (obs, state)
    step: Callable         # (key, state, action) -> (obs, state, reward float32, done bool)
    action: tuple          # ("discrete", n), ("multidiscrete", nvec, low) or ("box", low, high), bounds finite, as
                           # make_actor takes it
    obs_dim: int           # length of flat(obs) of one env
    obs_bytes: int         # bytes of one env's observation as the env gives it
    episode_steps: int     # the env's own episode limit (evaluation horizon)
    api: str               # its JAX env API's name (rlbench.api.jax_env_apis)
    legal: Callable = None  # (obs, state) -> bool[n actions] of one env (multi-discrete: [components, largest
                            # count]), or None: every action is legal


def flat(jax, obs):
    """A batch of observations (any pytree of arrays with the batch first) as one float32 matrix."""
    import jax.numpy as jnp
    leaves = [leaf.reshape(leaf.shape[0], -1).astype(jnp.float32) for leaf in jax.tree.leaves(obs)]
    return leaves[0] if len(leaves) == 1 else jnp.concatenate(leaves, axis=1)


def load(jax, workload, api: str = "auto") -> FunctionalEnv:
    """The workload's env behind FunctionalEnv, read by its JAX env API (`api` declares a user env's: "auto",
    detected); rlbench's own ids are gymnax's envs."""
    if env_info(workload.env_id).family != "custom":
        import gymnax
        env, params = gymnax.make(GYMNAX_NAMES.get(workload.env_id, workload.env_id))
        return jax_env_api("gymnax").load(jax, env, params)
    env, params = env_and_params(build_user_env(workload.env_id, **workload.env_kwargs))
    api = jax_api(env) if api == "auto" else api
    found = next((a for a in jax_env_apis() if a.name == api), None)
    if found is None:
        raise Unsupported(f"{workload.env_id}: the factory's {type(env).__name__} has no {api} API")
    return found.load(jax, env, params)


def _restart(jax, done, fresh, current):
    """`fresh` where the env finished, `current` where not, leaf by leaf (as Jumanji's AutoResetWrapper)."""
    import jax.numpy as jnp
    return jax.tree.map(lambda new, old: jnp.where(done, new, old), fresh, current)


CHOICES_MAX = 2**16  # an integer box with up to this many values per entry: multi-discrete (more: a box)


def _action(space, count: str, low: str, high: str) -> tuple:
    """A discrete space (one count), a multi-discrete one (a count per component, Jumanji's MultiDiscreteArray,
    or integers between bounds: ("multidiscrete", counts, lowest values)) or a bounded box, read by the attribute
    names its API uses."""
    import numpy as np
    shape = tuple(getattr(space, "shape", None) or ())
    per = getattr(space, "number_of_dims_per_distribution", None)   # Kinetix's MultiDiscrete: n, their total
    if declares(space, count) and np.ndim(getattr(space, count)) == 0 and not shape:
        return "discrete", int(getattr(space, count))
    if declares(space, count) or declares(space, "nvec"):   # a count per component (gymnasium's: nvec)
        dtype = np.dtype(getattr(space, "dtype", np.int32))
        counts = per if per is not None else getattr(space, "nvec", None)
        counts = getattr(space, count) if counts is None else counts
        nvec = np.broadcast_to(np.asarray(counts), shape or np.shape(counts))
        nvec = nvec.astype(dtype if dtype.kind in "iu" else np.int32)
        return "multidiscrete", nvec, np.zeros_like(nvec)
    if declares(space, low) and declares(space, high):
        dtype = np.dtype(getattr(space, "dtype", np.float32))
        lo, hi = (np.broadcast_to(np.asarray(getattr(space, b), dtype), space.shape) for b in (low, high))
        if dtype.kind in "iu":   # integers in bounds (MultiCVRP's vehicles' next nodes): a choice per entry
            counts = hi.astype(np.int64) - lo + 1
            if counts.size and counts.max() <= CHOICES_MAX:
                return "multidiscrete", counts.astype(dtype), lo.copy()
        return ("box", np.where(np.isfinite(lo), lo, -1.0).astype(dtype),
                np.where(np.isfinite(hi), hi, 1.0).astype(dtype))
    raise Unsupported(f"{type(space).__name__} actions: the JAX adapters carry a discrete space or a bounded box")


def action_kind(space) -> str:
    """"Discrete", "MultiDiscrete", "Box" or the space's own type name (what supports() refuses), read without
    JAX."""
    try:
        kind = _action(space, "n", "low", "high") if declares(space, "n") or declares(space, "low") else \
            _action(space, "num_values", "minimum", "maximum")
    except Unsupported:
        return type(space).__name__
    return {"discrete": "Discrete", "multidiscrete": "MultiDiscrete"}.get(kind[0], "Box")


def _obs_size(jax, reset, obs=None) -> tuple:
    """(length of one env's flattened observation, its bytes as the env gives it), from shapes alone (`obs`: the
    observation's shapes where the caller has traced reset already)."""
    import numpy as np
    obs = jax.eval_shape(reset, jax.random.PRNGKey(0))[0] if obs is None else obs
    leaves = jax.tree.leaves(obs)
    return (sum(int(math.prod(leaf.shape)) for leaf in leaves),
            sum(int(math.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize for leaf in leaves))
