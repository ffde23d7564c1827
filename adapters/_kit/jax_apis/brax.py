"""Brax's API (Brax's envs, MuJoCo Playground's, a user's env built on either): reset(rng) and step(state, action)
-> State with obs, reward and done, action_size, observation_size (a length, or Playground's dict of shapes)."""
from adapters._kit.jax_apis._declared import box, has_methods, has_static
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _obs_size, _restart
from rlbench.api import JaxEnvApi, register_jax_env_api


@register_jax_env_api
class Brax(JaxEnvApi):
    name = "brax"
    title = "Brax's"
    description = ("reset(rng) and step(state, action) returning a State with obs, reward and done, action_size, "
                   "observation_size: Brax's and MuJoCo Playground's envs")
    order = 50

    def detect(self, env) -> bool:
        return has_methods(env, "reset", "step") and has_static(env, "action_size", "observation_size")

    def spaces(self, env, params) -> tuple:
        """Its observation size (a length, or a dict of shapes), its actions in [-1, 1]."""
        import gymnasium as gym
        import numpy as np
        size = env.observation_size
        return (box(dict(size) if isinstance(size, dict) else (int(size),)),
                gym.spaces.Box(-1.0, 1.0, (int(env.action_size),), np.float32))

    def load(self, jax, env, params) -> FunctionalEnv:
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
