"""XLand-MiniGrid's API: reset(params, key) and step(params, timestep, action) -> TimeStep, num_actions(params),
observation_shape(params), default_params(); xminigrid.make returns (env, params)."""
from adapters._kit.jax_apis._declared import box, has_methods
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _obs_size, _restart
from rlbench.api import JaxEnvApi, register_jax_env_api


@register_jax_env_api
class XLandMiniGrid(JaxEnvApi):
    name = "xminigrid"
    title = "XLand-MiniGrid's"
    description = "reset(params, key), step(params, timestep, action), num_actions, default_params"
    order = 40
    pairs = True

    def detect(self, env) -> bool:
        return has_methods(env, "reset", "step", "num_actions", "default_params")

    def spaces(self, env, params) -> tuple:
        import gymnasium as gym
        params = getattr(env, "default_params", None) if params is None else params
        return box(env.observation_shape(params)), gym.spaces.Discrete(env.num_actions(params))

    def load(self, jax, env, params) -> FunctionalEnv:
        """XLand-MiniGrid: the state is its TimeStep (step takes the last one); params come from xminigrid.make."""
        import jax.numpy as jnp
        params = getattr(env, "default_params", None) if params is None else params

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
