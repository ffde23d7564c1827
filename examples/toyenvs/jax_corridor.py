"""The corridor of `toyenvs` written in JAX, the way JAX env packages are: pure functions of an explicit
state, one env at a time (the caller vmaps), with the APIs such packages offer. rlbench knows none of them.

    PYTHONPATH=examples rlbench run --adapter gymnax --num-envs 256,4096 --env toyenvs.jax_corridor:make_gymnax
    PYTHONPATH=examples rlbench run --adapter gymnax --env toyenvs.jax_corridor:make_jumanji --policy mlp

`make_gymnax` returns an env with gymnax's API (`reset(key, params)`, `step(key, state, action, params)`
returning obs, state, reward, done, info and resetting a finished env itself, `default_params`,
`action_space(params)`); `make_gymnax_before_1` the same on gymnax's base class as envs written before
gymnax 1.0 are; `make_jumanji` one with Jumanji's (`reset(key)` and `step(state, action)` returning
(state, TimeStep), no reset inside, `action_spec`, a structured `observation_spec`); `make_brax` one with
Brax's (`reset(rng)` and `step(state, action)` returning a State with obs, reward and done, no reset inside,
`action_size`, `observation_size`; one continuous action in [-1, 1], rounded to a move); `make_navix` one with
Navix's (`reset(key)` and `step(timestep, action)` returning the next Timestep with `step_type` 1 or 2 at an
episode's end, a step from such a timestep being its reset, and `_step` the transition alone; spaces as
attributes); `make_jaxmarl` a team of `num_agents` with JaxMARL's (`agents`, `reset(key)` and
`step(key, state, actions)` with observations, rewards and dones by agent, "__all__" the episode's, resetting a
finished env itself; `action_space(agent)`, `get_avail_actions(state)`: "left" is unavailable at cell 0, where it
does nothing; each agent walks its own corridor, the episode ends once all stand at the goal); `make_gxm` one with
gxm's (`init(key)`, `step(key, state, action)` returning (state, Timestep) with next_obs, reward, terminated and
truncated, resetting a finished env itself; spaces as attributes); `make_gymnax_pixels` the gymnax one seen as
a pixel env's screen, for the CNN policies: a `height` x `width` x 3 uint8 image (`layout="hwc"`, as a game's RGB
screen comes) or 4 x `height` x `width` float32 planes in [0, 1] (`layout="chw"`, as stacked frames come), the
agent's cell lit in the first channel, the goal's in the second, the time left in the third. The agent starts at
cell 0 and moves left, stays or moves right (actions 0, 1, 2; Brax's -1, 0, 1); reaching cell `length - 1` pays
1 and ends the episode, as does `episode_len` steps. The APIs give the same transitions under the same actions.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp


class State(NamedTuple):
    pos: jnp.ndarray
    t: jnp.ndarray


class Observation(NamedTuple):
    position: jnp.ndarray   # float32[2]: where the agent is and how far the goal, in [0, 1]
    cell: jnp.ndarray       # int32


class Params(NamedTuple):
    length: int
    episode_len: int

    @property
    def max_steps_in_episode(self) -> int:
        return self.episode_len


class Discrete(NamedTuple):
    n: int


class Box(NamedTuple):
    low: float
    high: float
    shape: tuple
    dtype: object


def _observe(pos, length) -> Observation:
    x = pos.astype(jnp.float32) / (length - 1)
    return Observation(jnp.stack([x, 1.0 - x]), pos.astype(jnp.int32))


def _move(state, action, params):
    pos = jnp.clip(state.pos + action - 1, 0, params.length - 1)
    t = state.t + 1
    at_goal = pos == params.length - 1
    return State(pos, t), at_goal.astype(jnp.float32), jnp.logical_or(at_goal, t >= params.episode_len)


def _flat(ob: Observation):
    return jnp.concatenate([ob.position, ob.cell[None].astype(jnp.float32)])


class GymnaxCorridor:
    def __init__(self, length: int = 16, episode_len: int = 200):
        self.default_params = Params(int(length), int(episode_len))

    def reset(self, key, params):
        state = State(jnp.int32(0), jnp.int32(0))
        return _flat(_observe(state.pos, params.length)), state

    def step(self, key, state, action, params):
        state, reward, done = _move(state, action, params)
        _, fresh = self.reset(key, params)
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, state)  # a finished env starts over
        return _flat(_observe(state.pos, params.length)), state, reward, done, {}

    def action_space(self, params):
        return Discrete(3)

    def observation_space(self, params):
        return Box(0.0, float(params.length), (3,), jnp.float32)


class TimeStep(NamedTuple):
    step_type: jnp.ndarray   # 0 first, 1 mid, 2 last (dm_env's and Jumanji's StepType)
    reward: jnp.ndarray
    discount: jnp.ndarray
    observation: Observation

    def last(self):
        return self.step_type == 2


class DiscreteArray(NamedTuple):
    num_values: int
    shape: tuple = ()
    dtype: object = jnp.int32


class JumanjiCorridor:
    def __init__(self, length: int = 16, episode_len: int = 200):
        self.params = Params(int(length), int(episode_len))
        self.time_limit = int(episode_len)

    def reset(self, key):
        state = State(jnp.int32(0), jnp.int32(0))
        return state, TimeStep(jnp.int32(0), jnp.float32(0), jnp.float32(1), _observe(state.pos, self.params.length))

    def step(self, state, action):
        state, reward, done = _move(state, action, self.params)
        return state, TimeStep(jnp.where(done, 2, 1).astype(jnp.int32), reward, 1.0 - done.astype(jnp.float32),
                               _observe(state.pos, self.params.length))

    @property
    def action_spec(self):
        return DiscreteArray(3)

    @property
    def observation_spec(self):
        return Observation(Box(0.0, 1.0, (2,), jnp.float32), DiscreteArray(self.params.length))


class BraxState(NamedTuple):
    pipeline_state: State
    obs: jnp.ndarray       # float32[3], as make_gymnax's
    reward: jnp.ndarray
    done: jnp.ndarray      # 1.0 once the episode ended (Brax's done is a float)


class BraxCorridor:
    def __init__(self, length: int = 16, episode_len: int = 200):
        self.params = Params(int(length), int(episode_len))

    def reset(self, rng):
        state = State(jnp.int32(0), jnp.int32(0))
        return BraxState(state, _flat(_observe(state.pos, self.params.length)), jnp.float32(0), jnp.float32(0))

    def step(self, state, action):
        move = jnp.clip(jnp.round(action[0]), -1, 1).astype(jnp.int32) + 1
        inner, reward, done = _move(state.pipeline_state, move, self.params)
        return BraxState(inner, _flat(_observe(inner.pos, self.params.length)), reward, done.astype(jnp.float32))

    @property
    def action_size(self):
        return 1

    @property
    def observation_size(self):
        return 3


class NavixTimestep(NamedTuple):
    t: jnp.ndarray
    observation: jnp.ndarray   # float32[3], as make_gymnax's
    reward: jnp.ndarray
    step_type: jnp.ndarray     # 0 transition, 1 truncation, 2 termination (Navix's)
    state: State


class Bounded(NamedTuple):   # Navix's spaces: a shape and bounds; a discrete one's count is maximum + 1
    shape: tuple
    minimum: object
    maximum: object

    @property
    def n(self):
        return self.maximum + 1


class NavixCorridor:
    def __init__(self, length: int = 16, episode_len: int = 200):
        self.params = Params(int(length), int(episode_len))
        self.max_steps = int(episode_len)
        self.action_space = Bounded((), 0, 2)
        self.observation_space = Bounded((3,), 0.0, float(length))

    def reset(self, key):
        state = State(jnp.int32(0), jnp.int32(0))
        return NavixTimestep(jnp.int32(0), _flat(_observe(state.pos, self.params.length)), jnp.float32(0),
                             jnp.int32(0), state)

    def _step(self, timestep, action):
        state, reward, at_end = _move(timestep.state, action, self.params)
        kind = jnp.where(state.pos == self.params.length - 1, 2, jnp.where(at_end, 1, 0)).astype(jnp.int32)
        return NavixTimestep(state.t, _flat(_observe(state.pos, self.params.length)), reward, kind, state)

    def step(self, timestep, action):
        return jax.lax.cond(timestep.step_type > 0, lambda ts: self.reset(jax.random.PRNGKey(0)),
                            lambda ts: self._step(ts, action), timestep)


class GxmTimestep(NamedTuple):
    next_obs: jnp.ndarray
    reward: jnp.ndarray
    terminated: jnp.ndarray
    truncated: jnp.ndarray


class GxmBox(NamedTuple):
    low: float
    high: float
    shape: tuple


class GxmCorridor:
    def __init__(self, length: int = 16, episode_len: int = 200):
        self.params = Params(int(length), int(episode_len))
        self.action_space = Discrete(3)
        self.observation_space = GxmBox(0.0, float(length), (3,))

    def init(self, key):
        state = State(jnp.int32(0), jnp.int32(0))
        return state, GxmTimestep(_flat(_observe(state.pos, self.params.length)), jnp.float32(0),
                                  jnp.bool_(False), jnp.bool_(False))

    def reset(self, key, state):
        return self.init(key)

    def step(self, key, state, action):
        state, reward, done = _move(state, action, self.params)
        at_goal = state.pos == self.params.length - 1
        fresh, _ = self.init(key)
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, state)  # a finished env starts over
        return state, GxmTimestep(_flat(_observe(state.pos, self.params.length)), reward, at_goal,
                                  jnp.logical_and(done, ~at_goal))


class JaxMARLCorridors:
    def __init__(self, length: int = 16, episode_len: int = 200, num_agents: int = 1):
        self.params = Params(int(length), int(episode_len))
        self.num_agents = int(num_agents)
        self.agents = [f"agent_{i}" for i in range(self.num_agents)]

    def reset(self, key):
        state = State(jnp.zeros(self.num_agents, jnp.int32), jnp.int32(0))
        return self._observe(state), state

    def _observe(self, state):
        return {agent: _flat(_observe(state.pos[i], self.params.length)) for i, agent in enumerate(self.agents)}

    def step(self, key, state, actions):
        move = jnp.stack([actions[agent] for agent in self.agents])
        pos = jnp.clip(state.pos + move - 1, 0, self.params.length - 1)
        t = state.t + 1
        at_goal = pos == self.params.length - 1
        done = jnp.logical_or(at_goal.all(), t >= self.params.episode_len)
        fresh_obs, fresh = self.reset(key)
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, State(pos, t))
        rewards = {agent: at_goal[i].astype(jnp.float32) for i, agent in enumerate(self.agents)}
        dones = {**{agent: done for agent in self.agents}, "__all__": done}
        return self._observe(state), state, rewards, dones, {}

    def get_avail_actions(self, state):
        return {agent: jnp.array([state.pos[i] > 0, True, True]) for i, agent in enumerate(self.agents)}

    def action_space(self, agent):
        return Discrete(3)

    def observation_space(self, agent):
        return Box(0.0, float(self.params.length), (3,), jnp.float32)


def make_gymnax(length: int = 16, episode_len: int = 200):
    env = GymnaxCorridor(length, episode_len)
    return env, env.default_params   # as gymnax.make returns it


def make_gymnax_before_1(length: int = 16, episode_len: int = 200):
    """gymnax's Environment subclassed as envs written for gymnax before 1.0 are (popgym-arcade's): only
    step_env and reset_env, done holding the time limit, a state without gymnax 1.0's `time`."""
    from gymnax.environments import environment

    class GymnaxCorridorBefore1(environment.Environment):
        @property
        def default_params(self):
            return Params(int(length), int(episode_len))

        def reset_env(self, key, params):
            state = State(jnp.int32(0), jnp.int32(0))
            return _flat(_observe(state.pos, params.length)), state

        def step_env(self, key, state, action, params):
            state, reward, done = _move(state, action, params)
            return _flat(_observe(state.pos, params.length)), state, reward, done, {}

        def action_space(self, params):
            return Discrete(3)

    env = GymnaxCorridorBefore1()
    return env, env.default_params


class GymnaxPixelCorridor(GymnaxCorridor):
    """make_gymnax's corridor, observed as an image (the columns of a cell lit across every row)."""

    def __init__(self, length=16, episode_len=200, height=48, width=64, layout="hwc"):
        super().__init__(length, episode_len)
        if layout not in ("hwc", "chw"):
            raise ValueError(f"layout {layout!r}: hwc (uint8 RGB) or chw (4 float planes)")
        self.height, self.width, self.layout = int(height), int(width), layout

    def _image(self, state, params):
        cell = jnp.arange(self.width) * params.length // self.width   # the cell each column shows
        planes = jnp.stack([cell == state.pos, cell == params.length - 1,
                            jnp.full((self.width,), 1.0 - state.t / params.episode_len), jnp.zeros((self.width,))])
        planes = jnp.broadcast_to(planes[:, None, :].astype(jnp.float32), (4, self.height, self.width))
        if self.layout == "chw":
            return planes
        return (jnp.moveaxis(planes[:3], 0, -1) * 255).astype(jnp.uint8)

    def reset(self, key, params):
        _, state = super().reset(key, params)
        return self._image(state, params), state

    def step(self, key, state, action, params):
        _, state, reward, done, info = super().step(key, state, action, params)
        return self._image(state, params), state, reward, done, info

    def observation_space(self, params):
        if self.layout == "chw":
            return Box(0.0, 1.0, (4, self.height, self.width), jnp.float32)
        return Box(0, 255, (self.height, self.width, 3), jnp.uint8)


def make_gymnax_pixels(length: int = 16, episode_len: int = 200, height: int = 48, width: int = 64,
                       layout: str = "hwc"):
    env = GymnaxPixelCorridor(length, episode_len, height, width, layout)
    return env, env.default_params


def make_jumanji(length: int = 16, episode_len: int = 200):
    return JumanjiCorridor(length, episode_len)


def make_brax(length: int = 16, episode_len: int = 200):
    return BraxCorridor(length, episode_len)


def make_navix(length: int = 16, episode_len: int = 200):
    return NavixCorridor(length, episode_len)


def make_gxm(length: int = 16, episode_len: int = 200):
    return GxmCorridor(length, episode_len)


def make_jaxmarl(length: int = 16, episode_len: int = 200, num_agents: int = 1):
    return JaxMARLCorridors(length, episode_len, num_agents)
