"""Jumanji's API (Jumanji's envs, Matrax's, a user's env written to it): reset(key) -> (state, timestep),
step(state, action) -> (state, timestep), action_spec and observation_spec (methods before Jumanji 1.0)."""
import inspect
import math

from adapters._kit.jax_apis._declared import has_attributes, has_methods
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _action, _obs_size, _restart
from rlbench.api import JaxEnvApi, register_jax_env_api

JOINT_MAX = 2**16   # a multi-discrete space with a mask over every combination, up to this many: one choice


@register_jax_env_api
class Jumanji(JaxEnvApi):
    name = "jumanji"
    title = "Jumanji's"
    description = "reset(key), step(state, action), action_spec, observation_spec"
    order = 20

    def detect(self, env) -> bool:
        return has_methods(env, "reset", "step") and has_attributes(env, "action_spec", "observation_spec")

    def spaces(self, env, params) -> tuple:
        """Its own specs."""
        return tuple(s() if inspect.ismethod(s) else s for s in (env.observation_spec, env.action_spec))

    def load(self, jax, env, params) -> FunctionalEnv:
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
            return (_restart(jax, done, fresh.observation, timestep.observation),
                    _restart(jax, done, fresh_state, state), jnp.sum(jnp.asarray(timestep.reward, jnp.float32)), done)

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
