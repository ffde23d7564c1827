"""gymnax's API (gymnax's own envs, Craftax's, popgym-arcade's, a user's env written to it): reset(key, params),
step(key, state, action, params), action_space(params) and observation_space(params), default_params; gymnax.make
returns (env, params)."""
from adapters._kit.jax_apis._declared import has_attributes, has_methods
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _action, _obs_size, _restart
from rlbench.api import JaxEnvApi, register_jax_env_api


@register_jax_env_api
class Gymnax(JaxEnvApi):
    name = "gymnax"
    title = "gymnax's"
    description = "reset, step, action_space, observation_space, default_params"
    order = 10
    pairs = True

    def detect(self, env) -> bool:
        return has_methods(env, "reset", "step", "action_space", "observation_space") and \
            has_attributes(env, "default_params")

    def spaces(self, env, params) -> tuple:
        """Built from its params (its default ones where the factory returned the env alone)."""
        params = _params(env, params)
        return env.observation_space(params), env.action_space(params)

    def load(self, jax, env, params) -> FunctionalEnv:
        """gymnax's step returns (obs, state, reward, done, info), or since gymnax 1.0 (obs, state, reward,
        terminated, truncated, info): either is read. An env written for gymnax before 1.0 (popgym-arcade's, on
        stable-gymnax: its state has no `time`, its step_env's done holds the time limit) cannot answer 1.0's
        is_truncated, so it steps as gymnax then did: step_env, and reset_env where done."""
        import jax.numpy as jnp
        params = _params(env, params)

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


def _params(env, params):
    """The params of the factory's (env, params) pair, else the env's default ones."""
    return getattr(env, "default_params", None) if params is None else params


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
