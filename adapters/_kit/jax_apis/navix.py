"""Navix's API: reset(key) and step(timestep, action) -> Timestep with observation, reward and step_type,
action_space and observation_space attributes (spaces, not methods: a shape and bounds)."""
from adapters._kit.jax_apis._declared import box, declared_actions, has_methods, spaces_as_attributes
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _action, _obs_size, _restart
from rlbench.api import JaxEnvApi, register_jax_env_api


@register_jax_env_api
class Navix(JaxEnvApi):
    name = "navix"
    title = "Navix's"
    description = ("reset(key) and step(timestep, action) returning a Timestep with observation, reward and "
                   "step_type, action_space and observation_space attributes")
    order = 60

    def detect(self, env) -> bool:
        return has_methods(env, "reset", "step") and spaces_as_attributes(env)

    def spaces(self, env, params) -> tuple:
        return box(tuple(env.observation_space.shape)), declared_actions(env.action_space)

    def load(self, jax, env, params) -> FunctionalEnv:
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
