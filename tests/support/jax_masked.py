"""A JAX env with Jumanji's API built the way real ones are where the harness once failed: its state holds
the observation it returns (one array in two places of the carry: XLA refused to donate it twice), and only some
actions are legal at each step (its observation's `action_mask`, as Jumanji's Snake and Pgx's games): a legal
action pays 1, an illegal one -1000 and ends the episode, so a policy that ever picks an illegal action shows in
the return. Which actions are legal rotates with the step: no fixed action is always right. `make_multi`: the same
with a multi-discrete action (a mask over every combination, a mask and a reward per component, or integers
between bounds), where the harness once sampled a float box and crashed. `make_team`: the "each" case with
JaxMARL's API (two agents of 3 and 4 actions, `get_avail_actions` by agent or Hanabi's `get_legal_moves`, a reward each, its step resetting a
finished env itself), where the masks of unequal widths are padded to one.
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


# -- multi-discrete actions, as Jumanji's BinPack (a mask over every combination), JobShop and its multi-agent envs
# (a mask per component, a reward per agent) and MultiCVRP (integers between bounds, no mask) have them --------

COUNTS = (3, 4)        # the action's components: 3 and 4 choices
LOW, HIGH = 1, 4       # the bounded variant's integers: each component in [1, 4]


class MultiDiscreteArray(NamedTuple):
    num_values: jnp.ndarray
    shape: tuple = (2,)
    dtype: object = jnp.int32


class BoundedArray(NamedTuple):
    shape: tuple
    dtype: object
    minimum: jnp.ndarray
    maximum: jnp.ndarray


class Board(NamedTuple):
    board: jnp.ndarray        # float32[3], drawn at reset


def _joint_mask(t):
    """(3, 4): the combinations whose index i * 4 + j is t or t + 2 mod 5 (two or three of twelve)."""
    index = jnp.arange(12).reshape(COUNTS)
    return (index % 5 == t % 5) | (index % 5 == (t + 2) % 5)


def _each_mask(t):
    """(2, 4), a row per component, padded: one of the first's 3 choices, two of the second's 4."""
    j = jnp.arange(4)
    return jnp.stack([(j < 3) & (j == t % 3), (j == t % 4) | (j == (t + 1) % 4)])


class MultiEnv:
    """mask "joint": one action_mask over every combination (3, 4); "each": a row per component (2, 4) and a reward
    per component, as a multi-agent env's (0.5 each, summed: 1); "bounded": integers in [1, 4], no mask."""
    time_limit = 50

    def __init__(self, mask: str):
        self.mask = mask
        masks = {"joint": _joint_mask, "each": _each_mask}
        self._mask = masks.get(mask)

    def _observe(self, board, t):
        return Observation(board, self._mask(t)) if self._mask else Board(board)

    def reset(self, key):
        obs = self._observe(jax.random.uniform(key, (3,)), jnp.int32(0))
        return State(obs, jnp.int32(0)), TimeStep(jnp.int32(0), self._reward(jnp.bool_(True)), jnp.float32(1), obs)

    def _reward(self, legal):
        each = jnp.where(legal, 0.5, -500.0).astype(jnp.float32)
        return jnp.stack([each, each]) if self.mask == "each" else 2 * each

    def step(self, state, action):
        if self.mask == "joint":
            legal = state.obs.action_mask[action[0], action[1]]
        elif self.mask == "each":
            legal = state.obs.action_mask[0, action[0]] & state.obs.action_mask[1, action[1]]
        else:
            legal = jnp.all((action >= LOW) & (action <= HIGH))
        t = state.t + 1
        obs = self._observe(state.obs.board, t)
        done = ~legal | (t >= self.time_limit)
        return State(obs, t), TimeStep(jnp.where(done, 2, 1).astype(jnp.int32), self._reward(legal), 1.0 - done, obs)

    @property
    def action_spec(self):
        if self.mask == "bounded":
            return BoundedArray((2,), jnp.int32, jnp.int32(LOW), jnp.int32(HIGH))
        return MultiDiscreteArray(jnp.asarray(COUNTS, jnp.int32))

    @property
    def observation_spec(self):
        board = Array((3,), jnp.float32)
        masks = {"joint": Array(COUNTS, bool), "each": Array((2, 4), bool)}
        return Observation(board, masks[self.mask]) if self.mask in masks else Board(board)


def make_multi(mask: str = "joint"):
    return MultiEnv(mask)


class Discrete(NamedTuple):
    n: int


class Team:
    """JaxMARL's MultiAgentEnv as its envs are written: agent_0 chooses among 3 actions, agent_1 among 4, the legal
    ones those of `_each_mask`; 0.5 each for a legal choice, -500 for an illegal one, which ends the episode."""
    time_limit = 50
    agents = ["agent_0", "agent_1"]
    num_agents = 2

    def reset(self, key):
        board = jax.random.uniform(key, (3,))
        return {agent: board for agent in self.agents}, State(Board(board), jnp.int32(0))

    def step(self, key, state, actions):
        mask = _each_mask(state.t)
        legal = [mask[i, actions[agent]] for i, agent in enumerate(self.agents)]
        t = state.t + 1
        done = ~(legal[0] & legal[1]) | (t >= self.time_limit)
        fresh_obs, fresh = self.reset(key)
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, State(state.obs, t))
        rewards = {agent: jnp.where(ok, 0.5, -500.0).astype(jnp.float32) for agent, ok in zip(self.agents, legal)}
        dones = {**{agent: done for agent in self.agents}, "__all__": done}
        return {agent: state.obs.board for agent in self.agents}, state, rewards, dones, {}

    def get_avail_actions(self, state):
        mask = _each_mask(state.t)
        return {"agent_0": mask[0, :3], "agent_1": mask[1]}

    def action_space(self, agent):
        return Discrete(3 if agent == "agent_0" else 4)

    def observation_space(self, agent):
        return Array((3,), jnp.float32)


class HanabiTeam(Team):
    """The masks as Hanabi gives them: `get_legal_moves`, the base class's `get_avail_actions` raising."""
    def get_avail_actions(self, state):
        raise NotImplementedError

    def get_legal_moves(self, state):
        return Team.get_avail_actions(self, state)


def make_team(masks: str = "get_avail_actions"):
    return {"get_avail_actions": Team, "get_legal_moves": HanabiTeam}[masks]()
