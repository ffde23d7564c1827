"""JaxMARL's API (multi-agent: one policy acts for the team): agents, num_agents, reset(key), step(key, state,
actions by agent) returning observations, rewards and dones by agent, action_space(agent) and
observation_space(agent)."""
import math

from adapters._kit.jax_apis._declared import declared_boxes, has_methods
from adapters._kit.jax_env import DEFAULT_EPISODE_STEPS, FunctionalEnv, _action, _obs_size
from rlbench.api import JaxEnvApi, Unsupported, UsageError, register_jax_env_api


@register_jax_env_api
class JaxMARL(JaxEnvApi):
    name = "jaxmarl"
    title = "JaxMARL's"
    description = ("agents, num_agents, reset(key), step(key, state, actions by agent) returning rewards and dones "
                   "by agent, action_space(agent)")
    order = 70
    tried_before = ("gymnax",)   # its envs have gymnax's methods too

    def detect(self, env) -> bool:
        return has_methods(env, "reset", "step", "action_space", "observation_space") and \
            isinstance(getattr(env, "agents", None), (list, tuple)) and bool(getattr(env, "num_agents", None))

    def spaces(self, env, params) -> tuple:
        """The env seen as one agent acting for the team: every agent's observation space (its shape, as the env
        declares it), and one action component per agent (a discrete choice each, or their boxes joined)."""
        import gymnasium as gym
        import numpy as np
        obs_space = gym.spaces.Dict({name: box for agent in env.agents
                                     for name, box in declared_boxes(env.observation_space(agent), str(agent))})
        per_agent = [env.action_space(agent) for agent in env.agents]
        if all(hasattr(s, "n") and not tuple(getattr(s, "shape", ()) or ()) for s in per_agent):
            return obs_space, gym.spaces.MultiDiscrete([int(s.n) for s in per_agent])
        if all(hasattr(s, "low") and hasattr(s, "high") for s in per_agent):
            low, high = (np.concatenate([np.broadcast_to(np.asarray(getattr(s, b), np.float32), s.shape).ravel()
                                         for s in per_agent]) for b in ("low", "high"))
            return obs_space, gym.spaces.Box(low, high, low.shape, np.float32)
        kinds = sorted({type(s).__name__ for s in per_agent})
        raise UsageError(f"its agents' actions are {', '.join(kinds)}: rlbench carries a JaxMARL env whose agents "
                         "all have a Discrete action or all a Box")

    def load(self, jax, env, params) -> FunctionalEnv:
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
