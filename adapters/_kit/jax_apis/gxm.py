"""gxm's API (one API over gymnax's, Pgx's, Navix's, Brax's, XLand-MiniGrid's... envs): init(key) -> (state,
Timestep), step(key, state, action) -> (state, Timestep), action_space and observation_space attributes."""
from adapters._kit.jax_apis._declared import box, declared_actions, declared_shapes, has_methods, spaces_as_attributes
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _action, _obs_size
from rlbench.api import JaxEnvApi, register_jax_env_api


@register_jax_env_api
class Gxm(JaxEnvApi):
    name = "gxm"
    title = "gxm's"
    description = ("init(key), step(key, state, action) returning (state, Timestep), action_space and "
                   "observation_space attributes")
    order = 80
    tried_before = ("navix",)   # its envs have Navix's methods and space attributes too

    def detect(self, env) -> bool:
        return has_methods(env, "init", "reset", "step") and spaces_as_attributes(env)

    def spaces(self, env, params) -> tuple:
        return box(declared_shapes(env.observation_space)), declared_actions(env.action_space, "low", "high")

    def load(self, jax, env, params) -> FunctionalEnv:
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
