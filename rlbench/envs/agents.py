"""A multi-agent env as every strategy steps it: one reward and one episode end per env step. Multi-agent wrappers
that give gymnasium's signature a Tuple of each agent's observations and actions often give a tuple of each agent's
rewards and terminations too (highway-env's MultiAgentWrapper: `((1.0, 0.0), (False, False), False)`). A framework's
`terminated or truncated` then takes a non-empty tuple for true and resets the env after every step (serial,
SB3's workers and gymnasium's AsyncVectorEnv all did), gymnasium's SyncVectorEnv and DummyVecEnv cannot store such a
reward and fail, and the strategies would not step the same episodes. So, as users do before handing such an env to a
vector env, every adapter's env (make_env) whose actions are a Tuple or Dict is wrapped: the agents' rewards summed,
the episode ended when every agent's has (RLlib's `__all__`, PettingZoo's parallel envs); a scalar passes through.
Docs: docs/protocol.md ("Environments and policies")."""
from functools import cache

import numpy as np

STRUCTURED = (tuple, list, dict, np.ndarray)


def joined(env):
    """The env with one reward and one episode end per step where its actions are a Tuple or Dict; else itself
    (no call added to a single-agent env's step)."""
    if type(env.action_space).__name__ not in ("Tuple", "Dict"):
        return env
    return _wrapper()(env)


def total(reward):
    """The agents' rewards summed (a scalar: itself)."""
    if not isinstance(reward, STRUCTURED):
        return reward
    return float(np.sum(list(reward.values()) if isinstance(reward, dict) else reward))


def every(flags):
    """Whether every agent's flag is set (a single flag: itself)."""
    if not isinstance(flags, STRUCTURED):
        return flags
    return bool(np.all(list(flags.values()) if isinstance(flags, dict) else flags))


@cache
def _wrapper():
    import gymnasium as gym

    class AgentsJoined(gym.Wrapper):
        """One reward (the agents' sum) and one termination and truncation (every agent's) per step."""

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, total(reward), every(terminated), every(truncated), info
    return AgentsJoined
