"""Pgx's API (its board games, a user's env written to it): init(key) -> State, step(state, action, key),
observe, num_actions, observation_shape; the state holds every player's rewards and the legal actions."""
from adapters._kit.jax_apis._declared import box, has_attributes, has_methods
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _obs_size, _restart
from rlbench.api import JaxEnvApi, register_jax_env_api


@register_jax_env_api
class Pgx(JaxEnvApi):
    name = "pgx"
    title = "Pgx's"
    description = "init, step, observe, num_actions"
    order = 30

    def detect(self, env) -> bool:
        return has_methods(env, "init", "step", "observe") and has_attributes(env, "num_actions", "observation_shape")

    def spaces(self, env, params) -> tuple:
        import gymnasium as gym
        return box(env.observation_shape), gym.spaces.Discrete(env.num_actions)

    def load(self, jax, env, params) -> FunctionalEnv:
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
