"""One functional interface over the JAX envs rlbench runs (gymnax's own registry, a user's env with gymnax's,
Jumanji's, Pgx's, XLand-MiniGrid's, Brax's, Navix's, JaxMARL's or gxm's API), so the compiled loops (gymnax's
vmap + scan, PureJaxRL's PPO) are written once. Both calls take and return one env (callers vmap them); `step`
resets a finished env inside the step that finished it, so every step is one counted transition; `flat` makes the
observation the policy's input; `legal` is the env's own mask of legal actions where it has one (board games end a
game on an illegal move, so a policy blind to it would measure resets), which the policies sample within, as these
packages' users do.
"""
import inspect
import math
from dataclasses import dataclass
from typing import Callable

from rlbench.api import Unsupported, build_user_env, declares, env_info, jax_api

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
    api: str               # one of rlbench.api.JAX_APIS
    legal: Callable = None  # (obs, state) -> bool[n actions] of one env (multi-discrete: [components, largest
                            # count]), or None: every action is legal


def flat(jax, obs):
    """A batch of observations (any pytree of arrays with the batch first) as one float32 matrix."""
    import jax.numpy as jnp
    leaves = [leaf.reshape(leaf.shape[0], -1).astype(jnp.float32) for leaf in jax.tree.leaves(obs)]
    return leaves[0] if len(leaves) == 1 else jnp.concatenate(leaves, axis=1)


def load(jax, workload, api: str = "auto") -> FunctionalEnv:
    """The workload's env behind FunctionalEnv; `api` declares a user env's API ("auto": detected)."""
    if env_info(workload.env_id).family != "custom":
        import gymnax
        env, params = gymnax.make(GYMNAX_NAMES.get(workload.env_id, workload.env_id))
        return _gymnax(jax, env, params)
    built = build_user_env(workload.env_id, **workload.env_kwargs)
    env, params = built if isinstance(built, tuple) else (built, getattr(built, "default_params", None))
    api = jax_api(env) if api == "auto" else api
    readers = {"gymnax": lambda: _gymnax(jax, env, params), "jumanji": lambda: _jumanji(jax, env),
               "pgx": lambda: _pgx(jax, env), "xminigrid": lambda: _xminigrid(jax, env, params),
               "brax": lambda: _brax(jax, env), "navix": lambda: _navix(jax, env),
               "jaxmarl": lambda: _jaxmarl(jax, env), "gxm": lambda: _gxm(jax, env)}
    if api in readers:
        return readers[api]()
    raise Unsupported(f"{workload.env_id}: the factory's {type(env).__name__} has no {api} API")


def _gymnax(jax, env, params) -> FunctionalEnv:
    """gymnax's step returns (obs, state, reward, done, info), or since gymnax 1.0 (obs, state, reward,
    terminated, truncated, info): either is read. An env written for gymnax before 1.0 (popgym-arcade's, on
    stable-gymnax: its state has no `time`, its step_env's done holds the time limit) cannot answer 1.0's
    is_truncated, so it steps as gymnax then did: step_env, and reset_env where done."""
    import jax.numpy as jnp

    def reset(key):
        return env.reset(key, params)

    def step(key, state, action):
        out = env.step(key, state, action, params)
        done = out[3] if len(out) == 5 else jnp.logical_or(out[3], out[4])
        return out[0], out[1], jnp.asarray(out[2], jnp.float32), jnp.asarray(done, bool)

    def step_before_1(key, state, action):
        key_step, key_reset = jax.random.split(key)
        obs, state, reward, done, _ = env.step_env(key_step, state, action, params)
        done = jnp.asarray(done, bool)
        fresh_obs, fresh_state = env.reset_env(key_reset, params)
        return (_restart(jax, done, fresh_obs, obs), _restart(jax, done, fresh_state, state),
                jnp.asarray(reward, jnp.float32), done)

    if not _answers_truncation(jax, env, params, reset):
        step = step_before_1

    action = _action(env.action_space(params), "n", "low", "high")
    steps = int(getattr(params, "max_steps_in_episode", 0) or DEFAULT_EPISODE_STEPS)
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset), steps, "gymnax")


def _answers_truncation(jax, env, params, reset) -> bool:
    """Whether gymnax's own step can run on this env: before 1.0 it has no is_truncated to ask."""
    if not hasattr(env, "is_truncated"):
        return True
    state = jax.eval_shape(reset, jax.random.PRNGKey(0))[1]
    try:
        jax.eval_shape(lambda s: env.is_truncated(s, params), state)
    except AttributeError:
        return False
    return True


def _restart(jax, done, fresh, current):
    """`fresh` where the env finished, `current` where not, leaf by leaf (as Jumanji's AutoResetWrapper)."""
    import jax.numpy as jnp
    return jax.tree.map(lambda new, old: jnp.where(done, new, old), fresh, current)


JOINT_MAX = 2**16   # a multi-discrete space with a mask over every combination, up to this many: one choice
CHOICES_MAX = 2**16  # an integer box with up to this many values per entry: multi-discrete (more: a box)


def _jumanji(jax, env) -> FunctionalEnv:
    """Jumanji's envs, one agent's or several agents' (Cleaner's, RobotWarehouse's, LevelBasedForaging's: a
    multi-discrete action, a component per agent, and a reward per agent, summed: the team's). A multi-discrete
    action whose mask covers every combination (BinPack's items x spaces, Sudoku's cells x digits, Minesweeper's,
    Tetris') is one choice among them, so the policies keep to the legal ones exactly; a mask per component
    (JobShop's per machine, each agent's) applies component by component."""
    import jax.numpy as jnp
    spec = env.action_spec() if inspect.ismethod(env.action_spec) else env.action_spec  # a method before 1.0
    action = _action(spec, "num_values", "minimum", "maximum")
    to_env = None

    def reset(key):
        state, timestep = env.reset(key)
        return timestep.observation, state

    def step(key, state, action):
        state, timestep = env.step(state, to_env(action) if to_env else action)
        done = jnp.asarray(timestep.last(), bool)
        fresh_state, fresh = env.reset(key)
        return (_restart(jax, done, fresh.observation, timestep.observation), _restart(jax, done, fresh_state, state),
                jnp.sum(jnp.asarray(timestep.reward, jnp.float32)), done)

    steps = int(getattr(env, "time_limit", 0) or DEFAULT_EPISODE_STEPS)
    obs = jax.eval_shape(reset, jax.random.PRNGKey(0))[0]
    mask = getattr(obs, "action_mask", None)   # Snake's, Game2048's, ...: one flag per action
    legal = None
    if action[0] == "discrete" and mask is not None and mask.shape == (action[1],):
        legal = lambda obs, state: obs.action_mask   # noqa: E731
    elif action[0] == "multidiscrete" and mask is not None:
        nvec = action[1]
        counts = tuple(int(v) for v in nvec.ravel())
        if mask.shape == counts and math.prod(counts) <= JOINT_MAX:
            low = action[2]
            action = ("discrete", math.prod(counts))
            to_env = lambda a: (jnp.stack(jnp.unravel_index(a, counts)).reshape(nvec.shape)  # noqa: E731
                                + low).astype(nvec.dtype)
            legal = lambda obs, state: obs.action_mask.reshape(-1).astype(bool)   # noqa: E731
        elif mask.shape == (nvec.size, int(nvec.max())):
            legal = lambda obs, state: obs.action_mask.astype(bool)   # noqa: E731
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset, obs), steps, "jumanji", legal)


def _pgx(jax, env) -> FunctionalEnv:
    """Pgx's games: the reward is the moving player's (state.rewards holds every player's), a finished game
    starts again inside the step; its legal_action_mask is `legal`."""
    import jax.numpy as jnp

    def reset(key):
        state = env.init(key)
        return state.observation, state

    def step(key, state, action):
        k_step, k_init = jax.random.split(key)
        new = env.step(state, action, k_step)
        done = jnp.logical_or(new.terminated, new.truncated)
        reward = jnp.asarray(new.rewards[state.current_player], jnp.float32)
        new = _restart(jax, done, env.init(k_init), new)
        return new.observation, new, reward, done

    action = ("discrete", int(env.num_actions))
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset), DEFAULT_EPISODE_STEPS, "pgx",
                         lambda obs, state: state.legal_action_mask)


def _xminigrid(jax, env, params) -> FunctionalEnv:
    """XLand-MiniGrid: the state is its TimeStep (step takes the last one); params come from xminigrid.make."""
    import jax.numpy as jnp

    def reset(key):
        timestep = env.reset(params, key)
        return timestep.observation, timestep

    def step(key, timestep, action):
        new = env.step(params, timestep, action)
        done = jnp.asarray(new.last(), bool)
        reward = jnp.asarray(new.reward, jnp.float32)
        new = _restart(jax, done, env.reset(params, key), new)
        return new.observation, new, reward, done

    action = ("discrete", int(env.num_actions(params)))
    steps = int(getattr(params, "max_steps", 0) or DEFAULT_EPISODE_STEPS)
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset), steps, "xminigrid")


def _brax(jax, env) -> FunctionalEnv:
    """Brax's API (Brax's envs, MuJoCo Playground's, a user's env built on either): step(state, action) -> State
    with obs, reward and done (a float), actions in [-1, 1]^action_size. The raw env neither ends an episode at a
    time limit nor starts again: both are done here as Brax's training wrappers do (EpisodeWrapper,
    AutoResetWrapper: a finished env goes back to the state its first reset gave, kept in the carry), at the
    env's `episode_length` where it has one (a wrapped env), else DEFAULT_EPISODE_STEPS, Brax's and Playground's
    default. The carried state is (the env's State, steps into the episode, the first State)."""
    import jax.numpy as jnp
    import numpy as np
    limit = int(getattr(env, "episode_length", 0) or DEFAULT_EPISODE_STEPS)

    def reset(key):
        state = env.reset(key)
        return state.obs, (state, jnp.int32(0), state)

    def step(key, carried, action):
        state, t, first = carried
        new, t = env.step(state, action), t + 1
        done = jnp.logical_or(new.done > 0, t >= limit)
        new_state = _restart(jax, done, first, new)
        return new_state.obs, (new_state, jnp.where(done, 0, t), first), jnp.asarray(new.reward, jnp.float32), done

    low = -np.ones((int(env.action_size),), np.float32)
    return FunctionalEnv(reset, step, ("box", low, -low), *_obs_size(jax, reset), limit, "brax")


def _navix(jax, env) -> FunctionalEnv:
    """Navix's envs: the state is its Timestep. Navix's public step spends the call after an episode's last
    step on a reset (a step that is no transition); the transition is its `_step`, called here where the env has
    it, and a finished env starts again inside the step that finished it, as for the other APIs."""
    import jax.numpy as jnp
    transition = getattr(env, "_step", env.step)   # env.step never resets here: the carried timestep is not done

    def reset(key):
        timestep = env.reset(key)
        return timestep.observation, timestep

    def step(key, timestep, action):
        new = transition(timestep, action)
        done = jnp.asarray(new.step_type > 0, bool)   # 1: truncation, 2: termination
        reward = jnp.asarray(new.reward, jnp.float32)
        new = _restart(jax, done, env.reset(key), new)
        return new.observation, new, reward, done

    action = _action(env.action_space, "n", "minimum", "maximum")
    steps = int(getattr(env, "max_steps", 0) or DEFAULT_EPISODE_STEPS)
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset), steps, "navix")


def _gxm(jax, env) -> FunctionalEnv:
    """gxm's envs (one API over gymnax's, Pgx's, Navix's, Brax's, XLand-MiniGrid's...): init(key) gives the first
    (state, Timestep); its step resets a finished env itself; done is terminated or truncated."""
    import jax.numpy as jnp

    def reset(key):
        state, timestep = env.init(key)
        return timestep.next_obs, state

    def step(key, state, action):
        state, timestep = env.step(key, state, action)
        done = jnp.logical_or(timestep.terminated, timestep.truncated)
        return timestep.next_obs, state, jnp.sum(jnp.asarray(timestep.reward, jnp.float32)), done

    action = _action(env.action_space, "n", "low", "high")
    steps = int(getattr(env, "time_limit", 0) or DEFAULT_EPISODE_STEPS)   # gxm's TimeLimit wrapper's
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset), steps, "gxm")


def _jaxmarl(jax, env) -> FunctionalEnv:
    """JaxMARL's envs, played by one policy for the team: the observation is every agent's, the action one
    component per agent (a discrete choice each, the env's available actions its mask; or the agents' boxes
    joined), the reward the agents' summed, done the env's "__all__". Its step resets a finished env itself."""
    import jax.numpy as jnp
    import numpy as np
    agents = list(env.agents)
    per_agent = [_action(env.action_space(agent), "n", "low", "high") for agent in agents]
    if all(kind[0] == "discrete" for kind in per_agent):
        nvec = np.asarray([kind[1] for kind in per_agent], np.int32)
        action = ("multidiscrete", nvec, np.zeros_like(nvec))

        def to_env(a):
            return {agent: a[i] for i, agent in enumerate(agents)}
    elif all(kind[0] == "box" for kind in per_agent):
        shapes = [kind[1].shape for kind in per_agent]
        bounds = [np.concatenate([kind[b].ravel() for kind in per_agent]) for b in (1, 2)]
        action = ("box", *bounds)
        ends = np.cumsum([math.prod(shape) for shape in shapes])[:-1].tolist()

        def to_env(a):
            return {agent: part.reshape(shape) for agent, part, shape in zip(agents, jnp.split(a, ends), shapes)}
    else:
        raise Unsupported(f"{type(env).__name__}: its agents' actions are {sorted({k[0] for k in per_agent})}: "
                          "the JAX adapters carry agents that all choose discretely or all act in a box")

    def reset(key):
        return env.reset(key)

    def step(key, state, a):
        obs, state, rewards, dones, _ = env.step(key, state, to_env(a))
        reward = sum(jnp.asarray(rewards[agent], jnp.float32) for agent in agents)
        return obs, state, reward, jnp.asarray(dones["__all__"], bool)

    legal = None
    if action[0] == "multidiscrete":
        legal = _jaxmarl_legal(jax, env, agents, nvec, reset)
    steps = int(getattr(env, "max_steps", 0) or DEFAULT_EPISODE_STEPS)
    return FunctionalEnv(reset, step, action, *_obs_size(jax, reset), steps, "jaxmarl", legal)


def _jaxmarl_legal(jax, env, agents, nvec, reset):
    """The agents' masks of available actions as one (agents, widest) array, padded with illegal choices: the
    env's `get_avail_actions` (MultiAgentEnv's; SMAX's), else its `get_legal_moves` (Hanabi's), else None."""
    import jax.numpy as jnp
    widest = int(nvec.max())
    for name in ("get_avail_actions", "get_legal_moves"):
        masks_of = getattr(env, name, None)
        if not callable(masks_of):
            continue

        def legal(obs, state, masks_of=masks_of):
            masks = masks_of(state)
            return jnp.stack([jnp.pad(jnp.asarray(masks[agent], bool).reshape(-1), (0, widest - int(n)))
                              for agent, n in zip(agents, nvec)])
        try:
            jax.eval_shape(lambda key: legal(*reset(key)), jax.random.PRNGKey(0))
        except NotImplementedError:   # the base class's, where an env keeps every action available
            continue
        return legal
    return None


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
