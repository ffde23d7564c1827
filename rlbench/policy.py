"""Policies pick one batch of actions per vector step, as a training loop would.

The harness times every call (the env/policy split per cell), so adapters only call the policy.
Built-ins are registered by import path in rlbench.registry; framework policies (`mlp` in torch)
register from adapters/ like adapters do.
"""
from time import perf_counter_ns

import numpy as np

from rlbench import registry
from rlbench.busy import busy_wait_us
from rlbench.workload import USER


class PolicyClock:
    """Nanoseconds spent inside policies of this process since the last reset."""
    ns = 0
    calls = 0

    @classmethod
    def reset(cls):
        cls.ns = 0
        cls.calls = 0


class TimedPolicy:
    """A recurrent policy (`lstm`, or a user's act function with `act.recurrent = True`) is called as
    `act(obs, starts, env_ids)`: `starts` marks the observations that begin an episode (its state is zeroed
    there), `env_ids` which envs an async batch holds (None: the first len(obs)). Adapters pass them only
    when `recurrent`, so a feed-forward policy costs no mask."""

    def __init__(self, fn):
        self.fn = fn
        self.net = getattr(fn, "net", None)  # the torch module of a trainable policy, else None
        self.recurrent = bool(getattr(fn, "recurrent", False))

    def __call__(self, obs, starts=None, env_ids=None):
        t0 = perf_counter_ns()
        actions = self.fn(obs, starts, env_ids) if self.recurrent else self.fn(obs)
        PolicyClock.ns += perf_counter_ns() - t0
        PolicyClock.calls += 1
        return actions


def batch_counter(space):
    """obs batch -> how many observations it holds, for batches of this single-env space: the first part
    of nested Dicts and Tuples, found once here. A part that is no array (Text, Sequence, Graph, a custom
    Space) is batched as a tuple of observations, which the space tells from a Tuple space's batch."""
    import gymnasium as gym
    path = []
    while isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        key = next(iter(space.spaces)) if isinstance(space, gym.spaces.Dict) else 0
        path.append(key)
        space = space[key]
    if not path:
        return len

    def count(obs) -> int:
        for key in path:
            obs = obs[key]
        return len(obs)
    return count


def random_sampler(action_space, rng: np.random.Generator):
    """n -> n independent uniform actions, the same way for every adapter. The space is inspected
    once here, not inside the timed unit."""
    import gymnasium as gym
    if isinstance(action_space, gym.spaces.Discrete):
        low, high = int(action_space.start), int(action_space.start + action_space.n)
        return lambda n: rng.integers(low, high, size=n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        low, high = action_space.start, action_space.start + action_space.nvec
        return lambda n: rng.integers(low, high, size=(n, *action_space.shape)).astype(action_space.dtype)
    if isinstance(action_space, gym.spaces.MultiBinary):
        return lambda n: rng.integers(0, 2, size=(n, *action_space.shape)).astype(action_space.dtype)
    if isinstance(action_space, gym.spaces.Box):
        low = np.where(np.isfinite(action_space.low), action_space.low, -1.0)
        high = np.where(np.isfinite(action_space.high), action_space.high, 1.0)
        shape, dtype = action_space.shape, action_space.dtype
        return lambda n: rng.uniform(low, high, size=(n, *shape)).astype(dtype)
    action_space.seed(int(rng.integers(0, 2**31 - 1)))   # any other space samples itself: seeded from ours
    if isinstance(action_space, gym.spaces.Tuple):
        return lambda n: _objects([action_space.sample() for _ in range(n)])
    return lambda n: np.stack([action_space.sample() for _ in range(n)])


def _objects(actions: list) -> np.ndarray:
    """One env's action per entry, as the env takes it: a Tuple space's tuples stay tuples (np.stack would make
    them rows of an array, which an env asserting a tuple, as highway-env's multi-agent action does, refuses)."""
    out = np.empty(len(actions), dtype=object)
    for i, action in enumerate(actions):
        out[i] = action
    return out


def random_policy(spec, observation_space, action_space, seed):
    sample, count = random_sampler(action_space, np.random.default_rng(seed)), batch_counter(observation_space)
    return lambda obs: sample(count(obs))


def fixed_cost_policy(spec, observation_space, action_space, seed):
    sample, count = random_sampler(action_space, np.random.default_rng(seed)), batch_counter(observation_space)

    def act(obs):
        busy_wait_us(spec.cost_us)
        return sample(count(obs))
    return act


def make_policy(workload, observation_space, action_space, batch_size: int = None):
    """Build the workload's policy for batches of observations from single-env spaces; `batch_size`: the
    observations per call when it is not num_envs (EnvPool's async batches)."""
    spec = workload.policy
    if spec.name == USER:
        factory = registry.load_factory(spec.factory, "policy")
        fn = factory(observation_space, action_space, batch_size or workload.num_envs, **dict(spec.kwargs))
        return TimedPolicy(_as_numpy(fn))
    return TimedPolicy(registry.policy(spec.name)(spec, observation_space, action_space, workload.seed))


def _as_numpy(fn):
    """A user's policy may answer with a torch tensor (on any device): made a numpy array inside the
    timed call, since moving it off the device is part of what the policy costs."""
    def act(obs, *state):
        actions = fn(obs, *state)
        if type(actions).__module__.startswith("torch"):
            actions = actions.detach().cpu().numpy()
        return actions
    act.recurrent = getattr(fn, "recurrent", False)
    return act
