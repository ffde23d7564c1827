"""A JAX env with Jumanji's API built the way real ones are where the harness once failed: its state holds
the observation it returns (one array in two places of the carry: XLA refused to donate it twice), and only some
actions are legal at each step (its observation's `action_mask`, as Jumanji's Snake and Pgx's games): a legal
action pays 1, an illegal one -1000 and ends the episode, so a policy that ever picks an illegal action shows in
the return. Which actions are legal rotates with the step: no fixed action is always right.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

N_ACTIONS = 5


class Observation(NamedTuple):
    board: jnp.ndarray        # float32[3], drawn at reset
    action_mask: jnp.ndarray  # bool[N_ACTIONS]


class State(NamedTuple):
    obs: Observation          # the very arrays the TimeStep carries
    t: jnp.ndarray


class TimeStep(NamedTuple):
    step_type: jnp.ndarray
    reward: jnp.ndarray
    discount: jnp.ndarray
    observation: Observation

    def last(self):
        return self.step_type == 2


class Array(NamedTuple):
    shape: tuple
    dtype: object


class DiscreteArray(NamedTuple):
    num_values: int
    shape: tuple = ()
    dtype: object = jnp.int32


def _mask(t):
    """Two legal actions out of five, moving with the step."""
    return (jnp.arange(N_ACTIONS) == t % N_ACTIONS) | (jnp.arange(N_ACTIONS) == (t + 2) % N_ACTIONS)


class MaskedEnv:
    time_limit = 50

    def reset(self, key):
        obs = Observation(jax.random.uniform(key, (3,)), _mask(jnp.int32(0)))
        return State(obs, jnp.int32(0)), TimeStep(jnp.int32(0), jnp.float32(0), jnp.float32(1), obs)

    def step(self, state, action):
        legal = state.obs.action_mask[action]
        t = state.t + 1
        obs = Observation(state.obs.board, _mask(t))
        done = ~legal | (t >= self.time_limit)
        reward = jnp.where(legal, 1.0, -1000.0).astype(jnp.float32)
        return State(obs, t), TimeStep(jnp.where(done, 2, 1).astype(jnp.int32), reward, 1.0 - done, obs)

    action_spec = DiscreteArray(N_ACTIONS)
    observation_spec = Observation(Array((3,), jnp.float32), Array((N_ACTIONS,), bool))


def make():
    return MaskedEnv()
